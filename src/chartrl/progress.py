"""Progress lines for long work: done/total, rate and ETA, at most every few seconds."""

from __future__ import annotations

import logging
import time


class Progress:
    """Log ``what: done/total (pct) rate/s ETA`` at most every ``interval`` seconds, and once at the end."""

    def __init__(self, what: str, total: int, logger: logging.Logger, interval: float = 5.0, unit: str = "items"):
        self.what, self.total, self.logger, self.interval, self.unit = what, total, logger, interval, unit
        self.done = 0
        self.started = time.monotonic()
        self._last_report = self.started

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if self.done >= self.total or now - self._last_report >= self.interval:
            self._last_report = now
            self.logger.info(self.line(now))

    def line(self, now: float | None = None) -> str:
        elapsed = max((now or time.monotonic()) - self.started, 1e-9)
        rate = self.done / elapsed
        remaining = (self.total - self.done) / rate if rate > 0 else float("inf")
        pct = 100.0 * self.done / self.total if self.total else 100.0
        eta = "done" if self.done >= self.total else f"ETA {_clock(remaining)}"
        return (
            f"{self.what}: {self.done}/{self.total} ({pct:.0f}%) {rate:.1f} {self.unit}/s "
            f"elapsed {_clock(elapsed)} {eta}"
        )


def _clock(seconds: float) -> str:
    if seconds == float("inf"):
        return "?"
    seconds = int(round(seconds))
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"
