"""Atomic output: the target appears complete or not at all. Content digests: what a folder holds, not where it
is. A run folder's writer lock: one process at a time."""

from __future__ import annotations

import pytest

from chartrl.files import atomic_path, write_json


def test_a_failed_write_leaves_neither_target_nor_temporary(tmp_path):
    target = tmp_path / "sub" / "out.json"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text('{"half": ')
            raise RuntimeError("killed mid-write")
    assert not target.exists()
    assert list(target.parent.iterdir()) == []


def test_a_failed_rewrite_keeps_the_old_file(tmp_path):
    target = write_json(tmp_path / "card.json", {"rows": 1})
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("partial")
            raise RuntimeError("killed")
    assert target.read_text() == '{\n  "rows": 1\n}\n'


def test_atomic_dir_replaces_a_folder_only_when_complete(tmp_path):
    from chartrl.files import atomic_dir

    target = tmp_path / "model"
    with atomic_dir(target) as tmp:
        (tmp / "weights").write_text("v1")
    assert (target / "weights").read_text() == "v1"
    with pytest.raises(RuntimeError):
        with atomic_dir(target) as tmp:
            (tmp / "weights").write_text("half of v2")
            raise RuntimeError("killed")
    assert (target / "weights").read_text() == "v1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
    with atomic_dir(target) as tmp:
        (tmp / "weights").write_text("v2")
    assert (target / "weights").read_text() == "v2" and sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_a_content_digest_follows_the_bytes_and_names_not_the_place(tmp_path):
    from chartrl.files import content_digest

    def folder(name: str, files: dict[str, bytes]):
        root = tmp_path / name
        for relative, data in files.items():
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            (root / relative).write_bytes(data)
        return root

    model = {"config.json": b"{}", "weights/model.safetensors": b"\x00\x01"}
    base = content_digest(folder("a", model))
    assert content_digest(folder("elsewhere/b", model)) == base  # moved: the same content
    assert content_digest(folder("c", {**model, "weights/model.safetensors": b"\x00\x02"})) != base  # a byte
    assert content_digest(folder("d", {"config.json": b"{}", "weights/other.safetensors": b"\x00\x01"})) != base
    assert content_digest(folder("e", {**model, "extra.txt": b""})) != base  # an added (even empty) file
    with pytest.raises(FileNotFoundError, match="no-such"):
        content_digest(tmp_path / "no-such")


def test_a_folder_has_one_writer_at_a_time_and_a_rerun_names_the_holder(tmp_path):
    import subprocess
    import sys

    from chartrl.files import FolderBusy, sole_writer

    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from chartrl.files import sole_writer\n"
         "with sole_writer(sys.argv[1]):\n    print('held', flush=True); time.sleep(3)", str(tmp_path / "run")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(FolderBusy, match=f"another process \\(pid {holder.pid}\\) is writing e1's run"):
        with sole_writer(tmp_path / "run", wait_s=0.2, what="e1's run"):
            pass
    with sole_writer(tmp_path / "run", wait_s=60):  # a holder that is ending is waited for, not refused
        assert holder.wait(timeout=60) == 0  # it let go when its block ended, before its process did
