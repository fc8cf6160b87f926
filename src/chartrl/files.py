"""Atomic file output: a stage writes to a temporary name beside the target and renames it, so a killed job
never leaves a half-written file that looks finished (os.replace is atomic on POSIX within one filesystem)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


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
