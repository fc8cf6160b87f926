"""A persistent SQLite cache of judge verdicts, so a rerun never pays (or waits) twice for the same judgement.

The key is the sha256 of (backend, model, prompt-template digest, question, reference, response): changing the
model or editing the prompt template starts afresh; nothing else does. Only verdicts are cached; judge failures
are not (a rerun asks again), and the API key is never part of anything stored. Writes are buffered and
flushed in batches, and always before a judge gives up (so a job that fails keeps every verdict it obtained).
One cache may be shared by several judges (a panel) and threads; SQLite's WAL mode lets several processes of one
machine share the file. On a network filesystem (a cluster's shared one, where verl's reward workers on several
nodes open the same cache) WAL does not work (it needs memory shared by the processes: sqlite.org/wal.html), so the
cache keeps SQLite's rollback journal there, whose locks are the filesystem's.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from chartrl.files import on_network_filesystem

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    key TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    model TEXT NOT NULL,
    template_digest TEXT NOT NULL,
    question TEXT NOT NULL,
    reference TEXT NOT NULL,
    response TEXT NOT NULL,
    score REAL NOT NULL,
    reply TEXT NOT NULL,
    created REAL NOT NULL
)
"""
FLUSH_EVERY = 64


def cache_key(backend: str, model: str, template_digest: str, question: str, reference: str, response: str) -> str:
    fields = [backend, model, template_digest, question, reference, response]
    return hashlib.sha256(json.dumps(fields, ensure_ascii=False).encode()).hexdigest()


def journal_mode(path: Path) -> str:
    """WAL on a local disk; SQLite's rollback journal (DELETE) on a network filesystem, where WAL cannot work."""
    network = on_network_filesystem(path.parent)
    if network is None:
        return "WAL"
    log.info(
        "the judge cache %s is on a network filesystem (%s): using a rollback journal, not WAL; if its locks are "
        "unreliable, set judge.cache_path to a local disk",
        path,
        network,
    )
    return "DELETE"


@dataclass(frozen=True)
class CachedVerdict:
    """A verdict as the cache keeps it: its score and the judge's whole reply (what a fresh verdict shows)."""

    score: float
    reply: str


class VerdictCache:
    """``get``/``put`` verdicts by key; ``path=None`` keeps them in memory only."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path is not None else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._connection = sqlite3.connect(
            str(self.path) if self.path is not None else ":memory:", check_same_thread=False, timeout=30
        )
        with self._lock:
            if self.path is not None:
                self._connection.execute(f"PRAGMA journal_mode={journal_mode(self.path)}")
            self._connection.execute(SCHEMA)
            self._connection.commit()
        self._pending: list[tuple] = []

    def get(self, key: str) -> CachedVerdict | None:
        with self._lock:
            for row in reversed(self._pending):
                if row[0] == key:
                    return CachedVerdict(float(row[7]), row[8])
            found = self._connection.execute("SELECT score, reply FROM verdicts WHERE key = ?", (key,)).fetchone()
        return None if found is None else CachedVerdict(float(found[0]), found[1])

    def put(
        self,
        key: str,
        score: float,
        *,
        backend: str,
        model: str,
        template_digest: str,
        question: str,
        reference: str,
        response: str,
        reply: str,
    ) -> None:
        row = (key, backend, model, template_digest, question, reference, response, score, reply, time.time())
        with self._lock:
            self._pending.append(row)
            full = len(self._pending) >= FLUSH_EVERY
        if full:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            if not self._pending:
                return
            self._connection.executemany(
                "INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", self._pending
            )
            self._connection.commit()
            self._pending = []

    def __len__(self) -> int:
        self.flush()
        with self._lock:
            return self._connection.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]

    def close(self) -> None:
        self.flush()
        with self._lock:
            self._connection.close()
