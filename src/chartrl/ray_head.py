"""The local Ray head a pipeline run starts for itself (``launcher: ray`` and no ``RAY_ADDRESS``), and stops.

Two Ray clusters on one host collide on Ray's default ports, and ``ray stop`` stops every Ray process of the user.
So the head gets its own block of 100 consecutive ports (GCS, dashboard and job API, client server, node manager,
object manager, metrics, the agents; workers take the last 80) and its own temp folder, and it is started as
``ray start --head --block`` in a new session: stopping it signals that one process, which shuts its cluster
down, and then ends whatever is left in that session, by process id, and nothing else.

The job API listens on loopback only (``--dashboard-host 127.0.0.1``), and the cluster requires a token (Ray's
token authentication, the token in the head's temp folder, readable by the user only). Ray 2.60 itself resolves
``--node-ip-address 127.0.0.1`` to the machine's address for its internal gRPC servers
(``ray._private.services.resolve_ip_for_localhost``), which is why the token matters.

Several workflow runs in one working folder (Snakemake's lock lets runs on different targets go side by side) share
its head: each run joins it (:func:`join_head`, which starts it if none runs) and registers itself, one file per run
under ``chartrl-runs/`` in the temp folder, and leaves it (:func:`leave_head`) when it ends; only the last run to
leave stops the head, so a run that ends first never stops another run's jobs. An entry whose process has died
(a run killed with SIGKILL) is ignored and removed. Joining and leaving hold a lock on the temp folder.

The head's temp folder is the user's alone (mode 0700, and refused when another user owns it): Ray makes its own
temp folder and session folders world-writable (``ray/_common/utils.py``, ``try_make_directory_shared``: chmod 0777)
and writes its logs world-readable, among them ``runtime_env_agent.log``, which holds every job's runtime env,
values included, and the jobs' own output. So Ray's ``--temp-dir`` is a folder inside the head's (:data:`RAY_DIR`),
where no other user can reach it; the files chartrl writes there itself that could hold a secret (the token, the
head's log) are 0600 as well.

The head's environment is the workflow's, so its jobs inherit it (the judge's key included: it never travels
through Ray). ``start`` returns the variables a client needs (``RAY_ADDRESS``, the token settings); the workflow
exports them for its jobs.

The head runs one Python environment, named by its interpreter (``ray.python``; by default the conda environment
Snakemake made for the model jobs, else the workflow's own): ``ray start`` is the ``ray`` beside that interpreter, so
Ray's workers (verl's FSDP and vLLM actors) run it, and the launcher starts each job's driver with it
(``<python> -m chartrl ...``). A verl job needs vLLM there: :func:`python_problem` says when it is missing, before
anything is submitted. The workflow's own Python (the CPU lock's ``.venv``) has no vLLM and a CPU-only torch.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from chartrl.errors import ChartrlError

log = logging.getLogger(__name__)
ACTIVE = ("PENDING", "RUNNING")
"""The statuses of a Ray job that has not ended."""
LOCAL_HEAD_ENV = "CHARTRL_LOCAL_RAY_HEAD"
"""Set (to the head's temp folder) with RAY_ADDRESS by the workflow when it started the local head itself."""
PORTS_PER_HEAD = 100
STATE_FILE = "chartrl-head.json"
USERS_DIR = "chartrl-runs"
"""One file per workflow run using the head, named by its process id, holding the process's start time."""
LOCK_FILE = "chartrl-head.lock"
RAY_DIR = "ray"
"""Ray's own temp folder (``ray start --temp-dir``), inside the head's: Ray opens it to every user (chmod 0777).
Short, as the head's folder: Ray's AF_UNIX socket paths under it must stay within 107 characters."""
PORT_OFFSETS = {
    "port": 0,
    "dashboard_port": 1,
    "ray_client_server_port": 2,
    "node_manager_port": 3,
    "object_manager_port": 4,
    "metrics_export_port": 5,
    "dashboard_agent_listen_port": 6,
    "dashboard_agent_grpc_port": 7,
    "runtime_env_agent_port": 8,
}
WORKER_PORTS = (20, PORTS_PER_HEAD - 1)
STOP_WAIT_ENV = "RAY_JOB_STOP_WAIT_TIME_S"
"""Ray's grace between the SIGTERM and the SIGKILL of a stopped job (ray/dashboard/modules/job/job_supervisor.py)."""
JOB_STOP_WAIT_S = 15
DRAIN_ENV = "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"
"""How long ``ray start`` drains its node on SIGTERM before it stops its processes (ray/_private/node.py: it waits
for the raylet to go idle, for Ray Serve's sake; 30 s by default, 0 skips the drain)."""


class HeadError(ChartrlError):
    """The local head could not start (the message holds the end of its log)."""


@dataclass(frozen=True)
class HeadState:
    pid: int
    """The ``ray start --block`` process; its session holds the whole cluster."""
    temp_dir: str
    base_port: int
    address: str
    """The job API, http://127.0.0.1:<dashboard port>."""
    token_path: str
    python: str | None = None
    """The interpreter of the environment the head runs (its ``ray`` is the one beside it), and its jobs' drivers."""

    def client_env(self) -> dict[str, str]:
        """What a job client (the launcher, a job's driver) needs to reach this head."""
        return {
            "RAY_ADDRESS": self.address,
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": self.token_path,
            LOCAL_HEAD_ENV: self.temp_dir,
        }


def default_temp_dir(workdir: str | Path) -> Path:
    """/tmp/chartrl-ray-<8 hex of the working directory>: one head per working directory, and a short path
    (Ray's AF_UNIX socket paths under it must stay within 107 characters)."""
    digest = hashlib.sha256(str(Path(workdir).resolve()).encode()).hexdigest()[:8]
    return Path("/tmp") / f"chartrl-ray-{digest}"


def private_folder(path: str | Path) -> Path:
    """``path``, created if needed, made mode 0700: the head's temp folder holds Ray's (which Ray opens to every
    user) and the token. A folder of another user is refused: its name is predictable (/tmp/chartrl-ray-<digest>),
    so another user could have made it first, and could read whatever the head puts there."""
    path = Path(path)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    owner = path.stat().st_uid
    if owner != os.getuid():
        raise HeadError(
            f"the local Ray head's temp folder {path} belongs to user {owner}, not to you (uid {os.getuid()}); "
            "remove it, or set ray.temp_dir (chartrl ray-head --temp-dir) to a folder of your own"
        )
    path.chmod(0o700)
    return path


def write_private(path: Path, text: str) -> None:
    """Write ``path`` readable by the user only (mode 0600, an existing file included)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def open_private_log(path: Path):
    """``path`` opened for appending, readable by the user only (mode 0600): a log may quote a job's environment."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "ab")


def ports_free(base: int, count: int = PORTS_PER_HEAD) -> bool:
    for port in range(base, base + count):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port in TIME_WAIT is free to a server
            try:
                sock.bind(("0.0.0.0", port))
            except OSError:
                return False
    return True


def free_port_block(start: int = 20000, stop: int = 60000, seed: str = "") -> int:
    """A block of PORTS_PER_HEAD free ports, probed from a point derived from ``seed`` (so two workflows in
    different folders rarely probe the same block first)."""
    span = (stop - start) // PORTS_PER_HEAD
    first = int(hashlib.sha256(seed.encode()).hexdigest(), 16) % span if seed else 0
    for k in range(span):
        base = start + ((first + k) % span) * PORTS_PER_HEAD
        if ports_free(base):
            return base
    raise HeadError(f"no block of {PORTS_PER_HEAD} free ports between {start} and {stop}; set ray.head_port")


def ray_executable(python: str) -> str:
    """The ``ray`` command of ``python``'s environment: the one installed beside it (``bin/ray``). Not one found
    on PATH: a head started by another environment's ``ray`` runs its workers in that environment's Python."""
    beside = Path(python).parent / "ray"
    if not beside.exists():
        raise HeadError(
            f"no `ray` command beside {python} (the local Ray head's Python, ray.python): install 'ray[default]' "
            "in that environment, or set ray.python to the Python of an environment that has it"
        )
    return str(beside)


PROBE = "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
"""Prints which of the modules named after it the interpreter cannot import (found, not imported: importing
vLLM takes seconds and initialises CUDA)."""


def python_problem(python: str, modules: tuple[str, ...]) -> str | None:
    """Why ``python`` cannot run a job that imports ``modules`` (it does not run, or some are missing), or None."""
    if not modules:
        return None
    try:
        probe = subprocess.run(
            [python, "-c", PROBE, *modules], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"the Python {python} does not run ({err})"
    if probe.returncode != 0:
        return f"the Python {python} does not run (exit {probe.returncode}: {probe.stderr.strip()[-300:]})"
    missing = probe.stdout.split()
    return f"the Python {python} cannot import {', '.join(missing)}" if missing else None


def head_command(state: HeadState, num_cpus: int | None, num_gpus: int | None) -> list[str]:
    base = state.base_port
    command = [ray_executable(state.python or sys.executable), "start", "--head", "--block"]
    command += ["--node-ip-address", "127.0.0.1"]
    command += ["--dashboard-host", "127.0.0.1", "--temp-dir", str(Path(state.temp_dir) / RAY_DIR)]
    for option, offset in PORT_OFFSETS.items():
        command += [f"--{option.replace('_', '-')}", str(base + offset)]
    command += ["--min-worker-port", str(base + WORKER_PORTS[0]), "--max-worker-port", str(base + WORKER_PORTS[1])]
    if num_cpus is not None:
        command += ["--num-cpus", str(num_cpus)]
    if num_gpus is not None:
        command += ["--num-gpus", str(num_gpus)]
    # Ray's log monitor stays on: it is what carries the prints of a job's actors and workers (verl's TaskRunner,
    # its FSDP and vLLM workers) to the job's driver (ray.init's log_to_driver), and so into the Ray job's log
    # that the launcher streams into the rule's log. Without it, only the driver's own output arrives.
    return command + ["--disable-usage-stats"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_state(temp_dir: str | Path) -> HeadState | None:
    path = Path(temp_dir) / STATE_FILE
    if not path.is_file():
        return None
    return HeadState(**json.loads(path.read_text()))


def _request(state: HeadState, method: str, path: str, timeout_s: float = 5.0):
    """One call to the head's job REST API (``/api/...``) with its token. Plain HTTP rather than Ray's client:
    Ray reads its authentication settings once per process, and this process may have imported Ray before."""
    import urllib.request

    token = Path(state.token_path).read_text().strip()
    request = urllib.request.Request(
        state.address + path,
        method=method,
        headers={"Authorization": f"Bearer {token}"},
        data=b"" if method == "POST" else None,
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return json.loads(response.read() or b"null")


def _api_ready(state: HeadState) -> bool:
    try:
        _request(state, "GET", "/api/jobs/")
        return True
    except OSError:  # connection refused, a 5xx while the dashboard starts (URLError and HTTPError are OSErrors)
        return False


def start_head(
    temp_dir: str | Path,
    *,
    base_port: int | None = None,
    num_cpus: int | None = None,
    num_gpus: int | None = None,
    python: str | None = None,
    timeout_s: float = 300.0,  # a head takes 10-20 s on an idle 2-core machine, over 90 s on a loaded one
) -> HeadState:
    """Start the head (or return the one already running from ``temp_dir``) and wait until its job API answers.
    ``python`` (default: this interpreter) is the environment it runs; a running head of another is refused."""
    python = python or sys.executable
    temp_dir = private_folder(Path(temp_dir).resolve())  # before its state file is trusted
    running = read_state(temp_dir)
    if running is not None and _alive(running.pid) and _api_ready(running):
        if running.python != python:
            raise HeadError(
                f"the local Ray head of this folder ({running.address}, temp folder {temp_dir}) runs the Python "
                f"{running.python}, and this run needs {python} (ray.python): wait for the runs using it to end, or "
                f"stop it (chartrl ray-head stop --temp-dir {temp_dir})"
            )
        log.info("local Ray head already running at %s (pid %d)", running.address, running.pid)
        return running
    base = base_port if base_port is not None else free_port_block(seed=str(temp_dir))
    if base_port is not None and not ports_free(base):
        raise HeadError(f"ports {base}-{base + PORTS_PER_HEAD - 1} (ray.head_port) are not all free; pick another")
    token = temp_dir / "auth_token"
    write_private(token, secrets.token_hex(32))
    address = f"http://127.0.0.1:{base + PORT_OFFSETS['dashboard_port']}"
    state = HeadState(0, str(temp_dir), base, address, str(token), python)
    env = {**os.environ, **state.client_env()}
    env.pop("RAY_ADDRESS")  # the head is not a client of itself
    # Its environment's commands first, as an activated environment has them (what verl's workers run by name).
    env["PATH"] = os.pathsep.join([str(Path(python).parent), env.get("PATH", "")])
    # A stopped job's driver gets SIGTERM and, Ray's default, 3 s before SIGKILL: too short on a loaded machine for
    # a job to unwind and end its MLflow run KILLED (chartrl.errors.Stopped).
    env.setdefault(STOP_WAIT_ENV, str(JOB_STOP_WAIT_S))
    # No drain: stop_head has stopped the jobs already, so there is nothing to drain, and a head stopped while
    # `ray start` was still starting (a run that fails at once) waited out the drain's whole 30 s (one stop in two).
    env.setdefault(DRAIN_ENV, "0")
    started = time.monotonic()
    with open_private_log(temp_dir / "head.log") as head_log:
        process = subprocess.Popen(
            head_command(state, num_cpus, num_gpus),
            env=env,
            stdout=head_log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    state = HeadState(process.pid, state.temp_dir, state.base_port, state.address, state.token_path, python)
    while not _api_ready(state):
        if process.poll() is not None or time.monotonic() - started > timeout_s:
            stop_head(state)
            tail = (temp_dir / "head.log").read_text(errors="replace")[-3000:]
            raise HeadError(f"the local Ray head did not come up in {timeout_s:.0f}s; its log ends:\n{tail}")
        time.sleep(0.25)
    (temp_dir / STATE_FILE).write_text(json.dumps(asdict(state)))
    log.info("local Ray head up at %s in %.1fs (pid %d, ports %d-%d)", state.address,
             time.monotonic() - started, state.pid, base, base + PORTS_PER_HEAD - 1)  # fmt: skip
    return state


def session_processes(session_id: int) -> list[int]:
    """Ids of the processes in session ``session_id`` (what ``ray start --block`` and its cluster run in)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == session_id and fields[0] != "Z":  # after "pid (comm)": state ppid pgrp session
            found.append(int(entry.name))  # (a zombie is dead already: it waits for whoever reaps it)
    return found


def stop_jobs(state: HeadState, timeout_s: float = 15.0) -> None:
    """Ask every job still running on this head to stop (their drivers run in sessions of their own)."""
    try:
        active = [j["submission_id"] for j in _request(state, "GET", "/api/jobs/") if j["status"] in ACTIVE]
        for sid in active:
            _request(state, "POST", f"/api/jobs/{sid}/stop")
        deadline = time.monotonic() + timeout_s
        while active and time.monotonic() < deadline:
            active = [sid for sid in active if _request(state, "GET", f"/api/jobs/{sid}")["status"] in ACTIVE]
            time.sleep(0.2)
    except OSError as err:  # the head may already be gone: stopping goes on
        log.warning("could not stop the jobs of %s: %s", state.address, err)


def stop_head(state: HeadState, timeout_s: float = 30.0) -> None:
    """Stop this head and only it: its running jobs, then SIGTERM to ``ray start --block`` (it shuts its cluster
    down), then SIGKILL to any process of its session still there."""
    if state.pid and _alive(state.pid):
        stop_jobs(state)
        os.kill(state.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while _alive(state.pid) and time.monotonic() < deadline:
            try:
                os.waitpid(state.pid, os.WNOHANG)
            except ChildProcessError:
                pass
            time.sleep(0.1)
    if state.pid:
        for pid in session_processes(state.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 5.0  # a SIGKILL is delivered asynchronously
        while session_processes(state.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            os.waitpid(state.pid, os.WNOHANG)
        except ChildProcessError:
            pass
    (Path(state.temp_dir) / STATE_FILE).unlink(missing_ok=True)
    log.info("local Ray head %s stopped", state.address)


# -------------------------------------------------------------------------------------------------------------
# Sharing the head between the workflow runs of one working folder
# -------------------------------------------------------------------------------------------------------------


@contextmanager
def head_lock(temp_dir: str | Path) -> Iterator[None]:
    """Serialise joining, leaving, starting and stopping the head of ``temp_dir`` between workflow runs."""
    temp_dir = private_folder(temp_dir)
    with open(temp_dir / LOCK_FILE, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def process_start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, /proc/<pid>/stat field 22), or None if it is
    gone: with the id, it names one process even after the id is reused."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19] if fields[0] != "Z" else None  # fields from the state (field 3): start time is field 22


def head_users(temp_dir: str | Path) -> list[int]:
    """The process ids of the workflow runs registered on the head of ``temp_dir`` that are still alive; entries
    of dead processes are removed."""
    users = []
    folder = Path(temp_dir) / USERS_DIR
    for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
        if entry.name.isdigit() and process_start_time(int(entry.name)) == entry.read_text().strip():
            users.append(int(entry.name))
        else:
            log.info("ignoring the stale head user %s (its process has ended)", entry.name)
            entry.unlink(missing_ok=True)
    return sorted(users)  # numerically: file names sort as text (12606 before 9532)


def join_head(
    temp_dir: str | Path,
    pid: int | None = None,
    *,
    base_port: int | None = None,
    num_cpus: int | None = None,
    num_gpus: int | None = None,
    python: str | None = None,
) -> HeadState:
    """Start the head of ``temp_dir`` or join the one running there, registering process ``pid`` (the workflow
    run, by default this process) as one of its users."""
    pid = os.getpid() if pid is None else pid
    with head_lock(temp_dir):
        state = start_head(temp_dir, base_port=base_port, num_cpus=num_cpus, num_gpus=num_gpus, python=python)
        folder = Path(state.temp_dir) / USERS_DIR
        folder.mkdir(exist_ok=True)
        (folder / str(pid)).write_text(process_start_time(pid) or "")
    return state


def leave_head(state: HeadState, pid: int | None = None) -> list[int]:
    """Unregister ``pid`` (by default this process) from the head; stop the head if no other live run uses it.
    Returns the process ids of the runs still using it (empty: the head was stopped)."""
    pid = os.getpid() if pid is None else pid
    with head_lock(state.temp_dir):
        (Path(state.temp_dir) / USERS_DIR / str(pid)).unlink(missing_ok=True)
        others = head_users(state.temp_dir)
        if others:
            log.info("local Ray head %s left running for the workflow runs %s", state.address, others)
            return others
        stop_head(state)
        return []
