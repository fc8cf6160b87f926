"""The GPU study rehearsed on the CPU (config/gpu.yaml + config/rehearsal.yaml): its data layout with label boxes,
series, six tools, full prompt, rewards and eval checkpoints, on the local backend with the tiny model and the real
ChartQA sample. What would break a cluster run breaks here first: every tool must run on the real bar charts it
applies to (the tool-path check), every call of the policy must be counted per tool, every eval series must find its
checkpoint (steps that keep_last alone would have deleted), every report panel must have data.

`make rehearsal` runs the DAG into its own folder and then these tests on it (``CHARTRL_REHEARSAL_DIR``), outside
`make test` (marker ``rehearsal``); run alone, the module runs the DAG itself. The same config on the verl backend
is tests/test_rehearsal_verl.py's."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from chartrl.data.contract import has_boxes, read_split
from chartrl.report.panels import panel_problems

from conftest import REPO, snakemake

pytestmark = [pytest.mark.slow, pytest.mark.rehearsal]
OVERLAYS = ("--configfile", str(REPO / "config" / "gpu.yaml"), str(REPO / "config" / "rehearsal.yaml"))
TOOL_SERIES = ("e1", "e2", "e6", "e10", "e12")
TRAIN_SERIES = ("e1", "e2", "e3", "e6", "e7", "e10", "e11", "e12")
EVAL_STEPS = {"e4": ("e1", 1), "e5": ("e2", 4), "e8": ("e6", 2), "e9": ("e6", 2), "e13": ("e10", 4), "e14": ("e10", 4)}
X_TOOLS = tuple(f"focus_on_x_values_with_{edit}" for edit in ("highlight", "mask", "draw"))
Y_TOOLS = tuple(f"focus_on_y_values_with_{edit}" for edit in ("highlight", "mask", "draw"))


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    """The folder `make rehearsal` ran the DAG in (``CHARTRL_REHEARSAL_DIR``), else a fresh run of it."""
    if os.environ.get("CHARTRL_REHEARSAL_DIR"):
        workdir = Path(os.environ["CHARTRL_REHEARSAL_DIR"]).resolve()
        assert (workdir / "results/report/index.html").is_file(), f"{workdir}: no rehearsal report; make rehearsal"
        return workdir
    workdir = tmp_path_factory.mktemp("rehearsal")
    snakemake(workdir, "--cores", "2", *OVERLAYS, timeout=1800)
    return workdir


def _metrics(workdir, series):
    lines = (workdir / f"results/runs/{series}/metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_the_train_split_keeps_only_charts_with_boxes_and_the_card_says_what_was_left_out(rehearsal):
    rows = read_split(rehearsal / "results/data/chartqa/train.parquet")
    assert rows and all(has_boxes(r.bboxes) for r in rows)
    card = json.loads((rehearsal / "results/data/chartqa/card.json").read_text())
    assert card["splits"]["train"]["bbox_coverage"]["question_fraction"] == 1.0
    assert card["left_out"]["train"]["count"] > 0 and "test" not in card["left_out"]  # the test split stays whole
    assert card["charts_shared_across_splits"] == 0


def test_every_policy_call_is_counted_per_tool_and_a_tool_no_test_call_ran_says_why(rehearsal):
    """The policy's own calls, in training (every step of the five tool series) and on test (their greedy and
    sampled passes, the eval series' generations), are counted per configured tool: calls, executed, and failed by
    error kind, every call ending as one of them. The tiny policy opens calls in its rollouts; how many of them run
    is measured, not asserted (a 2 M-parameter model trained from scratch rarely writes a runnable six-tool call
    within this warm start: docs/cluster.md). Each label tool no test call ran is given its reason in the page,
    from the tool-path check's count of test charts sharing a label with a train chart."""
    tools = json.loads((rehearsal / "results/report/metrics.json").read_text())["tools"]
    assert sorted(tools["names"]) == sorted(X_TOOLS + Y_TOOLS)
    for part in ("training", "test"):
        total = tools[part]["total"]
        assert set(tools["names"]) <= set(total), part
        for name, count in total.items():
            assert count["calls"] == count["executed"] + sum(count["failed"].values()), (part, name, count)
    for series in TOOL_SERIES:
        lines = [line for line in _metrics(rehearsal, series) if "rollout/tool_call_ratio" in line]
        assert len(lines) == 4 and max(line["rollout/tool_call_ratio"] for line in lines) > 0, series
    not_run = [name for name in X_TOOLS + Y_TOOLS if not tools["test"]["total"][name]["executed"]]
    assert set(tools["test"].get("not_executed", {})) == set(not_run)
    html = (rehearsal / "results/report/index.html").read_text()
    assert all(f'data-tool="{name}"' in html for name in tools["names"])
    assert all(f'data-not-executed="{name}"' in html for name in not_run)


def test_the_tool_path_check_runs_every_tool_on_every_chart_it_applies_to(rehearsal):
    """The tool-path check (scripted calls from each chart's own label boxes, not the policy) runs all six tools on
    every chart of the real sample they apply to, test charts included, through the rollout's tool turn and second
    pass; the report shows it under its own name."""
    check = json.loads((rehearsal / "results/tools/path_check.json").read_text())
    assert check["failures"] == []
    for name in X_TOOLS + Y_TOOLS:
        count = check["tools"][name]
        assert count["charts"] >= 1 and count["executed"] == count["charts"], (name, count)
        assert check["splits"]["test"][name]["executed"] >= 1, name
    report = json.loads((rehearsal / "results/report/metrics.json").read_text())["tools"]["path_check"]
    assert report == check
    html = (rehearsal / "results/report/index.html").read_text()
    assert "Tool-path check (scripted calls, not the policy)" in html
    assert all(f'data-path-check="{name}"' in html for name in X_TOOLS + Y_TOOLS)


def test_every_eval_series_finds_its_checkpoint_although_keep_last_is_one(rehearsal):
    for eval_id, (train_id, step) in EVAL_STEPS.items():
        run = json.loads((rehearsal / f"results/runs/{train_id}/run.json").read_text())
        assert (rehearsal / f"results/runs/{train_id}/checkpoints/step_{step}").is_dir(), (eval_id, step)
        scores = list((rehearsal / f"results/eval/{eval_id}").glob("scores_*.json"))
        assert scores, eval_id
        assert run["last_step"] == 4
    # keep_last 1: the steps no eval series names are gone
    assert sorted(p.name for p in (rehearsal / "results/runs/e1/checkpoints").iterdir()) == ["step_1", "step_4"]


def test_every_report_panel_has_data(rehearsal):
    assert panel_problems(rehearsal / "results/report") == []  # filled, or its reason shown in its place
    metrics = json.loads((rehearsal / "results/report/metrics.json").read_text())
    unfilled = {p["id"] for p in metrics["panels"] if not p["filled"]}
    # only what this run cannot have: one train seed, and per-type validation of synthetic question types
    # (and identical series, shown only where the run has some)
    allowed = {"seed_spread", "comparisons/identical"} | {
        f"training/{g}/val/accuracy_value" for g in ("v1", "v2", "v3")
    }
    assert unfilled <= allowed, unfilled
    assert metrics["missing"] == [] if isinstance(metrics["missing"], list) else not metrics["missing"]
    for series in TRAIN_SERIES:
        curves = metrics["training"][series]["curves"]
        for key in ("reward/overall", "val/accuracy", "rollout/tool_call_ratio", "rollout/response_length"):
            assert curves.get(key), (series, key)
        assert metrics["test_accuracy"]["series"][series], series
    assert set(metrics["test"]) == set(EVAL_STEPS)
    assert set(metrics["diagonal"]) == {"e9", "e14"}
    assert metrics["matched_steps"] and metrics["warmstart"] and metrics["data"]["chartqa"]
    html = (rehearsal / "results/report/index.html").read_text()
    assert "chartrl-rehearsal" in html
