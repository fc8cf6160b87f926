"""The comparisons the study's conclusions rest on (chartrl.report.comparisons), on hand-made run files: the matched
step, the split of a generation's gain, the headline table, the reward x scorer matrix and its DAG targets,
identical series found (and not found), the study's published numbers shown only when the config has them."""

from __future__ import annotations

import json
import re

import pytest

from chartrl.config import load_config
from chartrl.report.comparisons import across_generations, headline, identical_series, same_run, split_gain

from conftest import REPO, snakemake


@pytest.fixture(scope="module")
def config():
    return load_config(root=REPO)


def _train(curves: dict[str, list[list[float]]], extra: dict | None = None) -> dict:
    return {sid: {"curves": {"val/accuracy": c, **(extra or {}).get(sid, {})}} for sid, c in curves.items()}


def test_a_gain_splits_into_matched_steps_and_training_longer():
    previous = [[0, 0.50], [10, 0.60], [20, 0.62]]
    current = [[0, 0.50], [10, 0.70], [20, 0.66], [30, 0.72]]
    gain = split_gain(previous, current)
    assert gain["matched_step"] == 20  # the last step both validated, not the last of either
    assert gain["total"] == pytest.approx(0.72 - 0.62)
    assert gain["at_matched_steps"] == pytest.approx(0.66 - 0.62)
    assert gain["from_training_longer"] == pytest.approx((0.72 - 0.66) - (0.62 - 0.62))
    assert gain["at_matched_steps"] + gain["from_training_longer"] == pytest.approx(gain["total"])
    assert split_gain([[5, 0.5]], [[10, 0.6]]) is None  # no common step: no split


def test_every_series_is_compared_at_the_last_step_all_reached(config, tmp_path):
    steps = {"e1": 40, "e2": 40, "e3": 30, "e6": 50, "e7": 40, "e10": 40, "e11": 40, "e12": 60, "h1": 40}
    curves = {sid: [[s, 0.5 + 0.001 * s] for s in range(0, last + 1, 10)] for sid, last in steps.items()}
    curves["e6"][3][1] = 0.9  # e6 at step 30
    result = across_generations(config, _train(curves), tmp_path)
    assert result["step"] == 30 and set(result["rows"]) == set(steps)
    e6 = result["rows"]["e6"]["val_accuracy"]
    assert e6["mean"] == 0.9 and e6["low"] < 0.9 < e6["high"] and e6["n"] == config.train.val_rows
    gains = {(g["from"], g["to"]): g for g in result["gains"]}
    assert set(gains) == {("e1", "e6"), ("e6", "e10"), ("e3", "e7"), ("e7", "e11")}
    assert gains[("e1", "e6")]["matched_step"] == 40  # the pair's own last common step
    assert gains[("e3", "e7")]["matched_step"] == 30
    missing = across_generations(config, _train({k: v for k, v in curves.items() if k != "e3"}), tmp_path)
    assert missing["without_validation"] == ["e3"] and "e3" not in missing["rows"]


def test_the_headline_puts_each_baseline_beside_its_tool_series(config, tmp_path):
    curves = {sid: [[0, 0.5], [10, 0.6], [20, 0.6], [30, 0.55]] for sid in ("e1", "e2", "e3")}
    curves["e3"] = [[0, 0.5], [10, 0.7]]
    extra = {"e1": {"rollout/tool_success": [[1, 0.2], [30, 0.8]], "val/tool_success": [[30, 0.1]]}}
    rows = headline(config, _train(curves, extra), tmp_path)["rows"]
    assert list(rows) == ["e1", "e2", "e3"]  # tool series first, their baseline after them
    e1 = rows["e1"]
    assert (e1["final"]["step"], e1["final"]["mean"]) == (30, 0.55)
    assert (e1["peak"]["step"], e1["peak"]["mean"]) == (10, 0.6)  # the first step at the peak
    assert e1["tool_success"] == {"value": 0.8, "step": 30, "key": "rollout/tool_success"}
    assert e1["baseline"]["series"] == "e3" and e1["baseline"]["gap"] == pytest.approx(0.55 - 0.7)
    assert rows["e3"]["baseline"] is None and rows["e1"]["final"]["low"] < 0.55


def _write_metrics(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _history(seed_shift=0.0, judge=False):
    lines = [{"step": 0, "val/accuracy": 0.5}]
    for step in range(1, 4):
        line = {"step": step, "reward/overall": 0.3 + 0.1 * step + seed_shift, "actor/loss": 0.01 * step}
        line["timing/step"] = 0.5 + step * (0.3 if judge else 0.1)  # wall clock: differs between runs
        if judge:
            line |= {"judge/verdicts": 8.0, "judge/requests": 0.0, "reward/judge_failure": 0.0}
        lines.append(line)
    return lines


def test_identical_series_are_found_and_explained_from_the_run(config, tmp_path):
    results = tmp_path / "results"
    _write_metrics(results / "runs/e1/metrics.jsonl", _history())
    _write_metrics(results / "runs/e2/metrics.jsonl", _history(judge=True))
    _write_metrics(results / "runs/e3/metrics.jsonl", _history(seed_shift=0.05))
    train = {sid: {"curves": {}} for sid in ("e1", "e2", "e3")}
    found = identical_series(config, results, train)
    assert found["compared"] == 3 and [p["series"] for p in found["pairs"]] == [["e1", "e2"]]
    pair = found["pairs"][0]
    assert pair["steps"] == 4 and pair["only_in_one"] == ["reward/judge_failure"]
    assert pair["config_difference"] == ['reward.name: "v1_rule" vs "v1_judge"']
    assert "train seed 0" in pair["why"] and "offline reference judge" in pair["why"]
    assert "24 verdicts" in pair["why"]

    # one value apart at one step: not the same run
    lines = _history(judge=True)
    lines[2]["actor/loss"] += 1e-9
    _write_metrics(results / "runs/e2/metrics.jsonl", lines)
    assert identical_series(config, results, train)["pairs"] == []
    assert same_run(_history(), _history()[:-1]) is None  # different steps


def test_identical_weights_are_checked_where_both_checkpoints_exist(config, tmp_path):
    results = tmp_path / "results"
    for sid, weights in (("e1", b"same"), ("e2", b"same")):
        _write_metrics(results / f"runs/{sid}/metrics.jsonl", _history())
        folder = results / f"runs/{sid}/checkpoints/step_3"
        folder.mkdir(parents=True)
        (folder / "model.safetensors").write_bytes(weights)
        (folder / "optimizer.pt").write_bytes(sid.encode())  # optimizer state is not the policy
        run = {"checkpoints": {"last": f"results/runs/{sid}/checkpoints/step_3"}}
        (results / f"runs/{sid}/run.json").write_text(json.dumps(run))
    train = {"e1": {"curves": {}}, "e2": {"curves": {}}}
    assert identical_series(config, results, train)["pairs"][0]["weights_identical"] is True
    (results / "runs/e2/checkpoints/step_3/model.safetensors").write_bytes(b"other")
    assert identical_series(config, results, train)["pairs"][0]["weights_identical"] is False


def _scores(path, scorer, verdicts, published=None):
    """A scores file; ``published``: each item's published-rule score (None: a file without them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    items = [{"id": f"q{i}#0", "accuracy": v} for i, v in enumerate(verdicts)]
    for item, score in zip(items, published or [], strict=False):
        item["published_score"] = score
    path.write_text(json.dumps({"aggregate": {"scorer": scorer}, "items": items}))


def test_the_matrix_marks_the_diagonal_and_the_drift_of_other_cells(config, tmp_path):
    from chartrl.evaluate.matrix import extra_matrix_files, matrix_files
    from chartrl.report.comparisons import scorer_matrix

    files = matrix_files(config)
    assert set(files) == {"e4", "e5", "e8", "e13", "h2"}  # e9 reads e8's generations, e14 e13's
    assert files["e8"] == {
        "rule": "eval/e8/scores_rule.json",
        "judge": "eval/e9/scores_judge.json",  # asked for by e9: not scored twice
        "panel": "eval/e8/matrix_scores_panel.json",
    }
    assert len(extra_matrix_files(config)) == 7  # each row's scorers that no eval series of it asks for
    results = tmp_path / "results"
    _scores(results / "eval/e8/scores_rule.json", "rule", [1, 0, 0, 1], published=[1, 0, 0, 0])
    _scores(results / "eval/e9/scores_judge.json", "judge", [1, 1, 0, 1])
    _scores(results / "eval/e8/matrix_scores_panel.json", "panel", [1, 0, None, 1])  # one judge failure
    row = scorer_matrix(config, results)["rows"]["e8"]
    assert row["signal"] == "rule" and row["cells"]["rule"]["diagonal"] and row["cells"]["rule"]["series"] == ["e8"]
    judge = row["cells"]["judge"]
    assert not judge["diagonal"] and judge["series"] == ["e9"] and judge["mean"] == 0.75
    assert judge["drift"]["mean"] == pytest.approx(0.25) and judge["drift"]["n"] == 4
    panel = row["cells"]["panel"]
    assert panel["n"] == 3 and panel["series"] == [] and panel["drift"]["mean"] == pytest.approx(0.0)
    # beside the row, its rule cell's answers under the published ChartQA rule, with the cells' interval
    assert row["published"]["mean"] == 0.25 and row["published"]["n"] == 4 and row["why_no_published"] is None
    assert row["published"]["low"] <= 0.25 <= row["published"]["high"]
    e5 = scorer_matrix(config, results)
    assert "e5 x judge: no results/eval/e5/scores_judge.json" in e5["missing"]
    assert e5["rows"]["e5"]["signal"] == "judge"  # e2's reward is the judge's verdict
    assert e5["rows"]["e5"]["published"] is None
    assert e5["rows"]["e5"]["why_no_published"] == "no results/eval/e5/matrix_scores_rule.json"
    _scores(results / "eval/e8/scores_rule.json", "rule", [1, 0, 0, 1])  # written before the published rule
    older = scorer_matrix(config, results)["rows"]["e8"]
    assert older["published"] is None and older["why_no_published"] == (
        "results/eval/e8/scores_rule.json has no published score (written by an older chartrl): rerun its score job"
    )


@pytest.mark.slow
def test_the_dag_scores_every_evaluated_checkpoint_with_every_scorer(tmp_path):
    dry = snakemake(tmp_path, "-n", "--quiet", "rules")
    assert re.search(r"matrix_score\s+7\b", dry.stdout), dry.stdout[-2000:]


def test_published_numbers_are_shown_only_when_the_config_has_them(tmp_path):
    from chartrl.report.build import build_report

    (tmp_path / "results").mkdir()
    default = build_report(load_config(root=REPO), tmp_path / "results", tmp_path / "default")
    assert default["comparisons"]["reference"] is None
    assert "data-reference" not in (tmp_path / "default/index.html").read_text()
    study = load_config([REPO / "config/gpu.yaml"], root=REPO)
    metrics = build_report(study, tmp_path / "results", tmp_path / "study")
    reference = metrics["comparisons"]["reference"]
    assert reference["validation"]["e1"] == {"final": 0.562, "final_step": 68, "peak": 0.567, "tool_success": 0.815}
    assert reference["test"]["e8"]["run_checkpoint"] == 80  # gpu.yaml evaluates the step the study published
    assert 'data-reference="1"' in (tmp_path / "study/index.html").read_text()


def test_a_published_number_must_name_a_series_and_its_scorer(tmp_path):
    from chartrl.config import ConfigError

    overlay = tmp_path / "ref.yaml"
    overlay.write_text(
        "reference_values:\n  validation: {e4: {final: 0.5}}\n"
        "  test: {e4: {accuracy: 0.4, scorer: judge, checkpoint: 1}}\n"
    )
    with pytest.raises(ConfigError) as error:
        load_config([overlay], root=REPO)
    assert "reference_values.validation.e4" in str(error.value) and "reference_values.test.e4" in str(error.value)
    overlay.write_text("reference_values:\n  validation: {e1: {final: [0.7, 0.6, 0.5]}}\n")
    with pytest.raises(ConfigError):
        load_config([overlay], root=REPO)


def test_well_formed_accuracy_and_truncation_stand_beside_each_test_accuracy(config, tmp_path):
    from chartrl.report.comparisons import test_format

    items = [
        {"id": "a", "question_type": "value", "score": 1.0, "well_formed": True},
        {"id": "b", "question_type": "value", "score": 0.0, "well_formed": False},  # cut: no answer tag
        {"id": "c", "question_type": "count", "score": 0.0, "well_formed": True},
        {"id": "d", "question_type": "count", "score": 1.0, "well_formed": True},
    ]
    path = tmp_path / "results/eval/e1/test_accuracy.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"test": {"items": items, "protocol": {"truncated_rate": 0.25}}}))
    row = test_format(config, tmp_path / "results")["series"]["e1"]
    assert row["well_formed_accuracy"]["mean"] == pytest.approx(2 / 3) and row["well_formed_accuracy"]["n"] == 3
    assert row["well_formed_by_question_type"]["value"] == {"mean": 1.0, "low": 1.0, "high": 1.0, "n": 1}
    assert row["well_formed_share"] == 0.75 and row["truncated_rate"] == 0.25


def test_a_run_without_judge_counters_says_so(config, tmp_path):
    results = tmp_path / "results"
    _write_metrics(results / "runs/e1/metrics.jsonl", _history())
    _write_metrics(results / "runs/e2/metrics.jsonl", _history())  # as verl logs them: no judge/ keys
    train = {"e1": {"curves": {}}, "e2": {"curves": {}}}
    pair = identical_series(config, results, train)["pairs"][0]
    assert pair["judge"] == [
        "e2's judge accuracy is the offline reference judge (answer equivalence, not an LLM); the run logs no judge "
        "counters (verl logs none per step)"
    ]
