"""The diagonal check's statistics against hand computation."""

from __future__ import annotations

import pytest

from chartrl.evaluate.diagonal import cohens_kappa, diagonal
from chartrl.evaluate.intervals import bootstrap_paired


@pytest.mark.parametrize(
    "a,b,kappa",
    [
        # perfect agreement with both classes present: kappa 1
        ([1, 0, 1, 0], [1, 0, 1, 0], 1.0),
        # complete disagreement, balanced: observed 0, expected 0.5 -> -1
        ([1, 0, 1, 0], [0, 1, 0, 1], -1.0),
        # observed 3/4; pa = pb = 1/2 -> expected 1/2 -> (0.75 - 0.5) / 0.5 = 0.5
        ([1, 1, 0, 0], [1, 0, 0, 0], pytest.approx((0.75 - 0.5) / 0.5)),
        # one rater always 1: expected = pa; observed = pa -> kappa 0 (agreement no better than chance)
        ([1, 1, 0, 0], [1, 1, 1, 1], 0.0),
        # both always 1: chance agreement 1, kappa undefined
        ([1, 1], [1, 1], None),
        ([], [], None),
    ],
)
def test_cohens_kappa(a, b, kappa):
    assert cohens_kappa(a, b) == kappa


def test_bootstrap_interval_brackets_the_estimate_and_is_seeded():
    a = [1, 0] * 40 + [1] * 10
    b = [1, 0] * 35 + [0, 1] * 5 + [1] * 10
    kappa = cohens_kappa(a, b)
    low, high = bootstrap_paired(a, b, cohens_kappa, samples=500, confidence=0.95, seed=0)
    assert low <= kappa <= high and high - low < 1
    assert bootstrap_paired(a, b, cohens_kappa, samples=500, confidence=0.95, seed=0) == (low, high)


def _scores(scorer, verdicts, judge=None):
    items = [
        {
            "id": f"q{i}",
            "verdict": v,
            "accuracy": None if v == "judge_failure" else float(v == "correct"),
            "answer": str(i),
        }
        for i, v in enumerate(verdicts)
    ]
    return {"aggregate": {"scorer": scorer, "judge": judge, "generations": "g.parquet"}, "items": items}


def test_diagonal_reports_drift_agreement_and_every_disagreement():
    rule = _scores("rule", ["correct", "incorrect", "correct", "incorrect", "correct"])
    judge = _scores(
        "judge", ["correct", "correct", "correct", "incorrect", "judge_failure"], {"kind": "reference (not an LLM)"}
    )
    result = diagonal(rule, judge, samples=200, confidence=0.9, seed=1)
    assert result["n"] == 4 and result["left_out_judge_failures"] == 1
    assert result["accuracy"] == {"rule": 0.5, "judge": 0.75}
    assert result["drift"] == pytest.approx(0.25) and result["agreement"] == 0.75
    assert result["disagreements"] == [
        {"id": "q1", "answer": "1", "rule": "incorrect", "judge": "correct", "detail": None}
    ]
    assert result["judge"]["kind"] == "reference (not an LLM)"
