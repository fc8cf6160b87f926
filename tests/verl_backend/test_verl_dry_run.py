"""`snakemake -n -p --configfile config/gpu.yaml` prints the exact command of every series it runs: each train series runs
`chartrl verl train` through the Ray launcher with its verl overrides written out, each checkpoint an eval series
names is generated once by `chartrl verl generate` (verl with trainer.val_only), and every eval series is scored."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # every test reads a dry run of the workflow


README_GPU_LIMIT = "--resources gpu=8"  # docs/cluster.md's single-node command: one 8-GPU verl job at a time


def gpu_workflow(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    """The workflow on config/gpu.yaml with the default workflow profile, in ``workdir``."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(
        [str(Path(sys.executable).parent / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--workflow-profile",
         str(REPO / "profiles/default"), "--directory", str(workdir), *args,
         f"--configfile={REPO / 'config/gpu.yaml'}"],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    """(kind, series) -> (the command the GPU dry run prints, split into words; the job's resources)."""
    result = gpu_workflow(tmp_path_factory.mktemp("dry"), "-n", "-p", *README_GPU_LIMIT.split())
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    found, resources = {}, {}
    patterns = {
        "train": r"chartrl verl train .*--out results/runs/(e\d+) ",
        "generate": r"chartrl verl generate .*--out results/eval/(e\d+)/generations",
        "score": r"chartrl score .*--out results/eval/(e\d+)/scores_",
    }
    for line in result.stdout.splitlines():
        if line.strip().startswith("resources:"):  # printed in each job's block, before its shell command
            resources = dict(item.split("=", 1) for item in line.split(":", 1)[1].strip().split(", "))
        for kind, pattern in patterns.items():
            match = re.search(pattern, line)
            if match:
                found[kind, match.group(1)] = (shlex.split(line.split("Shell command: ", 1)[-1]), resources)
    return found


@pytest.fixture(scope="module")
def printed(dry_run):
    """(kind, series) -> the command the GPU dry run prints, split into words."""
    return {key: words for key, (words, _) in dry_run.items()}


def test_every_verl_job_holds_the_gpus_verl_is_given(dry_run):
    """Each verl train and generate job declares gpu = verl.nnodes x verl.n_gpus_per_node (1 x 8 in gpu.yaml), so
    with docs/cluster.md's --resources gpu=8 Snakemake runs them one after another; the other jobs hold none."""
    verl_jobs = {key: res for key, (_, res) in dry_run.items() if key[0] in ("train", "generate")}
    assert len(verl_jobs) == 12  # 8 train series, 4 generated checkpoints
    assert {key: res.get("gpu") for key, res in verl_jobs.items()} == {key: "8" for key in verl_jobs}
    assert all("gpu" not in res for (kind, _), (_, res) in dry_run.items() if kind == "score")


def test_a_run_without_a_gpu_limit_is_refused_before_anything_starts(tmp_path):
    """The default profile's gpu: 0 caps every job's gpu at 0 (Snakemake constrains, never refuses), which would
    start all verl jobs together; the run stops at its start instead, saying what to pass."""
    result = gpu_workflow(tmp_path, "--cores", "1", "--until", "train")
    assert result.returncode != 0
    assert "--resources gpu=0" in result.stderr and "pass --resources gpu=8" in result.stderr
    assert not (tmp_path / "results").exists()  # no job ran, no Ray head started


@pytest.fixture(scope="module")
def commands(printed):
    """series -> its train command."""
    return {series: words for (kind, series), words in printed.items() if kind == "train"}


def test_every_series_has_its_commands(printed):
    series = {name for _, name in printed}
    assert series == set(yaml.safe_load((REPO / "config" / "gpu.yaml").read_text())["run_series"])
    generating = sorted((s for kind, s in printed if kind == "generate"), key=lambda s: int(s[1:]))
    assert generating == ["e4", "e5", "e8", "e13"]  # e9 scores e8's generations (both of e6), e14 e13's (of e10)


def test_every_train_series_has_its_verl_command(commands):
    assert sorted(commands, key=lambda s: int(s[1:])) == ["e1", "e2", "e3", "e6", "e7", "e10", "e11", "e12"]
    for words in commands.values():
        assert words[:4] == ["chartrl", "launch", "--launcher", "ray"] and "chartrl" in words[words.index("--") :]


def test_e10_is_dr_grpo(commands):
    words = commands["e10"]
    assert "algorithm.norm_adv_by_std_in_grpo=False" in words
    assert "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum-norm" in words
    assert any(w.startswith("actor_rollout_ref.actor.loss_scale_factor=") for w in words)
    assert any(w.startswith("actor_rollout_ref.rollout.multi_turn.tool_config_path=") for w in words)


def test_e3_has_no_tool_config(commands):
    words = commands["e3"]
    assert not any("tool_config_path" in w for w in words)
    assert "actor_rollout_ref.rollout.agent.default_agent_loop=single_turn_agent" in words
    assert "algorithm.norm_adv_by_std_in_grpo=True" in words


JUDGED_SERIES = {"e2": "judge", "e12": "panel"}  # config/series.yaml: the rewards that ask a judge


@pytest.mark.parametrize("series", ["e1", "e2", "e3", "e6", "e7", "e10", "e11", "e12"])
def test_only_a_judged_series_gets_the_judge_key_by_name(commands, series):
    """e2 (judge) and e12 (panel) call the OpenAI-compatible judge: their launcher is told the key variable's name
    (never its value). Every other series grades by rule: its Ray job must not carry the key, which Ray would write
    into its runtime-env log and show in its job API."""
    launcher = commands[series][: commands[series].index("--")]
    if series in JUDGED_SERIES:
        assert launcher[launcher.index("--secret-env") + 1] == "OPENROUTER_API_KEY"
    else:
        assert "--secret-env" not in launcher


def test_e13_generates_with_verl_val_only_on_the_test_split(printed):
    words = printed["generate", "e13"]
    assert words[:4] == ["chartrl", "launch", "--launcher", "ray"]
    overrides = words[words.index("--", words.index("generate")) + 1 :]
    values = dict(w.split("=", 1) for w in overrides if "=" in w and not w.startswith(">"))
    assert values["trainer.val_only"] == "True"
    assert values["trainer.validation_data_dir"].endswith("results/eval/e13/verl/dumps")
    assert values["actor_rollout_ref.model.path"].endswith("results/eval/e13/verl/model")
    assert values["actor_rollout_ref.rollout.multi_turn.tool_config_path"].endswith("results/runs/e10/verl/tools.yaml")


def _spec(words):
    import json

    return json.loads(words[words.index("--spec") + 1])


def test_tool_series_offer_the_six_refocus_tools_with_the_full_prompt(commands):
    for series in ("e1", "e2", "e6", "e10", "e12"):
        spec = _spec(commands[series])
        assert len(spec["tools"]["names"]) == 6 and all(n.startswith("focus_on_") for n in spec["tools"]["names"])
        assert spec["prompts"] == {"list_labels": True, "no_tool_template": "no_tool", "tool_template": "tool_use"}


def test_eval_series_generate_at_the_studys_steps_and_their_train_series_keep_them(printed, commands):
    steps = {s: _spec(printed["generate", s])["series"]["checkpoint"] for s in ("e4", "e5", "e8", "e13")}
    assert steps == {"e4": 65, "e5": 215, "e8": 80, "e13": 215}
    kept = {s: _spec(commands[s]).get("keep_steps") for s in ("e1", "e2", "e6", "e10", "e3")}
    assert kept == {"e1": [65], "e2": [215], "e6": [80], "e10": [215], "e3": None}
