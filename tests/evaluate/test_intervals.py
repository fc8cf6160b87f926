"""Bootstrap intervals (scipy's percentile bootstrap): hand-checkable cases, the paired gap uses only shared
questions and undefined resamples of a paired statistic are left out."""

from __future__ import annotations

import pytest

from chartrl.evaluate.intervals import bootstrap_mean, bootstrap_paired_gap

KW = {"samples": 2000, "confidence": 0.95, "seed": 0}


@pytest.mark.parametrize(
    "scores,mean,low,high",
    [
        ([1.0] * 10, 1.0, 1.0, 1.0),  # no spread: the interval is the point
        ([0.0] * 10, 0.0, 0.0, 0.0),
        ([0.0, 1.0] * 50, 0.5, 0.39, 0.61),  # 100 coin flips: about +-1.96 * 0.05
    ],
)
def test_bootstrap_mean(scores, mean, low, high):
    out = bootstrap_mean(scores, **KW)
    assert out["mean"] == pytest.approx(mean)
    assert out["low"] == pytest.approx(low, abs=0.02) and out["high"] == pytest.approx(high, abs=0.02)
    assert out["n"] == len(scores)


def test_empty_scores_have_no_interval():
    assert bootstrap_mean([], **KW) == {"mean": None, "low": None, "high": None, "n": 0}


def test_paired_gap_uses_the_shared_questions_only():
    first = {"a": 1.0, "b": 1.0, "c": 0.0, "only_first": 1.0}
    second = {"a": 0.0, "b": 1.0, "c": 0.0, "only_second": 0.0}
    out = bootstrap_paired_gap(first, second, **KW)
    assert out["n"] == 3 and out["mean"] == pytest.approx(1 / 3)
    assert 0.0 <= out["low"] <= out["mean"] <= out["high"] <= 1.0


def test_identical_policies_have_a_zero_gap():
    scores = {str(i): float(i % 3 == 0) for i in range(60)}
    out = bootstrap_paired_gap(scores, dict(scores), **KW)
    assert out["mean"] == out["low"] == out["high"] == 0.0


def test_a_paired_statistic_leaves_undefined_resamples_out():
    from chartrl.evaluate.diagonal import cohens_kappa
    from chartrl.evaluate.intervals import bootstrap_paired

    assert bootstrap_paired([1, 1, 1], [1, 1, 1], cohens_kappa, **KW) is None  # kappa undefined on every resample
    assert bootstrap_paired([], [], cohens_kappa, **KW) is None
    a, b = [1, 0, 1, 1, 0, 0], [1, 0, 1, 0, 0, 1]  # some resamples draw one class only: kappa undefined there
    low, high = bootstrap_paired(a, b, cohens_kappa, **KW)
    assert -1.0 <= low <= cohens_kappa(a, b) <= high <= 1.0
