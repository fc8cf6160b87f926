"""The whole DAG on the verl backend, on the smoke config: every train and generate job runs ``chartrl verl train`` /
``chartrl verl generate`` for real, with the stand-in (``tests/verl_backend/verl_standin.py``: verl's own config,
data loader, reward loader, metric functions, logger and dump writer, canned responses) in place of verl's GPU
trainer, through the documented test seam ``CHARTRL_VERL_ENTRY``. The report must build, and every panel must hold
numbers or say in its place why not (``chartrl.report.panels.panel_problems``, reusable on any run)."""

from __future__ import annotations

import json
import sys

import pytest

from chartrl.report.panels import panel_problems

from conftest import REPO, snakemake

pytestmark = pytest.mark.slow
SMOKE = str(REPO / "config" / "smoke.yaml")
STANDIN = REPO / "tests" / "verl_backend" / "verl_standin.py"
# verl sizes that pass the batch checks on one GPU with the smoke config's 2 prompts x 2 rollouts per step
VERL_OVERLAY = """\
backend: verl
launcher: inline
verl:
  n_gpus_per_node: 1
  ppo_mini_batch_size: 2
  ppo_micro_batch_size_per_gpu: 2
  log_prob_micro_batch_size_per_gpu: 2
  agent_num_workers: 1
"""
TOOL_SERIES_TESTED = {"e1", "e2", "e6", "e10"}  # the train series an eval series generates from (last checkpoint)


@pytest.fixture(scope="module")
def verl_dag_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("verl-dag")
    overlay = workdir / "verl_smoke.yaml"
    overlay.write_text(VERL_OVERLAY)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CHARTRL_VERL_ENTRY", f"{sys.executable} {STANDIN}")
        snakemake(workdir, "--cores", "2", "--configfile", SMOKE, str(overlay), timeout=1500)
    return workdir


def test_verl_dag_report_has_every_panel_filled_or_explained(verl_dag_run):
    report = verl_dag_run / "results" / "report"
    assert panel_problems(report) == []
    metrics = json.loads((report / "metrics.json").read_text())
    assert metrics["backend"] == "verl"
    panels = {p["id"]: p for p in metrics["panels"]}
    for generation in ("v1", "v2", "v3"):
        # filled from verl's own metrics, translated (chartrl.verl_backend.metrics)
        for key in ("val/accuracy", "reward/overall", "rollout/tool_call_ratio", "rollout/tool_success"):
            assert panels[f"training/{generation}/{key}"]["filled"], (generation, key)
        for key in ("rollout/correct_label_ratio", "val/format_rate", "rollout/response_length", "reward_parts"):
            assert panels[f"training/{generation}/{key}"]["filled"], (generation, key)
        assert "validation" in panels[f"training/{generation}/rollout/tool_call_ratio"]["note"]
        # what verl does not run says so in its place
        shuffled = panels[f"training/{generation}/val_shuffled_images/accuracy"]
        assert not shuffled["filled"] and "not run on the verl backend" in shuffled["reason"]
    # per-type test accuracy from the eval series' verl generations; the baselines have none, so no gap
    assert panels["test_accuracy"]["filled"] and set(metrics["test_accuracy"]["series"]) == TOOL_SERIES_TESTED
    assert not panels["gaps"]["filled"] and "e3" in panels["gaps"]["reason"]
    assert not panels["test_accuracy/test_shuffled_images"]["filled"]
    assert not panels["seed_spread"]["filled"] and "one seed" in panels["seed_spread"]["reason"]
    for panel in ("warmstart", "scored", "diagonal", "rollouts", "matched_steps"):
        assert panels[panel]["filled"], panel


def test_verl_dag_logs_the_local_trainers_names_beside_verls(verl_dag_run):
    lines = [json.loads(line) for line in (verl_dag_run / "results/runs/e10/metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [0, 1, 2]
    last = lines[-1]
    assert last["reward/overall"] == last["critic/score/mean"]
    assert last["val/tool_call_ratio"] == pytest.approx(last["val-aux/synthchart/protocol_tool_call/mean_at_1"])
    run = json.loads((verl_dag_run / "results/runs/e10/run.json").read_text())
    assert run["backend"] == "verl" and run["last_step"] == 2
