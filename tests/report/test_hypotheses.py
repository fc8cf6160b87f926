"""Each generation's hypothesis tested on the run's numbers (chartrl.report.hypotheses): the verdict read from
the interval of the difference, and the difference read from hand-made run files for each metric."""

from __future__ import annotations

import dataclasses
import json

import pytest

from chartrl.config import Hypothesis, load_config
from chartrl.report.hypotheses import collect_hypotheses, hypothesis_verdict

from conftest import REPO


def _d(low, high):
    return {"mean": (low + high) / 2, "low": low, "high": high, "n": 100}


@pytest.mark.parametrize(
    "difference,comparison,threshold,verdict",
    [
        # greater: d > t
        (_d(0.02, 0.10), "greater", 0.0, "supported"),  # the whole interval above 0
        (_d(-0.02, 0.10), "greater", 0.0, "undecided"),  # it reaches below 0
        (_d(-0.10, -0.01), "greater", 0.0, "refuted"),  # the whole interval below 0
        (_d(-0.10, 0.0), "greater", 0.0, "refuted"),  # at most 0: not greater
        (_d(0.02, 0.10), "greater", 0.05, "undecided"),  # above 0, but not all of it above the margin
        (_d(0.06, 0.10), "greater", 0.05, "supported"),
        # not_less: d >= -t (a is not below b by more than t)
        (_d(-0.04, 0.03), "not_less", 0.05, "supported"),  # a small loss within the margin
        (_d(-0.08, 0.03), "not_less", 0.05, "undecided"),
        (_d(-0.12, -0.06), "not_less", 0.05, "refuted"),  # a loss larger than the margin
        (_d(0.0, 0.0), "not_less", 0.0, "supported"),  # identical: not less
        # not_greater: d <= t (e.g. a drift under a bound)
        (_d(-0.02, 0.03), "not_greater", 0.10, "supported"),
        (_d(0.05, 0.15), "not_greater", 0.10, "undecided"),
        (_d(0.12, 0.30), "not_greater", 0.10, "refuted"),  # a planted hack: its drift is above the bound
        # nothing to read
        (None, "greater", 0.0, "untested"),
        ({"mean": None, "low": None, "high": None, "n": 0}, "not_less", 0.0, "untested"),
    ],
)
def test_hypothesis_verdict(difference, comparison, threshold, verdict):
    assert hypothesis_verdict(difference, comparison, threshold) == verdict


def test_an_unknown_comparison_names_the_valid_ones():
    with pytest.raises(ValueError, match="greater, not_greater, not_less"):
        hypothesis_verdict(_d(0, 1), "less", 0.0)


def _record(i, score, qtype, tool_call=True):
    return {"id": f"q{i}", "question_type": qtype, "score": float(score), "tool_call": tool_call}


def _write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))


@pytest.fixture
def run(tmp_path):
    """e1 and e3's test records (value questions: e1 right on all 60, e3 on 15; count: both right on all 40),
    e4's rule scores (e1's checkpoint), e1 and e3's validation items, and e9's diagonal."""
    results = tmp_path / "results"
    records = {
        "e1": [_record(i, 1, "value") for i in range(60)] + [_record(60 + i, 1, "count") for i in range(40)],
        "e3": [_record(i, i < 15, "value", False) for i in range(60)]
        + [_record(60 + i, 1, "count", False) for i in range(40)],
    }
    items = [{"id": f"q{i}#0", "accuracy": 1.0 if i < 90 else 0.0} for i in range(100)]
    _write(results / "eval/e4/scores_rule.json", {"aggregate": {"scorer": "rule"}, "items": items})
    for sid, right in (("e1", 120), ("e3", 100)):
        lines = [
            {"step": step, "scores": {f"v{i}": float(i < right - 20 + step) for i in range(150)}}
            for step in (0, 10, 20)
        ]
        _write(results / f"runs/{sid}/val_items.jsonl", "".join(json.dumps(line) + "\n" for line in lines))
    diagonals = {
        "e9": {"signed_drift": {"over": "judge", "under": "rule", "mean": 0.25, "low": 0.18, "high": 0.32, "n": 200}}
    }
    return results, records, diagonals


def _hypotheses(config, *entries):
    return dataclasses.replace(
        config,
        hypotheses=tuple(
            Hypothesis(id=f"h{i}", generation=g, claim="c", metric=m, series=tuple(s), comparison=c, threshold=t)
            for i, (g, m, s, c, t) in enumerate(entries)
        ),
    )


def test_each_metric_is_read_from_the_run_and_tested(run):
    results, records, diagonals = run
    config = _hypotheses(
        load_config(root=REPO),
        ("v3", "test_accuracy", ["e1", "e3"], "greater", 0.0),
        ("v1", "test_accuracy_value", ["e1", "e3"], "greater", 0.5),
        ("v1", "test_accuracy_count", ["e3", "e1"], "not_less", 0.0),
        ("v1", "tool_call_ratio", ["e1", "e3"], "greater", 0.0),
        ("v1", "val_accuracy", ["e1", "e3"], "greater", 0.0),
        ("v2", "drift", ["e9"], "not_greater", 0.10),
        ("v1", "test_accuracy", ["e4", "e1"], "not_less", 0.0),
        ("v1", "test_accuracy", ["e2", "e1"], "greater", 0.0),
        ("v1", "test_accuracy_pie", ["e1", "e3"], "greater", 0.0),
        ("control", "test_accuracy", ["e1"], "greater", 0.5),
    )
    by_id = collect_hypotheses(config, results, records, diagonals)
    # by generation, then in the config's order
    assert [h["generation"] for h in by_id.values()] == ["v1"] * 7 + ["v2", "v3", "control"]
    assert by_id["h0"]["difference"]["mean"] == pytest.approx(45 / 100) and by_id["h0"]["verdict"] == "supported"
    assert by_id["h1"]["difference"]["n"] == 60 and by_id["h1"]["difference"]["mean"] == pytest.approx(0.75)
    assert by_id["h1"]["verdict"] == "supported"  # 0.75 on value questions, its interval above the 0.5 margin
    assert by_id["h2"]["difference"] == {"mean": 0.0, "low": 0.0, "high": 0.0, "n": 40}
    assert by_id["h2"]["verdict"] == "supported"  # count: identical, so not less
    assert by_id["h3"]["difference"]["mean"] == 1.0 and by_id["h3"]["verdict"] == "supported"
    val = by_id["h4"]
    assert val["step"] == 20 and val["difference"]["mean"] == pytest.approx(20 / 150) and val["verdict"] == "supported"
    assert by_id["h5"]["difference"]["mean"] == 0.25 and by_id["h5"]["verdict"] == "refuted"  # a hack: drift above 0.10
    e4 = by_id["h6"]  # an eval series' scores, paired with a train series' records by question id
    assert (
        e4["difference"]["n"] == 100 and e4["difference"]["mean"] == pytest.approx(-0.10) and e4["verdict"] == "refuted"
    )
    missing = by_id["h7"]
    assert (
        missing["verdict"] == "untested"
        and missing["reason"] == "e2: no test results (results/eval/e2/test_accuracy.json)"
    )
    assert by_id["h8"]["verdict"] == "untested" and "no test question of type 'pie'" in by_id["h8"]["reason"]
    assert by_id["h9"]["difference"]["mean"] == 1.0 and by_id["h9"]["verdict"] == "supported"  # one series: against 0


def test_a_drift_and_a_validation_hypothesis_without_their_files_say_what_is_missing(tmp_path):
    config = _hypotheses(
        load_config(root=REPO),
        ("v2", "drift", ["e8"], "not_greater", 0.1),
        ("v1", "val_accuracy", ["e1", "e3"], "greater", 0.0),
    )
    found = list(collect_hypotheses(config, tmp_path, {}, {}).values())
    assert [h["verdict"] for h in found] == ["untested", "untested"]
    assert "e8: no diagonal check reads its checkpoint" in found[1]["reason"]
    assert found[0]["reason"] == "e1, e3: no results/runs/{series}/val_items.jsonl"
