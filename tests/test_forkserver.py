"""The forkserver (chartrl.forkserver): a ``chartrl`` command run through it is the command run in its own process,
with the client's folder, environment, standard streams, exit status and signals; a client that goes away stops
its job; another environment gets another server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from chartrl import forkserver

from conftest import BIN, stop_forkservers

pytestmark = pytest.mark.slow
REWARD = ["reward", "--name", "v1_rule", "--response", "<answer>42</answer>", "--truth", "42"]


@pytest.fixture()
def served(tmp_path):
    """An environment with the forkserver on, its own socket folder, and its server started and ready."""
    folder = tmp_path / "fs"
    env = {**os.environ, forkserver.ENV: "on", forkserver.DIR_ENV: str(folder), "PROBE": "value"}
    first = subprocess.run([BIN / "chartrl", *REWARD], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert first.returncode == 0, first.stderr  # no server yet: run here, and one is started
    deadline = time.monotonic() + 120
    while not any("ready" in log.read_text() for log in folder.glob("*.log")):
        assert time.monotonic() < deadline, "the forkserver never became ready"
        time.sleep(0.2)
    yield env, folder
    stop_forkservers(folder)


def _jobs(folder: Path) -> list[str]:
    return [line for log in folder.glob("*.log") for line in log.read_text().splitlines() if line.startswith("job ")]


def test_a_served_command_is_the_command_in_its_own_process(served, tmp_path):
    env, folder = served
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run([BIN / "chartrl", *REWARD], env=env, capture_output=True, text=True, cwd=work)
    alone = subprocess.run(
        [BIN / "chartrl", *REWARD], env={**env, forkserver.ENV: "off"}, capture_output=True, text=True, cwd=work
    )
    assert done.returncode == alone.returncode == 0
    assert json.loads(done.stdout) == json.loads(alone.stdout) == {"overall": 1.0, "accuracy": 1.0, "tool_bonus": 0.0}
    assert any(f"in {work}: chartrl reward" in line for line in _jobs(folder))  # the server ran it
    # a usage error: the same message on the client's stderr and the same exit status
    bad = subprocess.run([BIN / "chartrl", "no-such-stage"], env=env, capture_output=True, text=True, cwd=work)
    assert bad.returncode == 2 and "invalid choice: 'no-such-stage'" in bad.stderr
    # the job's folder, environment and redirected output are the client's (the inline launcher execs the command)
    out = work / "out.txt"
    script = 'import os, sys; print(os.getcwd(), os.environ["PROBE"]); sys.stderr.write("to stderr\\n"); sys.exit(3)'
    with open(out, "w") as stdout:
        probe = subprocess.run(
            [BIN / "chartrl", "launch", "--launcher", "inline", "--submission-id", "p", "--", sys.executable, "-c",
             script],
            env=env, stdout=stdout, stderr=subprocess.PIPE, text=True, cwd=work,
        )  # fmt: skip
    assert probe.returncode == 3 and "to stderr" in probe.stderr
    assert out.read_text().split() == [str(work), "value"]
    assert sum("chartrl launch" in line for line in _jobs(folder)) == 1
    # another environment: the command runs here, and another server is started for it
    other = subprocess.run([BIN / "chartrl", *REWARD], env={**env, "PROBE": "other"}, capture_output=True, cwd=work)
    assert other.returncode == 0 and len(list(folder.glob("*.log"))) == 2


def _launch_sleeper(env, cwd, marker: Path) -> subprocess.Popen:
    trap = f"trap 'touch {marker}; exit 143' TERM; sleep 60 & wait"
    return subprocess.Popen(
        [BIN / "chartrl", "launch", "--launcher", "inline", "--submission-id", "s", "--", "sh", "-c", trap],
        env=env, cwd=cwd,
    )  # fmt: skip


def _wait_for(predicate, seconds=30.0):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_a_signal_to_the_client_reaches_the_job(served, tmp_path):
    env, folder = served
    marker = tmp_path / "stopped"
    client = _launch_sleeper(env, tmp_path, marker)
    _wait_for(lambda: any("chartrl launch" in line for line in _jobs(folder)))
    time.sleep(1.0)  # the job has exec'd the shell and set its trap
    client.send_signal(signal.SIGTERM)
    assert client.wait(timeout=30) == 143
    assert marker.exists()


def test_a_job_whose_client_is_killed_is_stopped(served, tmp_path):
    env, folder = served
    marker = tmp_path / "stopped"
    client = _launch_sleeper(env, tmp_path, marker)
    _wait_for(lambda: any("chartrl launch" in line for line in _jobs(folder)))
    time.sleep(1.0)
    client.kill()  # SIGKILL: nothing forwarded; the server sees the connection close
    client.wait(timeout=30)
    _wait_for(marker.exists)


def test_a_job_killed_by_a_signal_ends_its_client_by_the_same_signal(served, tmp_path):
    env, _ = served
    done = subprocess.run(
        [BIN / "chartrl", "launch", "--launcher", "inline", "--submission-id", "k", "--", "sh", "-c", "kill -9 $$"],
        env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == -signal.SIGKILL


def test_the_environment_key_covers_every_variable_but_those_set_per_process():
    env = {"A": "1", "PWD": "/x", "SHLVL": "1", "RAY_JOB_CONFIG_JSON_ENV_VAR": '{"metadata": {"job_name": "a"}}'}
    per_process = {"PWD": "/y", "SHLVL": "2", "RAY_JOB_CONFIG_JSON_ENV_VAR": '{"metadata": {"job_name": "b"}}'}
    assert forkserver.environment_key(env) == forkserver.environment_key({**env, **per_process})
    assert forkserver.environment_key(env) != forkserver.environment_key({**env, "A": "2"})
    # Snakemake's per-job threads: which of them are set is the environment's, their counts the job's
    three, five = ({name: n for name in forkserver.THREAD_VARS} for n in ("3", "5"))
    assert forkserver.environment_key({**env, **three}) == forkserver.environment_key({**env, **five})
    assert forkserver.environment_key({**env, **three}) != forkserver.environment_key(env)


PROBE = """import json, sys
from pathlib import Path

def report(argv):
    import torch
    from threadpoolctl import threadpool_info

    pools = {i["user_api"]: i["num_threads"] for i in threadpool_info() if i["user_api"] in ("openmp", "blas")}
    print(json.dumps({"torch": torch.get_num_threads(), **pools}))
    return 0

def serve_forks(path):
    from chartrl import forkserver

    return forkserver.serve(Path(path), report, preload=("numpy", "torch", "threadpoolctl"))

if __name__ == "__main__":
    from chartrl import forkserver

    command = (sys.executable, "-P", "-c", "import sys; sys.path.insert(0, %r); import probe; "
               "sys.exit(probe.serve_forks(sys.argv[1]))" % str(Path(__file__).parent))
    served = forkserver.delegate(sys.argv[1:], command, "probe-") if sys.argv[1:] == ["served"] else None
    raise SystemExit(report(sys.argv[1:]) if served is None else served)
"""


def test_jobs_with_other_thread_counts_share_a_server_and_each_runs_with_its_own(tmp_path):
    """Snakemake gives each job its rule's threads (OMP_NUM_THREADS and the BLAS variables): the jobs of a 1-thread
    and a 2-thread rule fork from one server, and each has the torch, OpenMP and BLAS threads a process of its own
    would have, whichever job started the server. A job without the variables gets a server of its own, with the
    libraries' defaults."""
    (tmp_path / "probe.py").write_text(PROBE)
    folder = Path(tempfile.mkdtemp(prefix="fs-"))
    base = {k: v for k, v in os.environ.items() if k not in forkserver.THREAD_VARS}
    base.update({forkserver.ENV: "on", forkserver.DIR_ENV: str(folder)})

    def probe(threads: int | None, mode: str) -> dict:
        env = {**base, **({name: str(threads) for name in forkserver.THREAD_VARS} if threads else {})}
        done = subprocess.run(
            [sys.executable, str(tmp_path / "probe.py"), mode], env=env, capture_output=True, text=True, check=True
        )
        return json.loads(done.stdout)

    try:
        own = {threads: probe(threads, "alone") for threads in (2, 1, None)}
        assert own[1] == {"torch": 1, "openmp": 1, "blas": 1} and own[2] == {"torch": 2, "openmp": 2, "blas": 2}
        for threads in (2, None):  # no server yet: the job runs in its own process and starts one
            assert probe(threads, "served") == own[threads]
        _wait_for(lambda: sum("ready" in log.read_text() for log in folder.glob("probe-*.log")) == 2, seconds=60)
        for threads in (1, 2, None, 1):
            assert probe(threads, "served") == own[threads], threads
        jobs = sorted(log.read_text().count("job ") for log in folder.glob("probe-*.log"))
        assert jobs == [1, 3]  # one server ran the three jobs with thread counts, one the job without
    finally:
        stop_forkservers(folder)


def test_a_server_of_other_jobs_has_a_socket_of_its_own_keyed_without_the_variables_named(monkeypatch):
    """As the verl stand-in's server (tests/verl_backend/verl_standin.py): its jobs differ in their MLflow run. (In
    a short folder: a socket's path has at most 107 bytes, and this test's tmp_path under a pytest-xdist worker,
    with the longer socket name, has more.)"""
    monkeypatch.setenv(forkserver.DIR_ENV, tempfile.mkdtemp(prefix="fs-"))
    monkeypatch.setenv("MLFLOW_RUN_ID", "a")
    per_job = forkserver.VOLATILE | {"MLFLOW_RUN_ID"}
    other, own = forkserver.socket_path("other-", per_job), forkserver.socket_path()
    assert other.name.startswith("other-") and other.parent == own.parent and other.name[6:] != own.name
    monkeypatch.setenv("MLFLOW_RUN_ID", "b")
    assert forkserver.socket_path("other-", per_job) == other and forkserver.socket_path() != own
    monkeypatch.setenv("A_SETTING", "1")
    assert forkserver.socket_path("other-", per_job) != other


def test_off_unset_or_an_unsafe_folder_runs_the_command_here(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(forkserver.ENV, raising=False)
    assert forkserver.delegate(["reward"], ["false"]) is None
    monkeypatch.setenv(forkserver.ENV, "off")
    assert forkserver.delegate(["reward"], ["false"]) is None
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv(forkserver.ENV, "on")
    monkeypatch.setenv(forkserver.DIR_ENV, str(shared))
    assert forkserver.delegate(["reward"], ["false"]) is None
    assert "is not a folder only this user can write to" in capsys.readouterr().err
    assert not list(shared.iterdir())  # no server started


@pytest.mark.parametrize("unbuffered", ["1", ""])
def test_a_served_job_honours_pythonunbuffered(tmp_path, unbuffered):
    """Ray runs its jobs with PYTHONUNBUFFERED=1 so that their log streams as it is written: a forked job whose
    client has it writes through, as `python -u` does."""
    script = (
        "import os, sys; from chartrl import forkserver\n"
        "request = {'env': {**os.environ, 'PYTHONUNBUFFERED': sys.argv[1]}, 'cwd': os.getcwd(), 'umask': 0o22,"
        " 'argv': [], 'argv0': 'chartrl'}\n"
        "job = lambda argv: print(sys.stdout.write_through, sys.stderr.write_through)\n"
        "sys.exit(forkserver._run_job(request, [os.dup(0), os.dup(1), os.dup(2)], job))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    done = subprocess.run([sys.executable, "-c", script, unbuffered], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ([str(bool(unbuffered))] * 2)


def _start_beside(folder: Path, starter_runs_s: float) -> subprocess.Popen:
    """A client that starts a server (idle time 0.3 s) on ``folder``/s.sock, then runs for ``starter_runs_s``."""
    server = (
        "import sys; from pathlib import Path; from chartrl import forkserver; "
        "sys.exit(forkserver.serve(Path(sys.argv[1]), lambda argv: 0, idle_s=0.3, preload=()))"
    )
    starter = (
        "import sys, time; from pathlib import Path; from chartrl import forkserver; "
        f"forkserver._start_server(Path(sys.argv[1]), [sys.executable, '-c', {server!r}]); time.sleep({starter_runs_s})"
    )
    folder.mkdir(mode=0o700)
    return subprocess.Popen([sys.executable, "-c", starter, str(folder / "s.sock")])


def _logged(log: Path, text: str):
    return lambda: log.exists() and text in log.read_text()


def test_a_server_outlives_its_idle_time_while_the_client_that_started_it_runs(tmp_path):
    """A client that finds no server starts one and runs its own job meanwhile: a training run, longer than the
    server's idle time. The server stays for the jobs that follow it, and idles out only once that client is gone
    (before, the first jobs after a long one started cold: the server had left)."""
    folder = tmp_path / "fs"
    client = _start_beside(folder, 6)
    path, log = folder / "s.sock", folder / "s.log"
    _wait_for(_logged(log, "ready"), 60)
    time.sleep(2.0)  # more than six idle times, its starter still running
    assert "exiting" not in log.read_text() and path.exists()
    assert client.wait(timeout=30) == 0
    _wait_for(_logged(log, "idle, exiting"))  # once its starter has ended
    assert not path.exists()


def test_a_server_whose_starter_ended_before_it_was_ready_idles_out(tmp_path):
    """The starter's short job may end before the server has started: the server, reparented, is held by nothing."""
    folder = tmp_path / "fs"
    assert _start_beside(folder, 0).wait(timeout=30) == 0
    _wait_for(_logged(folder / "s.log", "idle, exiting"), 60)
