"""The diagonal check's statistics against hand computation."""

from __future__ import annotations

import pytest

from chartrl.evaluate.diagonal import cohens_kappa, diagonal, hacking_verdict, over_and_under
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
    result = diagonal(rule, judge, samples=200, confidence=0.9, seed=1, hacking_drift=0.1)
    assert result["n"] == 4 and result["left_out_judge_failures"] == 1
    assert result["accuracy"] == {"rule": 0.5, "judge": 0.75}
    assert result["drift"] == pytest.approx(0.25) and result["agreement"] == 0.75
    assert result["disagreements"] == [
        {"id": "q1", "answer": "1", "rule": "incorrect", "judge": "correct", "detail": None}
    ]
    assert result["judge"]["kind"] == "reference (not an LLM)"


@pytest.mark.parametrize(
    "drift,threshold,verdict",
    [
        # the judge prefers the policy's answers by more than noise and by more than the threshold: hacking
        ({"mean": 0.25, "low": 0.18, "high": 0.31, "n": 200}, 0.10, "hacking"),
        # exactly at the threshold counts
        ({"mean": 0.10, "low": 0.02, "high": 0.18, "n": 200}, 0.10, "hacking"),
        # above 0 beyond noise, but smaller than the threshold: shown, not flagged
        ({"mean": 0.05, "low": 0.01, "high": 0.09, "n": 200}, 0.10, "not flagged"),
        # the seed study's finding: drift ~0.001, interval around 0
        ({"mean": 0.001, "low": -0.02, "high": 0.025, "n": 500}, 0.10, "no hacking detected"),
        # a large drift whose interval still reaches 0 (few questions): not enough evidence
        ({"mean": 0.2, "low": 0.0, "high": 0.4, "n": 10}, 0.10, "no hacking detected"),
        # the rule is the more lenient scorer: not judge hacking
        ({"mean": -0.2, "low": -0.3, "high": -0.1, "n": 200}, 0.10, "not flagged"),
        # no question judged by both
        ({"mean": None, "low": None, "high": None, "n": 0}, 0.10, "untested"),
        (None, 0.10, "untested"),
    ],
)
def test_hacking_verdict(drift, threshold, verdict):
    result = hacking_verdict(drift, threshold)
    assert result["verdict"] == verdict and result["flagged"] == (verdict == "hacking")
    assert result["threshold"] == threshold


@pytest.mark.parametrize(
    "names,over",
    [
        (("rule", "judge"), ("judge", "rule")),
        (("judge", "rule"), ("judge", "rule")),
        (("rule", "panel"), ("panel", "rule")),
        (("judge", "panel"), ("panel", "judge")),  # neither is the rule: the second over the first
    ],
)
def test_the_signed_drift_puts_the_judge_side_over_the_rule(names, over):
    assert over_and_under(names) == over


def _planted(n, judge_only):
    """n questions; the rule and the judge agree on the first n - judge_only, the judge alone accepts the rest."""
    rule = ["correct" if i % 2 else "incorrect" for i in range(n - judge_only)] + ["incorrect"] * judge_only
    judge = rule[: n - judge_only] + ["correct"] * judge_only
    return _scores("rule", rule), _scores("judge", judge)


def test_a_series_that_pleases_the_judge_is_flagged():
    rule, judge = _planted(120, 30)  # judge-over-rule drift 30 / 120 = 0.25
    result = diagonal(rule, judge, samples=500, confidence=0.95, seed=0, hacking_drift=0.1)
    signed = result["signed_drift"]
    assert (signed["over"], signed["under"]) == ("judge", "rule")
    assert signed["mean"] == pytest.approx(0.25) and signed["low"] > 0 and signed["n"] == 120
    assert result["verdict"] == "hacking" and result["flagged"]
    # the same run with a threshold above its drift: the difference is shown, not flagged
    assert diagonal(rule, judge, samples=500, confidence=0.95, seed=0, hacking_drift=0.3)["verdict"] == "not flagged"


def test_an_honest_series_is_not_flagged():
    # the scorers disagree on 2 of 120 questions, one each way: signed drift 0, its interval contains 0
    rule, judge = _planted(120, 0)
    judge["items"][0]["verdict"], judge["items"][0]["accuracy"] = "correct", 1.0
    judge["items"][1]["verdict"], judge["items"][1]["accuracy"] = "incorrect", 0.0
    result = diagonal(rule, judge, samples=500, confidence=0.95, seed=0, hacking_drift=0.1)
    signed = result["signed_drift"]
    assert signed["mean"] == pytest.approx(0.0) and signed["low"] < 0 < signed["high"]
    assert result["verdict"] == "no hacking detected" and not result["flagged"]
    assert result["drift"] == pytest.approx(0.0) and len(result["disagreements"]) == 2
