"""Bootstrap intervals over test questions, one implementation for the report and the diagonal check:
``scipy.stats.bootstrap`` with the percentile method, paired where two scores belong to the same question.

- :func:`bootstrap_mean`: one accuracy (the mean of per-question scores);
- :func:`bootstrap_paired_gap`: the gap between two policies on the questions both answered (each resample draws
  questions, and both policies' scores on them);
- :func:`bootstrap_paired`: any statistic of two paired raters, e.g. Cohen's kappa; resamples where the statistic is
  undefined (it returns None, as kappa does when chance agreement is 1) are left out of the quantiles.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence

import numpy as np


def _resample(data: tuple[np.ndarray, ...], statistic, *, samples: int, confidence: float, seed: int, vectorized: bool):
    """scipy's bootstrap over the questions (the rows of ``data``, paired), percentile method."""
    from scipy.stats import bootstrap

    return bootstrap(
        data,
        statistic,
        n_resamples=samples,
        confidence_level=confidence,
        method="percentile",
        paired=True,
        vectorized=vectorized,
        rng=np.random.default_rng(seed),
    )


def bootstrap_mean(scores: Sequence[float], *, samples: int, confidence: float, seed: int) -> dict[str, float | None]:
    """Mean of ``scores`` and the percentile interval of the mean over ``samples`` resamples of the questions."""
    values = np.asarray(scores, dtype=float)  # (n,)
    if values.size == 0:
        return {"mean": None, "low": None, "high": None, "n": 0}
    if np.all(values == values[0]):  # no spread: every resample has the same mean (scipy warns on a degenerate one)
        low = high = float(values[0])
    else:
        result = _resample((values,), np.mean, samples=samples, confidence=confidence, seed=seed, vectorized=True)
        interval = result.confidence_interval
        low, high = float(interval.low), float(interval.high)
    return {"mean": float(values.mean()), "low": low, "high": high, "n": int(values.size)}


def bootstrap_paired_gap(
    first: Mapping[str, float], second: Mapping[str, float], *, samples: int, confidence: float, seed: int
) -> dict[str, float | None]:
    """Mean of first - second over the questions both answered, with its paired bootstrap interval."""
    shared = sorted(set(first) & set(second))
    return bootstrap_mean([first[i] - second[i] for i in shared], samples=samples, confidence=confidence, seed=seed)


def bootstrap_paired(
    a: Sequence[float],
    b: Sequence[float],
    statistic: Callable[[Sequence[float], Sequence[float]], float | None],
    *,
    samples: int,
    confidence: float,
    seed: int,
) -> tuple[float, float] | None:
    """Percentile interval of ``statistic(a, b)`` over paired resamples of the items; None without items or when
    the statistic is undefined on every resample."""
    if len(a) == 0:
        return None

    def defined(x: np.ndarray, y: np.ndarray) -> float:
        value = statistic(x.tolist(), y.tolist())
        return np.nan if value is None else value

    arrays = (np.asarray(a, dtype=float), np.asarray(b, dtype=float))
    with warnings.catch_warnings():  # undefined resamples (NaN) are left out below, not a user's concern
        warnings.simplefilter("ignore")
        result = _resample(arrays, defined, samples=samples, confidence=confidence, seed=seed, vectorized=False)
    values = result.bootstrap_distribution
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None
    tail = (1 - confidence) / 2
    return float(np.quantile(values, tail)), float(np.quantile(values, 1 - tail))


def bootstrap_over_seeds(
    per_seed: Sequence[Sequence[float]], *, samples: int, confidence: float, seed: int
) -> dict[str, float | None]:
    """The mean over train seeds of each seed's mean per-question value, with a two-level percentile interval
    that holds both kinds of noise: each resample draws as many seeds as there are (with replacement), then, for
    each seed drawn, its questions (with replacement), and averages the seeds' means. One seed gives the
    questions-only interval of :func:`bootstrap_mean`. ``per_seed``: each seed's per-question values (a seed
    without any is left out)."""
    groups = [np.asarray(values, dtype=float) for values in per_seed if len(values)]  # each (n_s,)
    if not groups:
        return {"mean": None, "low": None, "high": None, "n": 0, "seeds": 0}
    if len(groups) == 1:
        return {**bootstrap_mean(groups[0], samples=samples, confidence=confidence, seed=seed), "seeds": 1}
    rng = np.random.default_rng(seed)
    k = len(groups)
    replicates = np.empty(samples)  # (samples,)
    for b in range(samples):
        drawn = rng.integers(0, k, size=k)  # (k,): seeds, with replacement
        replicates[b] = np.mean([groups[s][rng.integers(0, groups[s].size, size=groups[s].size)].mean() for s in drawn])
    alpha = (1 - confidence) / 2
    low, high = np.quantile(replicates, [alpha, 1 - alpha])
    return {
        "mean": float(np.mean([g.mean() for g in groups])),
        "low": float(low),
        "high": float(high),
        "n": int(sum(g.size for g in groups)),
        "seeds": k,
    }
