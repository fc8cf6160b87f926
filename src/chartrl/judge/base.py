"""What every judge shares: the item it judges, the verdict it returns, its usage counters, its failures.

A judge is an object with ``name``, ``kind`` (what it is, for every place its verdicts are shown; the offline
judge says ``reference (not an LLM)``), ``usage`` and ``async judge_many(items) -> list[Verdict]``. The
rewards and scorers receive it as an argument; nothing in chartrl holds a judge in a global.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Protocol, TypeVar

from chartrl.errors import ChartrlError

T = TypeVar("T")


class JudgeUnavailable(ChartrlError):
    """The judge endpoint stayed down (or refused us) after the retries; the message names the endpoint and the
    environment variable that holds its key. Verdicts obtained before the failure are in the cache."""


class JudgeConfigError(ChartrlError):
    """The judge cannot be built as configured (e.g. its key variable is not set)."""

    exit_code = 2


@dataclass(frozen=True)
class JudgeItem:
    """What a judge compares: the final answer (content of the last ``<answer>``) against the reference."""

    question: str
    reference: str
    response: str


@dataclass(frozen=True)
class Verdict:
    """One judgement. ``score`` is 1.0 (correct) or 0.0 (incorrect) for a single judge, the combined score for a
    panel (a fraction for ``mean``), and None when the judge failed (an unparseable reply after every retry):
    a failure is counted as such, never silently turned into "incorrect"."""

    score: float | None
    source: str
    """``reference`` (offline judge), ``request`` (asked the endpoint), ``cache``, ``length_limit`` (over-long,
    judged incorrect without a request), ``panel``, ``failure``."""
    detail: str = ""
    """The judge's reply (shortened) or the reason, for people reading verdicts."""
    votes: Mapping[str, Verdict] = field(default_factory=lambda: MappingProxyType({}))
    """Panel verdicts: the member verdicts by member name."""

    @property
    def failed(self) -> bool:
        return self.score is None

    @property
    def label(self) -> str:
        if self.score is None:
            return "judge_failure"
        if self.score == 1.0:
            return "correct"
        return "incorrect" if self.score == 0.0 else "partial"


@dataclass
class JudgeUsage:
    """Counters a caller logs to MLflow (:func:`chartrl.judge.usage.log_judge_usage`)."""

    verdicts: int = 0
    """Items judged (every source)."""
    requests: int = 0
    """HTTP requests sent (retries included)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_hits: int = 0
    retries: int = 0
    """Requests repeated after a 429, 5xx, timeout, connection error or unparseable reply."""
    unparseable: int = 0
    """Replies the verdict parser could not read (each was retried)."""
    failures: int = 0
    """Items left without a verdict after every retry (counted, never scored as incorrect)."""
    length_rejections: int = 0
    """Over-long responses judged incorrect without a request."""

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def add(self, other: JudgeUsage) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


class Judge(Protocol):
    name: str
    kind: str
    usage: JudgeUsage

    async def judge_many(self, items: Sequence[JudgeItem]) -> list[Verdict]: ...

    def describe(self) -> dict[str, Any]: ...


def over_length(item: JudgeItem, max_response_chars: int) -> bool:
    """Over-long responses are judged incorrect without a request: padding an answer with text aimed at the
    judge is a known judge-hacking route."""
    return len(item.response) > max_response_chars


LENGTH_LIMIT_VERDICT = Verdict(0.0, "length_limit", "response longer than max_response_chars; judged incorrect")


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion from synchronous code: one ``asyncio.run`` per batch. Called from inside a
    running event loop (a notebook, an async caller), it runs on a helper thread with its own loop instead."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def judge_batch(judge: Judge, items: Sequence[JudgeItem]) -> list[Verdict]:
    """Judge ``items`` concurrently and wait for every verdict (synchronous entry point)."""
    return run_sync(judge.judge_many(items))
