"""The GPU study's rehearsal (config/gpu.yaml + config/rehearsal.yaml) on the verl backend: every train and generate
job runs ``chartrl verl train`` / ``chartrl verl generate`` for real, with the stand-in
(``tests/verl_backend/verl_standin.py``: verl's own config, data loader, reward loader, metric functions, logger,
checkpoint layout and pruning, dump writer; canned responses) in place of verl's GPU trainer, through the documented
test seam ``CHARTRL_VERL_ENTRY``. It starts from the rehearsal's data and warm-started model, made by the local
backend's jobs up to the warm start (the same jobs on both backends, so Snakemake reruns none)."""

from __future__ import annotations

import json
import sys

import pytest

from chartrl.report.panels import panel_problems

from conftest import REPO, reuse_outputs, snakemake

pytestmark = pytest.mark.slow
OVERLAYS = ("--configfile", str(REPO / "config" / "gpu.yaml"), str(REPO / "config" / "rehearsal.yaml"))
STANDIN = REPO / "tests" / "verl_backend" / "verl_standin.py"
# The stand-in answers with canned responses, so what the warm start taught is never read here: a few of its steps
# make the same model folder, job and checks (make rehearsal runs the rehearsal's own 40)
SHORT_WARMSTART = "warmstart: {steps: 4, warmup_steps: 2}\n"
# rehearsal.yaml: verl on one GPU. The tool-path check runs the local executor whatever the backend: make rehearsal
# checks it (tests/test_rehearsal.py), tests/rollout/test_tool_path.py its job; here it would only repeat them
VERL_OVERLAY = SHORT_WARMSTART + "backend: verl\nverl: {agent_num_workers: 1}\nevaluate: {tool_path_check: false}\n"
EVAL_STEPS = {"e4": ("e1", 1), "e5": ("e2", 4), "e8": ("e6", 2), "e9": ("e6", 2), "e13": ("e10", 4), "e14": ("e10", 4)}


@pytest.fixture(scope="module")
def rehearsal_start(tmp_path_factory):
    """The rehearsal's data and warm-started model (a short warm start), made on the local backend."""
    workdir = tmp_path_factory.mktemp("rehearsal-start")
    short = workdir / "short.yaml"
    short.write_text(SHORT_WARMSTART)
    snakemake(workdir, "--cores", "2", *OVERLAYS, str(short), "--until", "warmstart", timeout=1800)
    return workdir


@pytest.fixture(scope="module")
def rehearsal_verl(rehearsal_start, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("rehearsal-verl")
    reuse_outputs(rehearsal_start, workdir, ("data", "models", "logs"))
    overlay = workdir / "verl.yaml"
    overlay.write_text(VERL_OVERLAY)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CHARTRL_VERL_ENTRY", f"{sys.executable} {STANDIN}")
        patch.setenv("STANDIN_STEP_S", "0.3")  # each stand-in step takes 0.3 s ...
        patch.setenv("CHARTRL_CHECKPOINT_POLL_S", "0.06")  # ... and the keeper looks five times in it
        # its 12 runs fork from one preloaded stand-in server, as the workflow's jobs fork from chartrl's (1 min less)
        patch.setenv("STANDIN_FORKSERVER", "on")
        # a node with two GPUs: two of the rehearsal's one-GPU verl jobs side by side (the queueing of jobs that need
        # the whole node is tests/verl_backend/test_verl_dry_run.py's)
        result = snakemake(workdir, "--cores", "2", "--resources", "gpu=2", *OVERLAYS, str(overlay), timeout=1800)
    assert "rule warmstart" not in result.stdout and "rule data_split" not in result.stdout
    return workdir


def test_verl_dag_keeps_the_named_steps_verl_prunes(rehearsal_verl):
    for eval_id, (train_id, step) in EVAL_STEPS.items():
        run = json.loads((rehearsal_verl / f"results/runs/{train_id}/run.json").read_text())
        assert str(step) in run["checkpoints"]["steps"], (eval_id, run["checkpoints"]["steps"])
        assert list((rehearsal_verl / f"results/eval/{eval_id}").glob("scores_*.json")), eval_id
    checkpoints = rehearsal_verl / "results/runs/e1/checkpoints"
    # verl kept the newest (keep_last 1); step 1, which e4 names, lives on in kept/ as hard links
    assert sorted(p.name for p in checkpoints.glob("global_step_*")) == ["global_step_4"]
    assert sorted(p.name for p in (checkpoints / "kept").iterdir()) == ["global_step_1"]


def test_verl_dag_report_has_every_panel_filled_or_explained(rehearsal_verl):
    report = rehearsal_verl / "results" / "report"
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
    assert panels["test_accuracy"]["filled"] and set(metrics["test_accuracy"]["series"]) == {"e1", "e2", "e6", "e10"}
    # ... each beside the same answers under the published ChartQA rule, read from the same generations
    for table in metrics["test_accuracy"]["series"].values():
        assert table["test"]["published_by_question_type"]["all"]["n"] == table["test"]["n"]
    assert not panels["gaps"]["filled"] and "e3" in panels["gaps"]["reason"]
    assert not panels["test_accuracy/test_shuffled_images"]["filled"]
    assert not panels["seed_spread"]["filled"] and "one seed" in panels["seed_spread"]["reason"]
    # best-of-N reranking is a local-backend stage: absent, with the reason
    assert not panels["rerank"]["filled"] and "not run on the verl backend" in panels["rerank"]["reason"]
    for panel in ("warmstart", "scored", "diagonal", "rollouts", "matched_steps"):
        assert panels[panel]["filled"], panel
    # the comparisons, from verl's metrics and generations: every evaluated checkpoint by every scorer
    for panel in ("across_generations", "gains", "headline", "scorer_matrix", "test_format", "reference"):
        assert panels[f"comparisons/{panel}"]["filled"], panel
    matrix = metrics["comparisons"]["scorer_matrix"]
    assert matrix["missing"] == [] and all(len(row["cells"]) == 3 for row in matrix["rows"].values())
    assert set(metrics["comparisons"]["test_format"]["series"]) == {"e1", "e2", "e6", "e10"}
    # the shortcut filter's answers were a verl generation job (the stand-in's canned answers); the card is filled
    assert panels["shortcut_filter/chartqa"]["filled"] and metrics["shortcut_filter"]["chartqa"]["backend"] == "verl"


def test_verl_dag_logs_the_local_trainers_names_beside_verls(rehearsal_verl):
    lines = [json.loads(line) for line in (rehearsal_verl / "results/runs/e10/metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [0, 1, 2, 3, 4]
    last = lines[-1]
    assert last["reward/overall"] == last["critic/score/mean"]
    sources = [k for k in last if k.startswith("val-aux/") and k.endswith("/protocol_tool_call/mean_at_1")]
    assert sources and last["val/tool_call_ratio"] == pytest.approx(sum(last[k] for k in sources) / len(sources))
    run = json.loads((rehearsal_verl / "results/runs/e10/run.json").read_text())
    assert run["backend"] == "verl" and run["last_step"] == 4
