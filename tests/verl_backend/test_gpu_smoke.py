"""config/gpu_smoke.yaml, the first thing a cluster user runs: on top of config/gpu.yaml it changes only sizes (4 GPUs,
4 steps of 16 prompts x 4, a 32-question test) and which series run, so the study's code path is what it runs; and
its dry run plans every stage with the exact verl commands."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from chartrl.config import load_config, to_plain
from chartrl.verl_backend.budget import plan_budget

from conftest import REPO

GPU, SMOKE = REPO / "config" / "gpu.yaml", REPO / "config" / "gpu_smoke.yaml"

# What the smoke overlay may change, and why; everything else must be the study's.
SIZES = {
    "mlflow.experiment": "its own MLflow experiment",
    "run_series": "e1 (tools, rule reward), e2 (judge reward) and e4 (e1's evaluation)",
    "series": "narrowed to run_series, and e4 evaluates step 2",
    "reference_values": "the published numbers of the series left out go with them",
    "hypotheses": "the hypotheses naming a series left out go with it",
    "train.steps": "4 steps",
    "train.prompts_per_step": "16 prompts",
    "train.val_every": "a validation every 2 steps",
    "train.val_rows": "32 validation questions",
    "train.checkpoint_every": "a checkpoint every 2 steps",
    "train.keep_last": "keep 1, so the named step 2 takes the kept-step path",
    "rollout.n": "4 samples",
    "verl.n_gpus_per_node": "4 GPUs",
    "verl.ppo_mini_batch_size": "two updates a step",
    "evaluate.limit": "a 32-question test",
    "datasets.chartqa.shortcut_filter.max_questions": "32 questions for the filter's verl job",
}


def _leaves(data, prefix=""):
    for key, value in data.items():
        if isinstance(value, dict) and value and prefix.count(".") < 3 and key not in ("series", "reference_values"):
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def test_the_smoke_run_changes_only_sizes_and_series():
    study = dict(_leaves(to_plain(load_config([GPU], root=REPO).resolved)))
    smoke = dict(_leaves(to_plain(load_config([GPU, SMOKE], root=REPO).resolved)))
    changed = {key for key in study.keys() | smoke.keys() if study.get(key) != smoke.get(key)}
    assert changed <= set(SIZES), sorted(changed - set(SIZES))


def test_the_smoke_run_is_the_smallest_study():
    config = load_config([GPU, SMOKE], root=REPO)
    assert config.verl.n_gpus == 4 and config.model.path == "Qwen/Qwen2.5-VL-3B-Instruct"
    assert (config.train.steps, config.train.prompts_per_step, config.rollout.n) == (4, 16, 4)
    assert config.evaluate.limit == 32 and config.backend == "verl"
    assert [s.id for s in config.train_series] == ["e1", "e2"] and config.keep_steps("e1") == (2,)
    assert config.series["e1"].tools and config.series["e2"].reward.name == "v1_judge"


SMOKE_MARGIN = 0.85
"""The smoke run is the first GPU job a user runs: an out-of-memory error there reads as "the study does not fit",
so every phase of every job plans within 85% of the device, room for the estimator's under-read of EasyR1's
measured peaks (docs/cluster.md, "Checked against published figures")."""


def test_the_smoke_run_plans_within_85_percent_of_the_device():
    config = load_config([GPU, SMOKE], root=REPO)
    device = config.verl.gpu_memory_gb * 1024**3
    for job in plan_budget(config):
        for phase in job.phases:
            assert phase.total <= SMOKE_MARGIN * device, (job.job, phase.name, phase.total / 1024**3)


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    """The smoke run's dry run with the GPU limit for 4 GPUs (docs/cluster.md): (kind, name) -> (command words,
    resources)."""
    workdir = tmp_path_factory.mktemp("smoke")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run(
        [str(Path(sys.executable).parent / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--workflow-profile",
         str(REPO / "profiles/default"), "--directory", str(workdir), "-n", "-p", "--resources", "gpu=4",
         "--configfile", str(GPU), str(SMOKE)],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    found, resources = {}, {}
    patterns = {
        "train": r"chartrl verl train .*--out results/runs/(e\d+) ",
        "generate": r"chartrl verl generate .*--out results/eval/(e\d+)/generations",
        "shortcut": r"chartrl verl shortcut-answers .*--out results/filter/(\w+)/answers",
        "score": r"chartrl score .*--out results/eval/(e\d+)/(?:matrix_)?scores_(\w+)",
    }
    for line in result.stdout.splitlines():
        if line.strip().startswith("resources:"):
            resources = dict(item.split("=", 1) for item in line.split(":", 1)[1].strip().split(", "))
        for kind, pattern in patterns.items():
            match = re.search(pattern, line)
            if match:
                words = shlex.split(line.split("Shell command: ", 1)[-1])
                found[kind, "/".join(match.groups())] = (words, resources)
    return found


def _values(words):
    overrides = words[words.index("--", words.index("chartrl", 1)) + 1 :]
    return dict(w.split("=", 1) for w in overrides if "=" in w and not w.startswith(">"))


@pytest.mark.slow
def test_the_dry_run_plans_every_gpu_stage_on_four_gpus(dry_run):
    assert sorted(dry_run) == [
        ("generate", "e4"),
        ("score", "e4/judge"),
        ("score", "e4/panel"),
        ("score", "e4/rule"),
        ("shortcut", "chartqa"),
        ("train", "e1"),
        ("train", "e2"),
    ]  # e4's answers graded by the rule, the judge and the panel: the judge endpoint is exercised
    for (kind, _), (_, resources) in dry_run.items():
        assert resources.get("gpu") == ("4" if kind != "score" else None)


@pytest.mark.slow
def test_the_train_jobs_run_the_smallest_shape(dry_run):
    for series in ("e1", "e2"):
        values = _values(dry_run["train", series][0])
        assert values["trainer.n_gpus_per_node"] == "4" and values["trainer.total_training_steps"] == "4"
        assert values["data.train_batch_size"] == "16" and values["actor_rollout_ref.rollout.n"] == "4"
        assert values["actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"] == "4"
        assert values["actor_rollout_ref.rollout.gpu_memory_utilization"] == "0.6"  # the study's
    words = dry_run["train", "e2"][0]
    assert words[words.index("--secret-env") + 1] == "OPENROUTER_API_KEY"  # the judge's key, by name
    assert "--secret-env" not in dry_run["train", "e1"][0]  # a rule reward: no key in its Ray job


@pytest.mark.slow
def test_the_evaluation_reads_32_test_questions_at_the_kept_step(dry_run):
    words = dry_run["generate", "e4"][0]
    assert _values(words)["data.val_max_samples"] == "32"
    assert '"checkpoint": 2' in words[words.index("--spec") + 1]
