"""Bootstrap intervals over test questions: of one accuracy, and of the gap between two policies answering the
same questions (paired: each resample draws questions, and both policies' scores on them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def bootstrap_mean(scores: Sequence[float], *, samples: int, confidence: float, seed: int) -> dict[str, float | None]:
    """Mean of ``scores`` and the percentile interval of the mean over ``samples`` resamples of the questions."""
    values = np.asarray(scores, dtype=float)  # (n,)
    if values.size == 0:
        return {"mean": None, "low": None, "high": None, "n": 0}
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, values.size, size=(samples, values.size))  # (samples, n)
    means = values[picks].mean(axis=1)  # (samples,)
    tail = (1 - confidence) / 2
    return {
        "mean": float(values.mean()),
        "low": float(np.quantile(means, tail)),
        "high": float(np.quantile(means, 1 - tail)),
        "n": int(values.size),
    }


def bootstrap_paired_gap(
    first: Mapping[str, float], second: Mapping[str, float], *, samples: int, confidence: float, seed: int
) -> dict[str, float | None]:
    """Mean of first - second over the questions both answered, with its paired bootstrap interval."""
    shared = sorted(set(first) & set(second))
    return bootstrap_mean([first[i] - second[i] for i in shared], samples=samples, confidence=confidence, seed=seed)
