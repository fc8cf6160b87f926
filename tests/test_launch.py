"""The launchers, for real: one local Ray head for this module (its own ports and temp folder, stopped at the
end), jobs submitted through ``chartrl launch`` as the train rule runs it. The Ray job's exit code comes back,
its log streams, SIGTERM stops it, a resubmission attaches to its running twin, a small local-backend training job
runs on the head, and stopping the head ends its processes and nothing else. Workflow runs sharing a head leave it
to the last one."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from chartrl import forkserver
from chartrl.launch import LOCAL_HEAD_ENV
from chartrl.ray_head import (
    DRAIN_ENV,
    USERS_DIR,
    _request,
    free_port_block,
    head_users,
    join_head,
    leave_head,
    session_processes,
    start_head,
    stop_head,
)

from conftest import REPO, stop_forkservers

pytestmark = pytest.mark.slow
BIN = str(Path(sys.executable).parent)
SECRET = "sk-test-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def head():
    """A local head started as the workflow starts it, from an environment holding a judge key."""
    temp_dir = Path(tempfile.mkdtemp(prefix="crl-ray-", dir="/tmp"))  # short: Ray's socket paths must fit
    saved = dict(os.environ)
    os.environ.update(
        PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}",
        PYTHONPATH=str(REPO / "src"),
        CHARTRL_TEST_JUDGE_KEY=SECRET,
    )
    started = time.perf_counter()
    state = start_head(temp_dir, base_port=free_port_block(seed=str(temp_dir)), num_cpus=2, num_gpus=0)
    print(f"local head up in {time.perf_counter() - started:.1f}s")
    env = {**os.environ, **state.client_env()}
    os.environ.clear()
    os.environ.update(saved)
    yield state, env
    stop_head(state)
    shutil.rmtree(temp_dir, ignore_errors=True)  # its logs hold the canary of the secrets test


def launch(env, sid, *command, extra=()):
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "chartrl",
            "launch",
            "--launcher",
            "ray",
            "--submission-id",
            sid,
            *extra,
            "--",
            *command,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def job_ids(state, base):
    return {j["submission_id"]: j for j in _request(state, "GET", "/api/jobs/") if j["submission_id"].startswith(base)}


def test_exit_code_mirrors_the_job_and_the_log_streams(head):
    state, env = head
    started = time.perf_counter()
    process = launch(env, f"chartrl-test-exit-{uuid.uuid4().hex[:6]}", "bash", "-c", "echo out; echo err >&2; exit 3")
    out, err = process.communicate(timeout=120)
    print(f"one trivial Ray job, submitted and followed: {time.perf_counter() - started:.1f}s")
    assert process.returncode == 3, err
    assert "out" in out and "err" in out  # the job's output, both streams, on the launcher's stdout
    assert "driver exit code 3" in err


def test_sigterm_stops_the_ray_job(head):
    state, env = head
    sid = f"chartrl-test-term-{uuid.uuid4().hex[:6]}"
    process = launch(env, sid, "bash", "-c", "for i in $(seq 60); do echo tick $i; sleep 1; done")
    assert "tick 1" in process.stdout.readline() + process.stdout.readline() + process.stdout.readline()
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=120)
    assert process.returncode == 143
    assert job_ids(state, sid)[sid]["status"] == "STOPPED"


def test_a_stopped_job_has_time_to_end_its_run(head, tmp_path):
    """The head gives a stopped job's driver more than Ray's default 3 s between SIGTERM and SIGKILL, so that a
    training job can end its MLflow run KILLED."""
    state, env = head
    sid = f"chartrl-test-grace-{uuid.uuid4().hex[:6]}"
    ended = tmp_path / "ended"
    script = f"trap 'sleep 5; touch {ended}; exit 143' TERM; echo ready; while true; do sleep 0.2; done"
    process = launch(env, sid, "bash", "-c", script)
    assert "ready" in process.stdout.readline() + process.stdout.readline() + process.stdout.readline()
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=120)
    assert process.returncode == 143 and ended.exists()


def test_a_resubmission_attaches_to_its_running_twin(head):
    state, env = head
    sid = f"chartrl-test-twin-{uuid.uuid4().hex[:6]}"
    first = launch(env, sid, "bash", "-c", "sleep 4; echo first done")
    while sid not in job_ids(state, sid):
        time.sleep(0.2)
    second = launch(env, sid, "bash", "-c", "echo I am a twin")
    out_second, err_second = second.communicate(timeout=120)
    out_first, _ = first.communicate(timeout=120)
    assert first.returncode == second.returncode == 0
    assert "attaching" in err_second and "first done" in out_second and "I am a twin" not in out_second
    assert list(job_ids(state, sid)) == [sid]
    third = launch(env, sid, "bash", "-c", "echo again")  # it has ended: a new id, never reused
    third.communicate(timeout=120)
    assert third.returncode == 0 and set(job_ids(state, sid)) == {sid, f"{sid}-2"}


def test_secrets_are_inherited_from_the_head_not_sent(head):
    state, env = head
    sid = f"chartrl-test-key-{uuid.uuid4().hex[:6]}"
    import hashlib

    digest = hashlib.sha256(SECRET.encode()).hexdigest()  # the job proves it has the key without printing it
    script = f'test "$(printf %s "$CHARTRL_TEST_JUDGE_KEY" | sha256sum | cut -c1-64)" = {digest} && echo key-inherited'
    process = launch(
        env, sid, "bash", "-c", script, extra=("--env", "PYTHONPATH", "--secret-env", "CHARTRL_TEST_JUDGE_KEY")
    )
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0 and "key-inherited" in out
    runtime_env = job_ids(state, sid)[sid]["runtime_env"] or {}
    assert "CHARTRL_TEST_JUDGE_KEY" not in runtime_env.get("env_vars", {})  # never travelled through Ray
    assert runtime_env["env_vars"]["PYTHONPATH"] == env["PYTHONPATH"]
    logged = subprocess.run(["grep", "-rl", SECRET, state.temp_dir], capture_output=True, text=True).stdout
    assert logged == "" and SECRET not in err


CANARY_ENV = "CHARTRL_TEST_CANARY_KEY"
ANOTHER_USER = 65534  # nobody


def files_holding(text: str, folder: Path) -> list[Path]:
    """The files under ``folder`` that hold ``text``, as this process reads them."""
    found = subprocess.run(["grep", "-rlF", "--", text, str(folder)], capture_output=True, text=True).stdout
    return [Path(line) for line in found.splitlines()]


def open_to_others(path: Path) -> bool:
    """Whether the mode bits let a user who is neither the owner nor root read ``path``: the file readable and
    every folder above it searchable, for the group or for others."""
    chain = [path.stat().st_mode, *(folder.stat().st_mode for folder in path.parents)]
    return any(
        chain[0] & read and all(mode & search for mode in chain[1:])
        for read, search in ((stat.S_IRGRP, stat.S_IXGRP), (stat.S_IROTH, stat.S_IXOTH))
    )


def read_by_another_user(text: str, folder: Path) -> list[Path]:
    """The files under ``folder`` holding ``text`` that another user of the machine can read. As root, a reader
    runs as that user (nobody, no supplementary groups), and must first find ``text`` in a control file left open
    to everyone, or it proves nothing; otherwise the mode bits of each file holding ``text`` are checked."""
    if os.geteuid() != 0:
        return [path for path in files_holding(text, folder) if open_to_others(path)]
    control = Path(tempfile.mkdtemp(prefix="crl-open-", dir="/tmp"))
    try:
        control.chmod(0o755)
        (control / "open").write_text(text)
        (control / "open").chmod(0o644)
        reader = subprocess.run(
            ["grep", "-rlF", "--", text, str(control), str(folder)],
            user=ANOTHER_USER, group=ANOTHER_USER, extra_groups=[], capture_output=True, text=True,
        )  # fmt: skip
    finally:
        shutil.rmtree(control)
    found = [Path(line) for line in reader.stdout.splitlines()]
    assert control / "open" in found, f"the unprivileged reader read nothing: {reader.stderr[-500:]}"
    return [path for path in found if path != control / "open"]


def test_another_user_reads_no_secret_in_the_heads_temp_folder(head):
    """Ray makes its temp folders world-writable (0777) and writes its logs world-readable, the runtime envs it
    sets up among them, values included (runtime_env_agent.log). A canary key sent through the launcher's
    --secret-env (to the head as to any cluster at RAY_ADDRESS, so it travels in the job's runtime env) and
    printed by the job lands there twice; another user of the machine must read it nowhere."""
    state, env = head
    canary = "sk-canary-" + uuid.uuid4().hex
    client = {name: value for name, value in env.items() if name != LOCAL_HEAD_ENV} | {CANARY_ENV: canary}
    sid = f"chartrl-test-canary-{uuid.uuid4().hex[:6]}"
    process = launch(client, sid, "bash", "-c", f"echo the key is ${CANARY_ENV}", extra=("--secret-env", CANARY_ENV))
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0 and canary in out, err
    temp_dir = Path(state.temp_dir)
    holding = {path.name for path in files_holding(canary, temp_dir)}
    assert "runtime_env_agent.log" in holding and f"job-driver-{sid}.log" in holding, holding  # so the check bites
    assert read_by_another_user(canary, temp_dir) == []
    assert stat.S_IMODE(temp_dir.stat().st_mode) == 0o700


def test_verl_driver_and_task_runner_output_reach_the_launchers_log(head):
    """verl's driver (its own run_ppo: ray.init with the ray_kwargs our overrides compose to) and its TaskRunner
    actor, run as a Ray job through `chartrl launch` as the train rule does: both the driver's prints and the
    actor's come back on the launcher's stdout, which the rule redirects into its log. The actor's travel through
    Ray's log monitor (ray.init's log_to_driver, on by default, which verl's ray_init leaves alone); the local
    head runs it (it was once started with --include-log-monitor false, and actor output was lost)."""
    state, env = head
    sid = f"chartrl-test-verl-{uuid.uuid4().hex[:6]}"
    started = time.perf_counter()
    script = str(REPO / "tests" / "verl_task_runner.py")
    process = launch(
        env, sid, sys.executable, script, str(REPO / "config" / "gpu.yaml"), "e10", extra=("--env", "PYTHONPATH")
    )
    out, err = process.communicate(timeout=120)
    print(f"verl's driver and a task runner actor through chartrl launch: {time.perf_counter() - started:.1f}s")
    assert process.returncode == 0, out[-3000:] + err[-3000:]
    assert "verl driver: config composed" in out and "ray init kwargs:" in out  # the driver, verl's own print
    assert "task runner actor: training e10/train" in out  # the actor's print, through log_to_driver
    assert "task runner actor: a warning from its logger" in out


def test_a_local_backend_training_job_runs_on_the_head(head, tiny_model_dir, synth_rows, tmp_path):
    from chartrl.config import load_config, to_plain
    from chartrl.data.contract import write_split

    state, env = head
    config = load_config([REPO / "config/smoke.yaml"], root=REPO)
    spec = {"series": {"id": "e1", **to_plain(config.resolved["series"]["e1"])}}
    spec |= {name: to_plain(config.resolved[name]) for name in ("train", "rollout", "prompts", "tools", "judge")}
    spec["train"] |= {"steps": 1, "val_every": 1, "val_rows": 2, "checkpoint_every": 1, "prompts_per_step": 2}
    write_split(synth_rows["train"], tmp_path / "train.parquet")
    write_split(synth_rows["val"], tmp_path / "val.parquet")
    command = ["chartrl", "train", "--spec", json.dumps(spec), "--model", str(tiny_model_dir), "--train",
               str(tmp_path / "train.parquet"), "--val", str(tmp_path / "val.parquet"), "--out", str(tmp_path / "run"),
               "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db", "--experiment", "launch-test"]  # fmt: skip
    started = time.perf_counter()
    process = launch(env, f"chartrl-train-e1-{uuid.uuid4().hex[:6]}", *command, extra=("--num-cpus", "2"))
    out, err = process.communicate(timeout=600)
    print(f"a one-step local training job through the head: {time.perf_counter() - started:.1f}s")
    assert process.returncode == 0, out[-3000:] + err[-2000:]
    assert json.loads((tmp_path / "run" / "run.json").read_text())["last_step"] == 1
    assert "e1 trained" in out  # the trainer's own log, streamed back


def test_the_local_heads_jobs_run_in_forks_of_a_preloaded_server(head, tmp_path):
    """The workflow turns the forkserver on after its head started: the launcher passes it to the head's jobs, and
    all the Ray jobs of the head share one server (Ray's per-job variable is not part of its key) after the first,
    which runs itself and starts it. The job's output streams back as before."""
    _, env = head
    folder = tmp_path / "fs"
    env = {**env, forkserver.ENV: "on", forkserver.DIR_ENV: str(folder)}
    reward = ("chartrl", "reward", "--name", "v1_rule", "--response", "<answer>42</answer>", "--truth", "42")
    try:
        for attempt in range(3):
            process = launch(env, f"chartrl-test-served-{uuid.uuid4().hex[:6]}", *reward)
            out, err = process.communicate(timeout=120)
            assert process.returncode == 0, err
            assert '"accuracy": 1.0' in out
            assert "environment passed: CHARTRL_FORKSERVER, CHARTRL_FORKSERVER_DIR" in err
            deadline = time.monotonic() + 120  # the first job started the server: wait until it serves
            while attempt == 0 and not any("ready" in log.read_text() for log in folder.glob("*.log")):
                assert time.monotonic() < deadline, "the forkserver never became ready"
                time.sleep(0.2)
        served = [line for log in folder.glob("*.log") for line in log.read_text().splitlines()]
        assert sum(line.endswith(": chartrl reward") for line in served) == 2  # the two after the first
    finally:
        stop_forkservers(folder)


def test_inline_runs_the_command_in_the_launchers_own_process(tmp_path):
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(REPO / "src")}
    process = subprocess.Popen(
        [sys.executable, "-m", "chartrl", "launch", "--launcher", "inline", "--submission-id", "x", "--", "bash", "-c",
         "echo $$; exit 5"],
        env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    out, _ = process.communicate(timeout=60)
    assert process.returncode == 5 and int(out.split()[0]) == process.pid  # exec: the same process


def test_without_a_cluster_the_ray_launcher_says_what_to_do():
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PYTHONPATH"] = str(REPO / "src")
    result = subprocess.run(
        [sys.executable, "-m", "chartrl", "launch", "--launcher", "ray", "--submission-id", "x", "--", "true"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1 and "set RAY_ADDRESS" in result.stderr and "launcher: inline" in result.stderr


def test_stopping_the_head_ends_its_processes_and_nothing_else(head):
    state, _ = head
    bystander = subprocess.Popen(["sleep", "120"], start_new_session=True)
    try:
        assert session_processes(state.pid)
        stop_head(state)
        assert session_processes(state.pid) == []
        with pytest.raises(OSError):
            _request(state, "GET", "/api/jobs/", timeout_s=2)
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_workflow_runs_sharing_a_head_leave_stopping_it_to_the_last_one():
    temp_dir = Path(tempfile.mkdtemp(prefix="crl-ray-", dir="/tmp"))
    other_run = subprocess.Popen(["sleep", "300"])  # stands for a second Snakemake run in the same folder
    dead_run = subprocess.Popen(["true"])  # a run killed by SIGKILL: its entry stays behind
    dead_run.wait()
    first = join_head(temp_dir, base_port=free_port_block(seed=str(temp_dir)), num_cpus=1, num_gpus=0)
    try:
        (temp_dir / USERS_DIR / str(dead_run.pid)).write_text("12345")
        assert join_head(temp_dir, other_run.pid) == first  # the running head is joined, not started again
        assert head_users(temp_dir) == sorted([os.getpid(), other_run.pid])  # the dead run's entry is dropped
        assert leave_head(first) == [other_run.pid]  # the first run ends: the head stays for the other
        assert _request(first, "GET", "/api/jobs/") == []
        # the head is stopped seconds after it started: Ray's drain on SIGTERM (30 s by default), which then waited
        # out its whole time in one stop of two, is off
        assert f"{DRAIN_ENV}=0".encode() in Path(f"/proc/{first.pid}/environ").read_bytes().split(b"\0")
        assert leave_head(first, other_run.pid) == []  # the last run ends: the head stops
        assert session_processes(first.pid) == []
        with pytest.raises(OSError):
            _request(first, "GET", "/api/jobs/", timeout_s=2)
    finally:
        stop_head(first)
        shutil.rmtree(temp_dir, ignore_errors=True)
        other_run.kill()
        other_run.wait()
