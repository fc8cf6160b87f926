"""Atomic output: the target appears complete or not at all."""

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
