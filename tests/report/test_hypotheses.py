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


def _test_file(results, sid, seed, records, sampled=None):
    where = results / "eval" / sid if seed == 0 else results / "seeds" / sid / f"seed{seed}"
    data = {"test": {"items": records}}
    if sampled is not None:
        data["test_sampled"] = {"items": sampled}
    _write(where / "test_accuracy.json", data)


def _diagonal(results, sid, seed, values):
    """A diagonal check whose per-question judge-minus-rule values are ``values``."""
    where = results / "eval" / sid if seed == 0 else results / "seeds" / sid / f"seed{seed}"
    mean = sum(values) / len(values)
    signed = {"over": "judge", "under": "rule", "mean": mean, "low": mean - 0.05, "high": mean + 0.05, "n": len(values)}
    per_question = {f"q{i}#0": v for i, v in enumerate(values)}
    _write(where / "diagonal.json", {"signed_drift": signed, "signed_values": per_question})


@pytest.fixture
def run(tmp_path):
    """Train seed 0's files: e1 and e3's test records (value questions: e1 right on all 60, e3 on 15; count: both
    right on all 40), e4's rule scores (e1's checkpoint), e1 and e3's validation items, and e9's diagonal."""
    results = tmp_path / "results"
    count = [_record(60 + i, 1, "count") for i in range(40)]
    _test_file(results, "e1", 0, [_record(i, 1, "value") for i in range(60)] + count)
    _test_file(
        results,
        "e3",
        0,
        [_record(i, i < 15, "value", False) for i in range(60)]
        + [_record(60 + i, 1, "count", False) for i in range(40)],
    )
    items = [{"id": f"q{i}#0", "accuracy": 1.0 if i < 90 else 0.0} for i in range(100)]
    _write(results / "eval/e4/scores_rule.json", {"aggregate": {"scorer": "rule"}, "items": items})
    for sid, right in (("e1", 120), ("e3", 100)):
        lines = [
            {"step": step, "scores": {f"v{i}": float(i < right - 20 + step) for i in range(150)}}
            for step in (0, 10, 20)
        ]
        _write(results / f"runs/{sid}/val_items.jsonl", "".join(json.dumps(line) + "\n" for line in lines))
    _diagonal(results, "e9", 0, [1] * 50 + [0] * 150)  # judge over rule on a quarter of the questions
    return results


def _hypotheses(config, *entries, seeds=()):
    return dataclasses.replace(
        config,
        extra_seeds=tuple(seeds),
        hypotheses=tuple(
            Hypothesis(id=f"h{i}", generation=g, claim="c", metric=m, series=tuple(s), comparison=c, threshold=t)
            for i, (g, m, s, c, t) in enumerate(entries)
        ),
    )


def test_each_metric_is_read_from_the_run_and_tested(run):
    results = run
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
    by_id = collect_hypotheses(config, results)
    # by generation, then in the config's order
    assert [h["generation"] for h in by_id.values()] == ["v1"] * 7 + ["v2", "v3", "control"]
    assert by_id["h0"]["difference"]["mean"] == pytest.approx(45 / 100) and by_id["h0"]["verdict"] == "supported"
    assert by_id["h1"]["difference"]["n"] == 60 and by_id["h1"]["difference"]["mean"] == pytest.approx(0.75)
    assert by_id["h1"]["verdict"] == "supported"  # 0.75 on value questions, its interval above the 0.5 margin
    assert by_id["h2"]["difference"] == {"mean": 0.0, "low": 0.0, "high": 0.0, "n": 40, "seeds": 1}
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
    assert missing["verdict"] == "untested" and "e2: no test results on seed 0" in missing["reason"]
    assert by_id["h8"]["verdict"] == "untested" and "no test question of type 'pie'" in by_id["h8"]["reason"]
    assert by_id["h9"]["difference"]["mean"] == 1.0 and by_id["h9"]["verdict"] == "supported"  # one series: against 0
    assert all(h["difference"] is None or h["difference"]["seeds"] == 1 for h in by_id.values())  # one seed ran


def test_a_drift_and_a_validation_hypothesis_without_their_files_say_what_is_missing(tmp_path):
    config = _hypotheses(
        load_config(root=REPO),
        ("v2", "drift", ["e8"], "not_greater", 0.1),
        ("v1", "val_accuracy", ["e1", "e3"], "greater", 0.0),
    )
    found = list(collect_hypotheses(config, tmp_path).values())
    assert [h["verdict"] for h in found] == ["untested", "untested"]
    assert "e8: no diagonal check reads its checkpoint on seed 0" in found[1]["reason"]
    assert "e1, e3: no per-question validation results (val_items.jsonl) on seed 0" in found[0]["reason"]


def _sampled(i, well_formed, preamble, outcome, score=1.0):
    return {
        "id": f"q{i}",
        "question_type": "value",
        "score": score,
        "well_formed": well_formed,
        "preamble": preamble,
        "tool_outcome": outcome,
        "tool_call": outcome != "none",
        "correct_label": True if outcome == "executed" else None,
    }


@pytest.mark.parametrize(
    "seed_gaps,verdict",
    [
        ([0.30, 0.25, 0.35], "supported"),  # every seed lower by about a third, a tight pool
        ([0.30, -0.30, 0.35], "undecided"),  # one seed the other way: supported twice and refuted once
        ([0.0, 0.0, 0.0], "refuted"),  # no seed moves
    ],
)
def test_a_habit_hypothesis_is_tested_on_every_seed_and_pooled(tmp_path, seed_gaps, verdict):
    """sampled_format_error_rate, e1 - e6 > 0 (v2's format term removes slips): e1 slips on half of its sampled
    answers on every seed, e6 on half minus each seed's gap."""
    results = tmp_path / "results"
    n = 200
    for seed, gap in enumerate(seed_gaps):
        slips = round(n * (0.5 - gap))
        _test_file(results, "e1", seed, [], [_sampled(i, i >= n // 2, False, "none") for i in range(n)])
        _test_file(results, "e6", seed, [], [_sampled(i, i >= slips, False, "none") for i in range(n)])
    config = _hypotheses(
        load_config(root=REPO), ("v2", "sampled_format_error_rate", ["e1", "e6"], "greater", 0.0), seeds=(1, 2)
    )
    [found] = collect_hypotheses(config, results).values()
    assert sorted(found["seeds"]) == ["0", "1", "2"]
    for seed, gap in enumerate(seed_gaps):
        assert found["seeds"][str(seed)]["difference"]["mean"] == pytest.approx(gap, abs=0.01)
    assert found["difference"]["seeds"] == 3
    assert found["difference"]["mean"] == pytest.approx(sum(seed_gaps) / 3, abs=0.01)
    assert found["verdict"] == verdict
    if verdict == "undecided":  # the pooled interval spans the seeds that disagree
        assert found["difference"]["low"] < 0 < found["difference"]["high"]


def test_each_habit_metric_reads_its_own_field(tmp_path):
    results = tmp_path / "results"
    e1 = [_sampled(i, True, i < 50, "failed" if i < 20 else "executed", score=float(i >= 40)) for i in range(100)]
    e6 = [_sampled(i, True, i < 10, "executed", score=float(i >= 40)) for i in range(100)]
    _test_file(results, "e1", 0, [], e1)
    _test_file(results, "e6", 0, [], e6)
    config = _hypotheses(
        load_config(root=REPO),
        ("v2", "sampled_preamble_rate", ["e1", "e6"], "greater", 0.0),
        ("v2", "sampled_failed_call_rate", ["e1", "e6"], "greater", 0.0),
        ("v3", "sampled_unhelpful_call_rate", ["e6", "e1"], "greater", 0.0),
        ("v2", "sampled_accuracy", ["e6", "e1"], "not_less", 0.0),
    )
    by_id = collect_hypotheses(config, results)
    assert by_id["h0"]["difference"]["mean"] == pytest.approx(0.40)  # 50 preambles against 10
    assert by_id["h1"]["difference"]["mean"] == pytest.approx(0.20)  # 20 failed calls against none
    assert by_id["h2"]["difference"]["mean"] == pytest.approx(0.20)  # e6: 40 calls ran before a wrong answer, e1: 20
    assert by_id["h3"]["difference"]["mean"] == 0.0 and by_id["h3"]["verdict"] == "supported"


def test_a_drift_hypothesis_reads_each_seeds_diagonal(run):
    results = run
    _diagonal(results, "e9", 1, [1] * 40 + [0] * 160)
    _diagonal(results, "e9", 2, [1] * 60 + [0] * 140)
    config = _hypotheses(load_config(root=REPO), ("control", "drift", ["e9"], "greater", 0.10), seeds=(1, 2))
    [found] = collect_hypotheses(config, results).values()
    assert [found["seeds"][s]["difference"]["mean"] for s in "012"] == [0.25, 0.20, 0.30]
    assert found["difference"]["seeds"] == 3 and found["difference"]["mean"] == pytest.approx(0.25)
    assert found["verdict"] == "supported"


def test_a_seed_without_its_files_is_named_and_left_out(run):
    results = run
    config = _hypotheses(load_config(root=REPO), ("v1", "test_accuracy", ["e1", "e3"], "greater", 0.0), seeds=(1,))
    [found] = collect_hypotheses(config, results).values()
    assert found["missing_seeds"] == ["1"]
    assert "no test results on seed 1" in found["seeds"]["1"]["reason"]
    assert found["difference"]["seeds"] == 1 and found["verdict"] == "supported"


def test_a_hypothesis_can_read_one_question_type(run):
    """question_type restricts any test metric to the questions of one type: e1 calls on every question, e3 on
    none; on count questions both are right on all 40."""
    config = _hypotheses(
        load_config(root=REPO),
        ("v2", "tool_call_ratio", ["e1", "e3"], "greater", 0.0),
        ("v2", "test_accuracy", ["e1", "e3"], "not_less", 0.0),
        ("v2", "test_accuracy", ["e1", "e3"], "greater", 0.0),
    )
    types = ("count", "count", "pie")
    config = dataclasses.replace(
        config, hypotheses=tuple(dataclasses.replace(h, question_type=t) for h, t in zip(config.hypotheses, types))
    )
    by_id = collect_hypotheses(config, run)
    assert by_id["h0"]["difference"]["n"] == 40 and by_id["h0"]["difference"]["mean"] == 1.0
    assert by_id["h1"]["difference"]["mean"] == 0.0 and by_id["h1"]["verdict"] == "supported"
    assert by_id["h2"]["verdict"] == "untested" and "no test question of type 'pie'" in by_id["h2"]["reason"]
