"""Atomic file output: a stage writes to a temporary name beside the target and renames it, so a killed job
never leaves a half-written file that looks finished (os.replace is atomic on POSIX within one filesystem)."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from chartrl.errors import ChartrlError


@contextmanager
def atomic_path(target: str | Path) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; on success rename it onto ``target``, on error remove it."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def atomic_dir(target: str | Path) -> Iterator[Path]:
    """Yield a temporary folder beside ``target``; on success it replaces ``target`` (a model folder, a
    checkpoint), on error it is removed and any older ``target`` is left as it was."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        yield tmp
        if target.exists():
            old = target.with_name(f".{target.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(target, old)
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_atomically(target: str | Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp_path)`` and move the result onto ``target``."""
    with atomic_path(target) as tmp:
        write(tmp)
    return Path(target)


def storable(text: str) -> str:
    """``text`` unchanged when it encodes as UTF-8, else with each lone surrogate written as its escape
    (``"\\ud800"``). A lone surrogate is what the JSON escape of half a UTF-16 pair decodes to (in a model's tool
    call, in a source file's record); no UTF-8 file, stream or tokenizer takes it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def write_json(target: str | Path, data: Any) -> Path:
    """Write JSON atomically, pretty-printed, with a trailing newline."""
    text = json.dumps(data, indent=2, sort_keys=False, ensure_ascii=False, default=str) + "\n"
    return write_atomically(target, lambda tmp: tmp.write_text(text))


def content_digest(path: str | Path, leave_out: Collection[str] = ()) -> str:
    """sha256 of what ``path`` holds: a file's bytes, or a folder's files (each one's path inside the folder and its
    bytes, in sorted order; the files named in ``leave_out`` at the folder's top left out). Where the path lives
    does not count, so a moved results folder keeps its digests."""
    import hashlib

    path = Path(path)
    digest = hashlib.sha256()
    files = [(path.name, path)] if path.is_file() else [(p.relative_to(path).as_posix(), p) for p in _files_in(path)]
    files = [(name, file) for name, file in files if name not in leave_out]
    if not files and not path.is_dir():
        raise FileNotFoundError(f"{path}: no such file or folder to digest")
    for name, file in files:
        digest.update(f"\0{name}\0".encode())
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _files_in(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


class FolderBusy(ChartrlError):
    """Another process holds a folder's writer lock (:func:`sole_writer`)."""


@contextmanager
def sole_writer(folder: str | Path, wait_s: float = 30.0, what: str = "this folder") -> Iterator[None]:
    """Hold ``folder``'s writer lock (``.writer.lock`` inside it, an exclusive ``flock``) while the block runs, so
    that one process at a time writes there. A holder that is still ending (a job stopped a moment ago) is waited
    for up to ``wait_s`` seconds; one that stays raises :class:`FolderBusy` naming its process id. The kernel
    drops the lock when its holder dies, however it dies."""
    import fcntl
    import time

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / ".writer.lock"
    with open(lock, "a+") as handle:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    handle.seek(0)
                    holder = handle.read().strip() or "unknown"
                    raise FolderBusy(
                        f"{folder}: another process (pid {holder}) is writing {what}; wait for it to end or stop "
                        "it, then rerun"
                    ) from None
                time.sleep(0.2)
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)  # the pid stays: it is read only while the lock is held


NETWORK_FILESYSTEMS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "ceph", "glusterfs", "fuse.glusterfs",
     "fuse.sshfs", "fuse.cephfs", "afs", "9p", "wekafs", "panfs", "orangefs", "virtiofs"}
)  # fmt: skip
"""Filesystems whose files other machines share (the shared filesystems of HPC clusters among them): SQLite's WAL
mode does not work there, and its locks are only as good as the filesystem's (sqlite.org/wal.html, "WAL does not
work over a network filesystem"; sqlite.org/howtocorrupt.html, section 2.1)."""


def _unescape_mount_field(field: str) -> str:
    """A field of /proc/mounts, whose spaces, tabs, newlines and backslashes are written as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), field)


def filesystem_type(path: str | Path, mounts: str | None = None) -> str:
    """The type of the filesystem ``path`` lies on (``ext4``, ``nfs4``, ...): that of the longest mount point above
    it in ``mounts`` (the text of /proc/self/mounts, read when None); ``unknown`` when there is none to read."""
    if mounts is None:
        try:
            mounts = Path("/proc/self/mounts").read_text()
        except OSError:
            return "unknown"
    target = Path(os.path.abspath(path))
    found, depth = "unknown", -1
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = Path(_unescape_mount_field(fields[1]))
        if (target == point or point in target.parents) and len(point.parts) > depth:
            found, depth = fields[2], len(point.parts)
    return found


def on_network_filesystem(path: str | Path) -> str | None:
    """The network filesystem type ``path`` lies on (:data:`NETWORK_FILESYSTEMS`), or None for a local one."""
    kind = filesystem_type(path)
    return kind if kind in NETWORK_FILESYSTEMS else None
