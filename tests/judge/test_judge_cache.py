"""The verdict cache's journal: SQLite's WAL on a local disk, its rollback journal on a network filesystem (a
cluster's shared one), where WAL cannot work."""

from __future__ import annotations

import sqlite3

import pytest

from chartrl import files
from chartrl.judge.cache import VerdictCache

VERDICT = {"backend": "openai", "model": "m", "template_digest": "t", "question": "q", "reference": "1",
           "response": "<answer>1</answer>", "reply": "correct"}  # fmt: skip


def journal_of(path) -> str:
    connection = sqlite3.connect(path)
    try:
        return connection.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        connection.close()


@pytest.mark.parametrize("filesystem, journal", [("ext4", "wal"), ("nfs4", "delete"), ("lustre", "delete")])
def test_the_cache_keeps_wal_off_a_network_filesystem(tmp_path, monkeypatch, filesystem, journal):
    monkeypatch.setattr(files, "filesystem_type", lambda path, mounts=None: filesystem)
    cache = VerdictCache(tmp_path / "cache.sqlite")
    cache.put("k", 1.0, **VERDICT)
    cache.close()
    assert journal_of(tmp_path / "cache.sqlite") == journal
    assert VerdictCache(tmp_path / "cache.sqlite").get("k").score == 1.0  # the verdict kept, in either mode
