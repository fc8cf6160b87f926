"""Greedy validation read question by question: the local trainer's ``val_items.jsonl`` (one line per validation
step, ``{"step": N, "scores": {question id: 0 or 1}}``) and the intervals it allows.

Every series of a dataset validates on the same questions, so a difference of two validation accuracies (two
series at one step, one series at two steps, or any sum of such terms) is a mean over those questions of a
per-question difference, and its interval is a paired bootstrap over them (``chartrl.evaluate.intervals``):
narrower than the interval of two independent proportions, which is what remains where per-question results
were not logged (the verl backend, a run folder written before they were).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from chartrl.evaluate.intervals import bootstrap_mean

VAL_ITEMS = "val_items.jsonl"
"""The trainer's per-question validation file in a run folder (``chartrl.train.trainer.VAL_ITEMS``)."""

Scores = Mapping[str, float]
"""Question id -> score at one validation step."""


def read_val_items(path: Path) -> dict[int, dict[str, float]]:
    """Validation step -> question id -> score, from a ``val_items.jsonl``; {} when the file is absent."""
    path = Path(path)
    if not path.is_file():
        return {}
    lines = (json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return {int(line["step"]): dict(line["scores"]) for line in lines}


def run_val_items(results: Path, series_id: str) -> dict[int, dict[str, float]]:
    """The per-question validation scores of train series ``series_id``'s main run."""
    return read_val_items(Path(results) / "runs" / series_id / VAL_ITEMS)


def combined_gap(
    plus: Sequence[Scores], minus: Sequence[Scores], *, samples: int, confidence: float, seed: int
) -> dict[str, Any] | None:
    """Mean over the questions every term scored of sum(plus) - sum(minus), per question, with its paired bootstrap
    interval: for two terms the gap of two accuracies, for four the difference of two gains
    ((c_final - c_matched) - (p_final - p_matched)). None when a term is missing or the terms share no question."""
    terms = [*plus, *minus]
    if not terms or any(not term for term in terms):
        return None
    shared = sorted(set.intersection(*(set(term) for term in terms)))
    if not shared:
        return None
    values = [sum(t[q] for t in plus) - sum(t[q] for t in minus) for q in shared]
    return bootstrap_mean(values, samples=samples, confidence=confidence, seed=seed)


def independent_gap(a: float, b: float, n: int, confidence: float) -> dict[str, Any]:
    """a - b with the normal-approximation interval of two independent proportions over n questions each:
    a - b +- z * sqrt(a(1-a)/n + b(1-b)/n). Wider than the paired interval of the same questions; used where no
    per-question results were logged."""
    from scipy.stats import norm

    z = float(norm.ppf(1 - (1 - confidence) / 2))
    se = math.sqrt(max(a * (1 - a), 0.0) / n + max(b * (1 - b), 0.0) / n)
    return {"mean": a - b, "low": a - b - z * se, "high": a - b + z * se, "n": n}


def accuracy_at(scores: Scores | None, *, samples: int, confidence: float, seed: int) -> dict[str, Any] | None:
    """The validation accuracy of one step's per-question scores, with its bootstrap interval; None without them."""
    if not scores:
        return None
    return bootstrap_mean(list(scores.values()), samples=samples, confidence=confidence, seed=seed)
