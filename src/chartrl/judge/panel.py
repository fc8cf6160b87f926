"""A panel of judges (models or prompts) behind the one-judge interface; verdicts combined by majority or mean.

Members judge the same batch concurrently. A member's failure is left out of the vote; when every member fails
on an item, the panel fails on it too (a failure, never "incorrect").
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from types import MappingProxyType
from typing import Any

from chartrl.judge.base import Judge, JudgeItem, JudgeUsage, Verdict


def majority(scores: Sequence[float]) -> float:
    """1 when more than half of the votes say correct; a tie is incorrect."""
    return 1.0 if sum(scores) > len(scores) / 2 else 0.0


def mean(scores: Sequence[float]) -> float:
    """The share of votes saying correct."""
    return sum(scores) / len(scores)


COMBINE: dict[str, Callable[[Sequence[float]], float]] = {"majority": majority, "mean": mean}


def get_combine(name: str) -> Callable[[Sequence[float]], float]:
    if name not in COMBINE:
        raise KeyError(f"unknown panel combination {name!r}; valid: {', '.join(sorted(COMBINE))}")
    return COMBINE[name]


class JudgePanel:
    backend = "panel"

    def __init__(self, members: Sequence[Judge], combine: str = "majority", name: str = "panel"):
        if not members:
            raise ValueError("a judge panel needs at least one member")
        names = [m.name for m in members]
        if len(set(names)) != len(names):
            raise ValueError(f"panel member names must be unique: {names}")
        self.name, self.members, self.combine_name = name, list(members), combine
        self.combine = get_combine(combine)

    @property
    def kind(self) -> str:
        kinds = sorted({m.kind for m in self.members})
        return f"panel of {len(self.members)} ({self.combine_name}): {', '.join(kinds)}"

    @property
    def usage(self) -> JudgeUsage:
        total = JudgeUsage()
        for member in self.members:
            total.add(member.usage)
        return total

    async def judge_many(self, items: Sequence[JudgeItem]) -> list[Verdict]:
        per_member = await asyncio.gather(*(m.judge_many(items) for m in self.members))
        verdicts = []
        for i in range(len(items)):
            votes = {m.name: per_member[j][i] for j, m in enumerate(self.members)}
            scores = [v.score for v in votes.values() if v.score is not None]
            score = self.combine(scores) if scores else None
            detail = ", ".join(f"{name}: {v.label}" for name, v in votes.items())
            verdicts.append(Verdict(score, "panel" if scores else "failure", detail, MappingProxyType(votes)))
        return verdicts

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "backend": self.backend,
            "combine": self.combine_name,
            "members": [m.describe() for m in self.members],
        }
