"""What a launched job is given, without a cluster: the judge's keys only where its reward asks a judge, and the
Python its environment runs (the local head's, which a verl job needs with vLLM), checked before anything runs."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from chartrl.launch import Job, RayJobLauncher, judge_key_names
from chartrl.ray_head import (
    STATE_FILE,
    HeadError,
    HeadState,
    default_temp_dir,
    python_problem,
    ray_executable,
    read_state,
    start_head,
)

from conftest import REPO, snakemake

OPENAI = {"backend": "openai", "api_key_env": "OPENROUTER_API_KEY", "panel": {"members": []}}
KEY_CASES = [
    # (judge settings, how the job grades answers, the key variables it gets)
    (OPENAI, "rule", []),  # a rule reward never holds a key
    (OPENAI, "own", []),  # a reward with its own grader (r1v, multiple_choice) neither
    (OPENAI, "judge", ["OPENROUTER_API_KEY"]),
    ({**OPENAI, "backend": "reference"}, "judge", []),  # the offline reference judge has no key
    # a panel's members inherit the judge's backend and key unless they set their own
    ({**OPENAI, "panel": {"members": [{"name": "a"}, {"name": "b", "model": "m"}]}}, "panel", ["OPENROUTER_API_KEY"]),
    (
        {**OPENAI, "panel": {"members": [{"name": "a"}, {"name": "b", "api_key_env": "OTHER_KEY"}]}},
        "panel",
        ["OPENROUTER_API_KEY", "OTHER_KEY"],
    ),
    ({**OPENAI, "panel": {"members": [{"name": "x", "backend": "reference"}]}}, "panel", []),  # all offline
    ({**OPENAI, "panel": {"members": [{"name": "x", "backend": "reference"}]}}, "judge", ["OPENROUTER_API_KEY"]),
]


@pytest.mark.parametrize("judge, accuracy, expected", KEY_CASES)
def test_judge_keys_follow_what_the_job_grades_with(judge, accuracy, expected):
    assert judge_key_names(judge, accuracy) == expected


# ---------------------------------------------------------------------------------------------------------------
# The Python a job runs in: the local head's environment, which a verl job needs with vLLM
# ---------------------------------------------------------------------------------------------------------------


def fake_head(folder: Path, python: str) -> dict[str, str]:
    """The client environment of a local head recorded in ``folder`` as running ``python`` (no head runs: the
    launcher must refuse before it contacts one; the port is closed)."""
    state = HeadState(os.getpid(), str(folder), 20000, f"http://127.0.0.1:{closed_port()}", str(folder / "t"), python)
    (folder / STATE_FILE).write_text(json.dumps(asdict(state)))
    return state.client_env()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def python_with_vllm(folder: Path) -> str:
    """An interpreter that finds a ``vllm`` package (a stand-in for the GPU environment's Python)."""
    (folder / "site" / "vllm").mkdir(parents=True)
    (folder / "site" / "vllm" / "__init__.py").write_text("")
    wrapper = folder / "bin" / "python"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={folder / "site"} exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def test_a_chartrl_job_runs_as_its_pythons_module():
    job = Job(("chartrl", "verl", "train", "--spec", "{}"), "s", cwd=Path("/w d"), python="/env/bin/python")
    assert job.entrypoint() == "cd '/w d' && exec /env/bin/python -m chartrl verl train --spec '{}'"
    assert Job(("bash", "-c", "true"), "s", cwd=Path("/w"), python="/p").entrypoint() == "cd /w && exec bash -c true"
    assert Job(("chartrl", "train"), "s", cwd=Path("/w")).entrypoint() == "cd /w && exec chartrl train"


@pytest.mark.parametrize(
    "modules, expected",
    [
        (("json",), None),
        (("vllm",), "cannot import vllm"),  # this environment (the CPU lock) has no vLLM
        (("json", "vllm", "no_such_module_x"), "cannot import vllm, no_such_module_x"),
        ((), None),
    ],
)
def test_python_problem_names_the_missing_modules(modules, expected):
    problem = python_problem(sys.executable, modules)
    assert problem is None if expected is None else expected in problem and sys.executable in problem


def test_python_problem_names_an_interpreter_that_does_not_run(tmp_path):
    assert "does not run" in python_problem(str(tmp_path / "bin" / "python"), ("vllm",))


def test_the_launcher_takes_the_local_heads_python_and_checks_it(tmp_path):
    gpu_python = python_with_vllm(tmp_path)
    launcher = RayJobLauncher(environ=fake_head(tmp_path, gpu_python))
    job = launcher.checked(Job(("chartrl", "verl", "train"), "s", cwd=Path("/w")))
    assert job.python == gpu_python and job.entrypoint() == f"cd /w && exec {gpu_python} -m chartrl verl train"


@pytest.mark.slow
def test_chartrl_launch_refuses_a_verl_job_on_a_head_without_vllm(tmp_path):
    """The head runs this environment's Python (the CPU lock: no vLLM): the verl job is refused before anything is
    submitted, naming the Python and the key to set. A local-backend job on the same head is not."""
    env = {**os.environ, **fake_head(tmp_path, sys.executable), "PYTHONPATH": str(REPO / "src")}
    launch = [sys.executable, "-m", "chartrl", "launch", "--launcher", "ray", "--submission-id", "x", "--"]
    result = subprocess.run([*launch, "chartrl", "verl", "train"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert f"the Python {sys.executable} cannot import vllm" in result.stderr and "ray.python" in result.stderr
    assert "cannot reach the Ray job API" not in result.stderr  # refused before any contact


def test_the_heads_ray_is_the_one_beside_its_python(tmp_path):
    assert ray_executable(sys.executable) == str(Path(sys.executable).parent / "ray")
    with pytest.raises(HeadError, match=rf"no `ray` command beside {tmp_path}/bin/python .*ray\.python"):
        ray_executable(str(tmp_path / "bin" / "python"))  # never another environment's ray from PATH


def test_a_running_head_of_another_python_is_refused(tmp_path, monkeypatch):
    from chartrl import ray_head

    fake_head(tmp_path, "/other/env/bin/python")
    monkeypatch.setattr(ray_head, "_alive", lambda pid: True)
    monkeypatch.setattr(ray_head, "_api_ready", lambda state: True)
    with pytest.raises(HeadError, match="runs the Python /other/env/bin/python, and this run needs"):
        start_head(tmp_path, python=sys.executable)
    assert start_head(tmp_path, python="/other/env/bin/python").python == "/other/env/bin/python"  # joined


@pytest.mark.slow
def test_the_workflow_refuses_a_verl_run_whose_head_cannot_import_vllm(tmp_path):
    """The single-node command (docs/cluster.md) without a GPU environment: the local head would run Snakemake's own
    Python (no vLLM) and the first verl job would die building its rollout replicas. Refused at the start of the run,
    before the head or any job starts."""
    result = snakemake(
        tmp_path, "--cores", "1", "--resources", "gpu=8", f"--configfile={REPO / 'config/gpu.yaml'}",
        "results/runs/e1/run.json", check=False, timeout=300,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert f"the Python {sys.executable} cannot import vllm" in output and "ray.python" in output
    assert not (tmp_path / "results").exists()  # no job ran (the data jobs before e1's training neither)
    assert read_state(default_temp_dir(tmp_path)) is None  # no head started


@pytest.mark.slow
def test_a_run_without_launched_jobs_starts_no_head(tmp_path):
    """The data stage of the study, checked on a CPU node before any GPU is booked: no verl job, so no head and no
    vLLM needed (the data job itself fails here: there is no ChartQA download in this folder)."""
    result = snakemake(
        tmp_path, "--cores", "1", "--resources", "gpu=8", f"--configfile={REPO / 'config/gpu.yaml'}",
        "results/data/chartqa/train.parquet", check=False, timeout=300,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert "vllm" not in output and "local Ray head" not in output
    assert (tmp_path / "results/logs/data/chartqa/train.log").exists()  # the data job ran


# ---------------------------------------------------------------------------------------------------------------
# An inline job (a Slurm job) starts its own Ray: no RAY_ADDRESS reaches it
# ---------------------------------------------------------------------------------------------------------------

RAY_CLIENT_VARIABLES = ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH", "CHARTRL_LOCAL_RAY_HEAD")


def inline_job_sees(extra_env: dict[str, str]) -> dict[str, str | None]:
    """The Ray client variables an inline job sees when ``chartrl launch`` runs with ``extra_env``."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), **extra_env}
    show = f"import json, os; print(json.dumps({{k: os.environ.get(k) for k in {list(RAY_CLIENT_VARIABLES)}}}))"
    result = subprocess.run(
        [sys.executable, "-m", "chartrl", "launch", "--launcher", "inline", "--submission-id", "x", "--",
         sys.executable, "-c", show],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.slow
def test_an_inline_job_never_gets_a_ray_address():
    """The Slurm plugin submits with --export=ALL, so a RAY_ADDRESS left in the submitting shell reaches the job,
    and verl's ray.init() would join that cluster instead of starting its own on the job's node."""
    seen = inline_job_sees({"RAY_ADDRESS": "http://login-node:8265", "RAY_AUTH_MODE": "token"})
    assert seen["RAY_ADDRESS"] is None
    assert seen["RAY_AUTH_MODE"] == "token"  # the user's own setting, not the workflow's head's: kept


@pytest.mark.slow
def test_an_inline_job_gets_none_of_the_local_heads_client_settings(tmp_path):
    head = {"RAY_ADDRESS": "http://127.0.0.1:20001", "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": "/t/token",
            "CHARTRL_LOCAL_RAY_HEAD": str(tmp_path)}  # fmt: skip
    assert inline_job_sees(head) == dict.fromkeys(RAY_CLIENT_VARIABLES)


class _BusyHead:
    """Ray's job API as a loaded head answers it: a submission refused ``refusals`` times for want of a job agent
    (Ray's status 500 text), or failing with ``error``; ``goes_through``: the refused submission went in anyway."""

    def __init__(self, refusals=0, error=None, goes_through=False):
        self.refusals, self.error, self.goes_through = refusals, error, goes_through
        self.jobs, self.tries = [], 0

    def list_jobs(self):
        return list(self.jobs)

    def submit_job(self, submission_id, **_):
        from types import SimpleNamespace

        self.tries += 1
        if self.error:
            raise RuntimeError(self.error)
        if self.refusals:
            self.refusals -= 1
            if self.goes_through:
                self.jobs.append(SimpleNamespace(submission_id=submission_id, status="RUNNING"))
            raise RuntimeError(
                "Request failed with status code 500: No available agent to submit job, please try again later.."
            )
        self.jobs.append(SimpleNamespace(submission_id=submission_id, status="PENDING"))
        return submission_id


@pytest.mark.parametrize(
    "head, tries, retries, outcome",
    [
        (_BusyHead(refusals=2), 3, 2, "chartrl-train-e1"),  # tried again until an agent answers
        (_BusyHead(refusals=1, goes_through=True), 1, 1, "chartrl-train-e1"),  # attached to, not submitted twice
        (_BusyHead(refusals=9), 5, 4, "No available agent"),  # not for ever: Ray's own error, after 5 tries
        (_BusyHead(error="Request failed with status code 400: bad runtime_env"), 1, 0, "bad runtime_env"),  # at once
    ],
)
def test_a_submission_the_head_has_no_agent_for_is_tried_again(head, tries, retries, outcome, caplog):
    launcher = RayJobLauncher(address="http://127.0.0.1:8265", environ={})
    job = Job(("chartrl", "train"), "chartrl-train-e1", cwd=Path("/w"))
    try:
        result = launcher.submit_with_retries(head, job, pause_s=0)
    except RuntimeError as err:
        result = str(err)
    assert outcome in result and head.tries == tries
    assert len([r for r in caplog.records if "no job agent ready" in r.getMessage()]) == retries
