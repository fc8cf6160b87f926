"""The report's test curve, tool-placebo control and answer rules: filled from the files the stages write, or
saying in place why not, on either backend."""

from __future__ import annotations

import json

import pytest

from chartrl.evaluate.accuracy import summarise
from chartrl.report.panels import panel_problems

from conftest import REPO


def _records(scores, qtype="value", prefix="q"):
    return [
        {"id": f"{prefix}{k}", "question_type": qtype, "score": float(s), "well_formed": True, "tool_call": True,
         "correct_label": True}
        for k, s in enumerate(scores)
    ]  # fmt: skip


def _condition(records):
    return {**summarise(records), "protocol": {}, "items": records}


def _write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


@pytest.fixture(scope="module", params=["local", "verl"])
def empty(request, tmp_path_factory):
    from chartrl.config import load_config
    from chartrl.report.build import build_report

    config = load_config([] if request.param == "local" else [REPO / "config" / "gpu.yaml"], root=REPO)
    out = tmp_path_factory.mktemp(f"curves-{request.param}")
    (out / "results").mkdir()
    build_report(config, out / "results", out / "report")
    return request.param, out / "report"


def test_an_empty_run_says_why_each_new_panel_is_empty(empty):
    backend, report = empty
    assert panel_problems(report) == []
    panels = {p["id"]: p for p in json.loads((report / "metrics.json").read_text())["panels"]}
    curve, placebo = panels["test_curve"], panels["tool_placebo"]
    assert not curve["filled"] and not placebo["filled"] and not panels["answer_rules"]["filled"]
    if backend == "verl":
        assert "not run on the verl backend" in curve["reason"] and "model merge" in curve["reason"]
        assert "not run on the verl backend" in placebo["reason"] and "unedited chart" in placebo["reason"]
    else:
        assert "results/eval/{series}/test_curve.json (series e1, e2, e6, e10, h1)" in curve["reason"]
        assert "test_placebo" in placebo["reason"]
    # every train series' reward rule is listed even before anything ran
    assert json.loads((report / "metrics.json").read_text())["answer_rules"]["rewards"]["e1"] == "standard"


def test_curve_placebo_and_rules_fill_their_panels(tmp_path):
    """A hand-made run: e1's curve (steps 0, 20, 40; e4 picks the last), its test file with the placebo, one
    scores file of the strict rule."""
    from chartrl.config import load_config
    from chartrl.report.build import build_report

    config = load_config([], root=REPO)
    results = tmp_path / "results"
    test = _records([1] * 18 + [0] * 2)  # the edited chart: 18 of 20 value questions right
    placebo = _records([1] * 3 + [0] * 17)  # the unedited chart: 3 of 20
    shuffled = _records([0] * 19 + [1])
    e1 = {"series": "e1", "with_tools": True, "year_rule": "standard", "test": _condition(test),
          "test_shuffled_images": _condition(shuffled), "test_placebo": _condition(placebo)}  # fmt: skip
    _write(results / "eval" / "e1" / "test_accuracy.json", e1)
    points = [
        {"step": step, "source": "evaluated", **_condition(_records([1] * k + [0] * (10 - k)))}
        for step, k in ((0, 2), (20, 6), (40, 9))
    ]
    curve = {"series": "e1", "with_tools": True, "rows": 10, "year_rule": "standard", "chosen": {"e4": 40}}
    _write(results / "eval" / "e1" / "test_curve.json", {**curve, "points": points})
    _write(results / "eval" / "e4" / "scores_rule.json", {"aggregate": {"scorer": "rule", "year_rule": "strict",
           "accuracy": 0.5, "n": 2, "judged": 2, "judge_failures": 0, "tool_call_ratio": 1.0, "tool_success": 1.0,
           "by_subset": {}}, "items": []})  # fmt: skip
    metrics = build_report(config, results, tmp_path / "report")
    assert panel_problems(tmp_path / "report") == []
    panels = {p["id"]: p for p in metrics["panels"]}
    assert panels["test_curve"]["filled"] and panels["tool_placebo"]["filled"] and panels["answer_rules"]["filled"]

    e1_curve = metrics["test_curves"]["series"]["e1"]
    assert [p["step"] for p in e1_curve["points"]] == [0, 20, 40] and e1_curve["chosen"] == {"e4": 40}
    last = e1_curve["points"][-1]["by_question_type"]["all"]
    assert last["mean"] == pytest.approx(0.9) and last["low"] <= 0.9 <= last["high"] and last["n"] == 10

    value = metrics["tool_placebo"]["e1"]["value"]
    assert value["test"]["mean"] == pytest.approx(0.9) and value["placebo"]["mean"] == pytest.approx(0.15)
    effect = value["edit_effect"]
    assert effect["mean"] == pytest.approx(0.75) and effect["low"] > 0  # the edit, not the second look
    assert value["shuffled_images"]["mean"] == pytest.approx(0.05)

    rules = metrics["answer_rules"]
    assert rules["scores"] == {"e4": {"rule": "strict"}} and rules["test_accuracy"] == {"e1": "standard"}
    assert rules["test_curves"] == {"e1": "standard"} and rules["evaluate"] == "standard"
    assert rules["rewards"]["e2"] == "judge (standard where no verdict)"

    page = (tmp_path / "report" / "index.html").read_text()
    assert 'id="test-curve"' in page and "The star marks the checkpoint an eval series picks" in page
    assert "+0.750" in page and "placebo (unedited chart)" in page and "e4 rule scores" in page
    assert "rule (years: strict)" in page and "e1 (years: standard)" in page  # beside the numbers too


def test_a_test_file_of_the_old_rule_is_not_read_as_the_curve_rule(tmp_path):
    from chartrl.evaluate.curve import CurveInputError, reused_records

    path = tmp_path / "test_accuracy.json"
    _write(path, {"test": _condition(_records([1, 0]))})  # written before the option: the strict rule
    assert [r["id"] for r in reused_records(path, ["q1", "q0"], "strict")] == ["q1", "q0"]
    with pytest.raises(CurveInputError, match="year_rule 'strict', the curve with 'standard'"):
        reused_records(path, ["q0"], "standard")
    with pytest.raises(CurveInputError, match="no test record of 1 curve question"):
        reused_records(path, ["q0", "q9"], "strict")
