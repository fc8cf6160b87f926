"""The DeepEyes recipe end to end on the CPU (config/deepeyes.yaml + config/smoke.yaml + config/deepeyes_cpu.yaml):
charts made here whose numbers are readable only after zoom_in, the tiny model warm-started with zoom calls,
GRPO with the deepeyes reward judged by an LLM judge over the OpenAI protocol (the loopback test server), the
multi-turn zoom loop, test generations scored by the judge and the rule, and the report's DeepEyes section.

And the overlay's dry run on the verl backend: it plans the recipe's jobs, for its own series only."""

from __future__ import annotations

import json
import re

import pytest

from chartrl.report.panels import panel_problems

from conftest import REPO, snakemake
from judge_server import FakeJudgeServer

pytestmark = pytest.mark.slow
DEEPEYES = str(REPO / "config" / "deepeyes.yaml")
CPU = ("--configfile", DEEPEYES, str(REPO / "config" / "smoke.yaml"), str(REPO / "config" / "deepeyes_cpu.yaml"))


def test_the_overlay_plans_the_recipe_jobs_on_verl(tmp_path):
    dry = snakemake(tmp_path, "-n", "--configfile", DEEPEYES)
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", dry.stdout, re.MULTILINE))
    assert jobs["train"] == "2" and jobs["generate"] == "2" and jobs["score"] == "4"
    assert "base_model" not in jobs and "warmstart" not in jobs  # model.path: Qwen2.5-VL-7B-Instruct
    assert dry.stdout.count("chartrl verl train") == 2  # d1 and d2, on the verl backend
    assert not re.search(r"series=e\d+", dry.stdout)  # the study's series stay defined but do not run


@pytest.fixture(scope="module")
def deepeyes_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("deepeyes")
    with FakeJudgeServer() as server:
        overlay = workdir / "judge.yaml"
        overlay.write_text(
            "judge: {backend: openai, base_url: '" + server.base_url + "', model: qwen-72b-stand-in, "
            "api_key_env: DEEPEYES_JUDGE_KEY, cache_path: null}\n"
        )
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("DEEPEYES_JUDGE_KEY", "EMPTY")
            snakemake(workdir, "--cores", "2", *CPU, str(overlay), timeout=1200)
        requests = server.requests
    return workdir, requests


def test_the_warm_start_demonstrates_zoom_calls_that_run(deepeyes_run):
    workdir, _ = deepeyes_run
    lines = [
        json.loads(line) for line in (workdir / "results/models/base/warmstart_metrics.jsonl").read_text().splitlines()
    ]
    executed = [line["warmstart/demo_call_executed"] for line in lines if "warmstart/demo_call_executed" in line]
    executed = [value for value in executed if value == value]  # nan: no call in that batch
    assert executed and min(executed) == 1.0  # every demonstrated zoom on the asked box ran


def test_training_logs_tool_calls_per_step_and_the_bonus_only_with_right_answers(deepeyes_run):
    workdir, _ = deepeyes_run
    lines = [json.loads(line) for line in (workdir / "results/runs/d1/metrics.jsonl").read_text().splitlines()]
    steps = [line for line in lines if "reward/overall" in line]
    assert [line["step"] for line in steps] == [1, 2]
    for line in steps:
        assert 0 <= line["rollout/tool_calls"] <= 2  # tools.max_tool_turns 2: the multi-turn loop
        assert line["rollout/tool_calls_max"] <= 2
        # the mean bonus is 1.2 x the share of rollouts right after a zoom that ran: never above 1.2 x accuracy
        assert line["reward/tool_bonus"] <= 1.2 * line["reward/accuracy"] + 1e-9
        assert -0.2 <= line["reward/overall"] <= 2.0
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{workdir / 'results/mlflow.db'}")
    experiment = client.get_experiment_by_name("chartrl-deepeyes-cpu")
    (run,) = client.search_runs([experiment.experiment_id], "tags.mlflow.runName = 'd1/train'")
    history = client.get_metric_history(run.info.run_id, "rollout/tool_calls")
    assert sorted(m.step for m in history) == [1, 2]


def test_the_judge_scores_over_the_openai_protocol_and_the_report_shows_the_recipe_figures(deepeyes_run):
    workdir, requests = deepeyes_run
    judged = json.loads((workdir / "results/eval/d3/scores_judge.json").read_text())
    assert judged["aggregate"]["n"] == 6
    sent = judged["aggregate"].get("judged", judged["aggregate"]["n"])
    assert sent == 6 and requests > 0  # every test answer went to the OpenAI-protocol judge
    metrics = json.loads((workdir / "results/report/metrics.json").read_text())
    section = metrics["deepeyes"]["series"]["d1"]
    assert [s["step"] for s in section["per_step"]["steps"]] == [1, 2]
    assert sum(section["per_sample"]["distribution"].values()) == section["per_sample"]["answers"] == 6
    assert {"d3/judge", "d3/rule", "start/rule"} <= set(section["test"])
    for entry in section["test"].values():
        assert entry["low"] <= entry["mean"] <= entry["high"]
    assert section["validation"]["before"]["step"] == 0 and section["validation"]["after"]["step"] == 2
    html = (workdir / "results/report/index.html").read_text()
    assert 'data-deepeyes-steps="d1"' in html and 'data-deepeyes-accuracy="d1"' in html
    assert panel_problems(workdir / "results/report") == []
