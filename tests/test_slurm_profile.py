"""The Slurm profile (profiles/slurm) as the locked snakemake-executor-plugin-slurm sees it: every job's
resources, merged by Snakemake from the rules and the profile's set-resources, pass the plugin's own validation,
and the verl jobs ask Slurm for their GPUs on one node through the plugin's GPU resources."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import REPO

BIN = Path(sys.executable).parent


class JobResources(dict):
    """A job's resources as the plugin reads them (``job.resources.get(name)`` and ``job.resources.name``)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def parse_resources(line: str) -> JobResources:
    """``resources: a=1, b=x`` as Snakemake prints it in a dry run (ints back to ints)."""
    items = (item.split("=", 1) for item in line.split(":", 1)[1].strip().split(", "))
    return JobResources({key: int(value) if value.isdigit() else value for key, value in items})


def dry_run_jobs(workdir: Path, *configfiles: str) -> dict[str, list[JobResources]]:
    """rule -> the resources of each of its jobs in a dry run of ``configfiles`` through the Slurm profile."""
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run(
        [str(BIN / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--workflow-profile",
         str(REPO / "profiles/slurm"), "--directory", str(workdir), "-n",
         "--sdm", "env-modules",  # the profile's conda is not installed here; it changes no resource
         "--configfile", *(str(REPO / f) for f in configfiles)],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    jobs: dict[str, list[JobResources]] = {}
    rule = None
    for line in result.stdout.splitlines():
        if line.startswith("rule ") and line.endswith(":"):
            rule = line[5:-1]
        elif line.strip().startswith("resources:") and rule is not None:
            jobs.setdefault(rule, []).append(parse_resources(line))
    return jobs


@pytest.fixture(scope="module")
def slurm_jobs(tmp_path_factory):
    """The real study's jobs through the Slurm profile."""
    return dry_run_jobs(tmp_path_factory.mktemp("slurm"), "config/gpu.yaml")


def submit_command(resources: JobResources) -> str:
    """The sbatch line the plugin builds for a job with these resources (its own functions, in its order)."""
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string
    from snakemake_executor_plugin_slurm.validation import validate_slurm_extra

    job = SimpleNamespace(resources=resources, threads=1)
    validate_slurm_extra(job)
    partition = f"-p {resources['slurm_partition']}" if "slurm_partition" in resources else ""  # else the default
    params = {"run_uuid": "u", "slurm_logfile": "log", "comment_str": "c", "account": "-A acct",
              "partition": partition, "workdir": "/work"}  # fmt: skip
    return get_submit_command(job, params) + set_gres_string(job)


@pytest.mark.slow
def test_every_job_passes_the_plugin_validation(slurm_jobs):
    assert {"train", "generate", "score", "data_split"} <= set(slurm_jobs)
    for jobs in slurm_jobs.values():
        for resources in jobs:
            submit_command(resources)  # raises the plugin's WorkflowError on a refused resource


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["train", "generate", "shortcut_answers"])
def test_verl_jobs_ask_slurm_for_eight_gpus_on_one_node(slurm_jobs, rule):
    for resources in slurm_jobs[rule]:
        words = submit_command(resources).split()
        assert "--gpus=8" in words and "--nodes=1" in words and "--cpus-per-task=32" in words
        assert "-p" in words and words[words.index("-p") + 1] == "gpu"
        assert not any(w.startswith("--gres") for w in words)


@pytest.mark.slow
def test_cpu_jobs_ask_for_no_gpu(slurm_jobs):
    for resources in slurm_jobs["score"]:
        assert "--gpus" not in submit_command(resources)


@pytest.mark.slow
def test_cpu_jobs_go_to_the_default_partition(slurm_jobs):
    """A partition named in default-resources is a placeholder most sites lack ("invalid partition specified" at
    the first sbatch): the CPU jobs name none and go to the cluster's default one (sinfo's *)."""
    for rule in ("data_split", "score", "report"):
        for resources in slurm_jobs[rule]:
            assert "slurm_partition" not in resources, rule


@pytest.mark.slow
def test_the_rehearsals_jobs_on_the_local_backend_ask_for_no_gpu_node(tmp_path):
    """config/rehearsal.yaml runs the verl rules' names on the local backend, as CPU jobs: they ask for neither GPUs
    nor a GPU node's CPUs and memory, which a CPU partition cannot give (tests/test_slurm_cluster.py submits them)."""
    jobs = dry_run_jobs(tmp_path, "config/gpu.yaml", "config/rehearsal.yaml")
    for rule in ("train", "generate"):
        for resources in jobs[rule]:
            words = submit_command(resources).split()
            assert not any(w.startswith(("--gpus", "--cpus-per-task=32")) for w in words), (rule, words)
            assert resources["mem_mb"] == 8000, (rule, resources)  # the profile's default


@pytest.mark.slow
def test_the_plugin_refuses_gres_in_slurm_extra(slurm_jobs):
    """What the profile used to do: the plugin's validation refuses it, so the tests above can fail."""
    from snakemake_interface_common.exceptions import WorkflowError

    resources = JobResources(slurm_jobs["train"][0], slurm_extra="--gres=gpu:8")
    with pytest.raises(WorkflowError, match="not allowed in the 'slurm_extra'"):
        submit_command(resources)


def test_the_plugin_tested_here_is_the_one_cpu_lock_pins():
    """The Slurm jobs are submitted by the plugin in .venv (requirements/cpu.lock), the one these tests import.
    requirements/gpu.lock pins an older one (2.6.1) that cannot be raised: every later version needs
    numpy>=2.4.5, and vllm's mistral_common caps numpy below 2.4 on the GPU environment's Python 3.11."""
    from importlib.metadata import version

    pins = [
        line.split("==", 1)[1]
        for line in (REPO / "requirements" / "cpu.lock").read_text().splitlines()
        if line.startswith("snakemake-executor-plugin-slurm==")
    ]
    assert pins == [version("snakemake-executor-plugin-slurm")]


PROFILE = REPO / "profiles/slurm/profile.yaml"
HEADROOM = 1.5
"""The profile's time limits: 1.5 x `chartrl plan`'s central estimate of each job's wall hours for config/gpu.yaml,
plus :data:`STARTUP_MINUTES` per allocation (profiles/slurm/profile.yaml says so)."""
STARTUP_MINUTES = 60
RULES = {"train": "train ", "generate": "generate ", "shortcut_answers": "shortcut answers "}
"""The profile's GPU rules and the plan's names of their jobs."""


def _central_wall_minutes() -> dict[str, float]:
    """The longest central wall time of each GPU rule's jobs in the study's plan (GPU-hours over the job's GPUs)."""
    from chartrl.config import load_config
    from chartrl.verl_backend.budget import plan_budget

    jobs = plan_budget(load_config([REPO / "config" / "gpu.yaml"], root=REPO))
    return {
        rule: max(job.gpu_hours.central / job.gpus * 60 for job in jobs if job.job.startswith(prefix))
        for rule, prefix in RULES.items()
    }


def test_the_time_limits_follow_from_the_plans_central_estimate():
    """Slurm ends a job at its runtime; a train series takes longer than one allocation at many sites. The
    profile resubmits a failed job (Snakemake's `retries`, which rules without their own take), and the resubmitted
    train job resumes from its last checkpoint: the allocations but one (lost to a failure) must cover the longest
    series with headroom, each less its start-up; a generation or filter job must fit one allocation."""
    import yaml

    profile = yaml.safe_load(PROFILE.read_text())
    central = _central_wall_minutes()
    for rule, minutes in central.items():
        runtime = profile["set-resources"][rule]["runtime"]
        assert runtime <= 24 * 60, rule  # within most GPU partitions' time limit, or sbatch refuses the job outright
        allocations = profile.get("retries", 0) if rule == "train" else 1
        assert allocations * (runtime - STARTUP_MINUTES) >= HEADROOM * minutes, (rule, runtime, minutes)
    assert 50 * 60 < central["train"] < 60 * 60  # a tool series: 421 GPU-h on 8 GPUs, more than two allocations


def test_the_profile_names_no_placeholder_account():
    """A placeholder account is refused by sbatch at the first job; with none, sbatch charges the user's default
    account, and a site that needs another names it in its copy of the profile (docs/cluster.md)."""
    import yaml

    profile = yaml.safe_load(PROFILE.read_text())
    assert "slurm_account" not in profile["default-resources"]


def test_the_plugins_account_guess_reaches_sacct_as_arguments(tmp_path, monkeypatch):
    """With no account named the plugin guesses one with `sacct ... | tail -1`, run without a shell: sacct gets
    `|`, `tail` and `-1` as arguments and refuses them ("invalid option -- '1'", as on the one-node Slurm of
    tests/test_slurm_cluster.py), so the plugin submits without -A and Slurm charges the user's default account.
    docs/cluster.md says so; a plugin that fixes the guess fails this test, and the guide must change."""
    from unittest.mock import Mock

    from snakemake_executor_plugin_slurm.accounts import get_account

    sacct = tmp_path / "sacct"
    sacct.write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "args"}\necho acct\n')
    sacct.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    get_account(Mock())
    assert (tmp_path / "args").read_text().split()[-3:] == ["|", "tail", "-1"]


def fake_slurm(folder: Path) -> Path:
    """Slurm's commands, each recording its call in ``folder/calls`` and failing (no cluster here), but sinfo,
    which names the default partition the jobs without one go to (tests/test_slurm_cluster.py has a real one)."""
    bin_dir = folder / "fakebin"
    bin_dir.mkdir()
    for name in ("sbatch", "sacct", "squeue", "sinfo", "scontrol", "sacctmgr", "sshare"):
        answer = "echo PARTITION; echo debug*; exit 0" if name == "sinfo" else "exit 1"
        (bin_dir / name).write_text(f'#!/bin/sh\necho "{name} $*" >> {folder / "calls"}\n{answer}\n')
        (bin_dir / name).chmod(0o755)
    return bin_dir


def slurm_run(
    workdir: Path, *args: str, target: str = "results/data/chartqa/train.parquet"
) -> subprocess.CompletedProcess:
    """A real (not dry) run of the study's ``target`` through the Slurm profile, against a fake Slurm."""
    env = dict(os.environ, PATH=f"{fake_slurm(workdir)}{os.pathsep}{BIN}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(
        [str(BIN / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--profile", str(PROFILE.parent),
         "--directory", str(workdir), "--sdm", "env-modules", "--slurm-init-seconds-before-status-checks", "1",
         f"--configfile={REPO / 'config/gpu.yaml'}", *args,
         "--", target],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def submitted(workdir: Path) -> list[str]:
    calls = workdir / "calls"
    return [line for line in calls.read_text().splitlines() if line.startswith("sbatch")] if calls.exists() else []


@pytest.mark.slow
def test_jobs_on_several_nodes_are_refused_a_sqlite_mlflow_store(tmp_path):
    """Slurm runs the jobs on several nodes, which would all write one SQLite file on the shared filesystem:
    refused before the first job is submitted, naming the key and the fix (an MLflow server)."""
    result = slurm_run(tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "mlflow.tracking_uri 'sqlite:///results/mlflow.db' is a SQLite file" in output
    assert "mlflow server" in output and submitted(tmp_path) == []


@pytest.mark.slow
def test_a_local_ray_head_is_refused_when_the_jobs_run_on_other_nodes(tmp_path):
    """A --config on the command line replaces the profile's config list, its launcher=inline with it: the
    workflow would start a local Ray head whose loopback job API no Slurm job can reach. Refused before any job."""
    server = "mlflow={tracking_uri: 'http://mlflow-host:5000'}"
    result = slurm_run(tmp_path, "--config", server, target="results/runs/e1/run.json")  # a launched job
    assert result.returncode != 0 and "set launcher: inline" in result.stdout + result.stderr
    assert submitted(tmp_path) == []


@pytest.mark.slow
def test_with_an_mlflow_server_the_jobs_are_submitted_and_a_failed_one_resubmitted(tmp_path):
    """The control: the same run with a server's address gets as far as sbatch, which the fake Slurm refuses; the
    job is submitted again as often as the profile's `retries` says (what resumes a train series cut by its
    runtime)."""
    import yaml

    # (the profile's own `config: [launcher=inline]` is replaced by a --config given here: repeated)
    slurm_run(tmp_path, "--config", "launcher=inline", "mlflow={tracking_uri: 'http://mlflow-host:5000'}")
    assert len(submitted(tmp_path)) == 1 + yaml.safe_load(PROFILE.read_text())["retries"]
