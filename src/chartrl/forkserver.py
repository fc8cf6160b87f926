"""A preloaded interpreter for the workflow's jobs: each ``chartrl`` command a Snakemake rule runs is a new process,
and on the embedded default's tiny sizes its imports (torch, transformers with the Qwen2.5-VL modules, MLflow's
SQL store, pyarrow, openai: 6 to 8 s on a 2-core machine) cost as much as the work of many jobs. With
``CHARTRL_FORKSERVER=on`` in its environment (the workflow sets it for its local jobs unless it is already set, and
the launcher passes it to the jobs of the local Ray head), ``chartrl`` hands its command line to a server that
imported those libraries once and forks a process per job.

The forked job is the command as it would run on its own: the client's working folder, environment, umask,
standard input, output and error (passed as file descriptors, so redirections and log files are the job's), and its
exit status (``128 + N`` when killed by signal N, as a shell reports it). The job's Python code, chartrl's own
included, is imported fresh in the forked process; only the third-party libraries of :data:`PRELOAD` come from the
server. A server serves one environment: the variables (every one but those a shell sets per process; of the
thread counts Snakemake sets per job only which are set, as the job applies its own count), the interpreter, the
installed packages' folder and the few chartrl modules the server itself imported are hashed into its socket's
name, so a job with another environment gets another server.

What the client does for the job: it forwards SIGTERM, SIGINT, SIGHUP and SIGQUIT to the job's process and exits
with the job's status. A job never outlives its supervisors: when the client goes away (killed), the server sends
the job SIGTERM; when the server dies, however it dies, the kernel sends the job SIGTERM (``PR_SET_PDEATHSIG``)
and the client exits with status 1 once the job has ended, not before, so nothing the job writes comes after
Snakemake has seen the job fail. Either way the job ends as a stopped job does.

Where no server answers, the client starts one in the background and runs its own command in its own process, as
it would without the server. A server exits when it has had no job for :data:`IDLE_S` seconds and the client that
started it has ended: that client's own job counts as one of its jobs, so a server started beside a job longer
than :data:`IDLE_S` (a training run's) is still there for the jobs that follow.

Off: ``CHARTRL_FORKSERVER=off`` (or unset, outside the workflow). One difference to know: Snakemake's benchmark
files measure the job's process tree, and a forked job is the server's child, not the client's: their ``s`` column
(wall time) is the job's, their memory and CPU columns are the client's only.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import stat
import struct
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ENV = "CHARTRL_FORKSERVER"
"""``on``: ``chartrl`` commands run through a forkserver; anything else (``off``, unset): in their own process."""
DIR_ENV = "CHARTRL_FORKSERVER_DIR"
"""Where the servers' sockets and logs live (default: ``chartrl-forkserver-<uid>`` in the temp folder)."""
STARTER_ENV = "CHARTRL_FORKSERVER_STARTER"
"""Set by :func:`_start_server` for the server only: the pid of the client that started it."""
IDLE_S = 120.0
"""A server with no job running, none started for this long and its starting client gone exits."""
PRELOAD = (
    "numpy",
    "PIL.Image",
    "pyarrow.parquet",
    "jsonschema",
    "yaml",
    "jinja2",
    "torch",
    "transformers",
    "transformers.models.qwen2_5_vl.modeling_qwen2_5_vl",
    "transformers.models.qwen2_5_vl.processing_qwen2_5_vl",
    "mlflow",
    "mlflow.tracking",
    "mlflow.store.tracking.sqlalchemy_store",
    "openai",
)
"""Third-party modules the server imports before it forks: what the jobs' start-up spends its time on. Nothing of
verl: importing it patches libraries, which a local-backend job must not inherit."""
THREAD_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "GOTO_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
"""The thread counts Snakemake gives each job from its rule's ``threads``. A server's key holds which of them are
set, not their values: the server imports its libraries with each set one at 1, and a forked job that asks for
more applies its own (:func:`_apply_thread_vars`), so the jobs of rules with different threads share one server."""
VOLATILE = frozenset({"_", "PWD", "OLDPWD", "SHLVL", "RAY_JOB_CONFIG_JSON_ENV_VAR"})
"""Variables set per process, not part of a server's environment key: those a shell sets, and the one Ray gives
each job's driver (its submission id and runtime env, which ``ray.init`` in the job reads: the job gets its own,
as it gets every variable of its client). All the Ray jobs of a local head otherwise share one environment."""
MAX_SOCKET_PATH = 107
"""The longest Unix socket path Linux takes (108 bytes with the terminating zero)."""
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
PR_SET_PDEATHSIG = 1
"""``prctl`` option (linux/prctl.h): the signal a process gets when its parent dies."""
JOB_END_S = 30.0
"""How long a client whose server died waits for its job to end on the SIGTERM it got, before killing it."""

_serving = False
"""True in a server and in the jobs it forks: their ``chartrl`` runs its command itself."""


class _NotServed(Exception):
    """The server closed the connection before it started the job: the client runs the command itself."""


def enabled() -> bool:
    return not _serving and os.environ.get(ENV, "").strip().lower() == "on"


def socket_dir() -> Path:
    import tempfile

    folder = Path(os.environ.get(DIR_ENV) or Path(tempfile.gettempdir()) / f"chartrl-forkserver-{os.getuid()}")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.stat()
    if info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise PermissionError(f"{folder} is not a folder only this user can write to; set {DIR_ENV} to one")
    return folder


def environment_key(env: dict[str, str] | None = None, volatile: frozenset[str] = VOLATILE) -> str:
    """What a server's jobs share: the environment (every variable but ``volatile``), the interpreter, the
    installed packages' folder (its modification time changes with every install or removal) and the chartrl
    modules imported so far (the client's: the same the server imports before its preloads)."""
    env = dict(os.environ) if env is None else env
    digest = hashlib.sha256()
    shared = {k: "set" if k in THREAD_VARS else v for k, v in env.items() if k not in volatile}
    digest.update(json.dumps(sorted(shared.items())).encode())
    digest.update(f"{sys.executable}\0{sys.version}".encode())
    purelib = Path(sysconfig.get_paths()["purelib"])
    digest.update(f"{purelib}\0{purelib.stat().st_mtime_ns}".encode())
    for name in sorted(n for n in sys.modules if n == "chartrl" or n.startswith("chartrl.")):
        path = getattr(sys.modules[name], "__file__", None)
        if path:
            info = os.stat(path)
            digest.update(f"{path}\0{info.st_mtime_ns}\0{info.st_size}".encode())
    return digest.hexdigest()[:24]


def socket_path(name: str = "", volatile: frozenset[str] = VOLATILE) -> Path:
    """This environment's socket; ``name`` prefixes it, for a server of other jobs than ``chartrl``'s."""
    path = socket_dir() / f"{name}{environment_key(volatile=volatile)}.sock"
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise OSError(f"the socket path {path} is longer than a Unix socket allows; set {DIR_ENV} to a shorter folder")
    return path


# ---------------------------------------------------------------------------------------------------- client


def delegate(
    argv: Sequence[str], server_command: Sequence[str], name: str = "", volatile: frozenset[str] = VOLATILE
) -> int | None:
    """Run ``chartrl argv`` through this environment's server (``name``, ``volatile``: another server's socket, as
    :func:`socket_path`): its exit status, or None when the caller should run the command itself (the forkserver is
    off, or no server answered; then one is started for the next jobs)."""
    if not enabled():
        return None
    try:
        path = socket_path(name, volatile)
    except OSError as err:
        print(f"chartrl: forkserver off for this job: {err}", file=sys.stderr)
        return None
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect(str(path))
    except (FileNotFoundError, ConnectionRefusedError):
        client.close()
        try:
            _start_server(path, server_command)
        except OSError as err:
            print(f"chartrl: no forkserver started: {err}", file=sys.stderr)
        return None
    except OSError:
        client.close()
        return None
    try:
        return _run_remote(client, list(argv))
    except _NotServed:
        return None
    finally:
        client.close()


def _start_server(path: Path, server_command: Sequence[str]) -> None:
    """Start a server for ``path`` in the background (its own session, output to a log beside the socket, readable
    by the user only: the server holds its jobs' environments, secrets included)."""
    fd = os.open(path.with_suffix(".log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "ab") as out:
        subprocess.Popen(
            [*server_command, str(path)],
            env={**os.environ, STARTER_ENV: str(os.getpid())},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd="/",
            start_new_session=True,
            close_fds=True,
        )


def _run_remote(client: socket.socket, argv: list[str]) -> int:
    umask = os.umask(0)
    os.umask(umask)
    header = json.dumps(
        {"argv": argv, "argv0": sys.argv[0], "cwd": os.getcwd(), "env": dict(os.environ), "umask": umask}
    ).encode()
    try:
        socket.send_fds(client, [struct.pack("!I", len(header))], [0, 1, 2])
        client.sendall(header)
    except OSError as err:
        raise _NotServed from err
    replies = client.makefile("rb")
    first = _reply(replies)
    if first is None:
        raise _NotServed
    pid = first["pid"]
    started = _start_time(pid)

    def forward(signum, _frame):
        _signal(pid, signum)

    for signum in FORWARDED:
        signal.signal(signum, forward)
    last = _reply(replies)
    if last is None:  # the server died: its job got SIGTERM as it did (``_die_with_parent``); end after the job
        ended = _wait_ended(pid, started, JOB_END_S)
        print(
            f"chartrl: error: the forkserver ended while it ran this job (pid {pid}); the job "
            + ("ended with it" if ended else f"did not end within {JOB_END_S:g} s of SIGTERM and was killed"),
            file=sys.stderr,
        )
        return 1
    if last.get("signal"):  # end as the job ended: killed by the same signal
        if last["signal"] not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(last["signal"], signal.SIG_DFL)
        os.kill(os.getpid(), last["signal"])
    return int(last["status"])


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat``, field 22), which tells it from a
    later process given the same pid; None when it has ended (or has been reaped)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else int(fields[19])  # fields after the name: state is 3rd, starttime 22nd


def _wait_ended(pid: int, started: int | None, seconds: float) -> bool:
    """Wait until process ``pid`` (started at ``started``) has ended; past ``seconds``, kill it with SIGKILL.
    True when it ended by itself. The client returns only after its job has ended, so that nothing the job writes
    comes after the job's failure is reported (Snakemake reruns it at once, into the same folder)."""
    deadline = time.monotonic() + seconds
    while started is not None and _start_time(pid) == started:
        if time.monotonic() >= deadline:
            _signal(pid, signal.SIGKILL)
            while _start_time(pid) == started:
                time.sleep(0.01)
            return False
        time.sleep(0.01)
    return True


def _reply(replies) -> dict | None:
    try:
        line = replies.readline()
    except OSError:
        return None
    return json.loads(line) if line.endswith(b"\n") else None


# ---------------------------------------------------------------------------------------------------- server


def serve(path: Path, job: Callable[[list[str]], int], idle_s: float = IDLE_S, preload: Sequence[str] = PRELOAD) -> int:
    """Serve the jobs of one environment on the socket ``path`` until idle for ``idle_s`` seconds, ``preload``
    imported first. The client of :func:`delegate` that started the server (named in ``STARTER_ENV``; it runs its
    own command meanwhile) keeps it from idling while it is still the server's parent: once it has ended, even
    before the server was ready, the server is reparented and idles out as usual. Returns 0 (in a forked job this
    never returns: the job's process exits with the job's status)."""
    global _serving
    import gc
    import importlib
    import selectors

    _serving = True
    listener = _bind(Path(path))
    if listener is None:
        return 0  # another server holds it
    inode = os.stat(path).st_ino
    server_pid = os.getpid()
    starter = int(os.environ.pop(STARTER_ENV, "0") or 0)  # while it runs, its own job is one of this environment's
    for name in THREAD_VARS:  # the libraries start on one thread; a job that asks for more applies its own
        if name in os.environ:
            os.environ[name] = "1"
    started = time.monotonic()
    for name in preload:
        try:
            importlib.import_module(name)
        except Exception as err:  # noqa: BLE001 (a missing optional library: its jobs import it themselves)
            print(f"forkserver: not preloaded: {name}: {err}", flush=True)
    gc.freeze()  # the preloaded objects are never collected: a job's collections leave their pages shared
    print(f"forkserver {server_pid}: {path} ready in {time.monotonic() - started:.1f} s", flush=True)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    children: dict[int, socket.socket] = {}
    last_active = time.monotonic()
    stopping: list[int] = []

    def on_stop(signum, _frame):  # stop the running jobs, report their statuses, then exit
        if os.getpid() != server_pid:  # a job between its fork and its own handlers
            os._exit(128 + signum)
        stopping.append(signum)
        for pid in children:
            _signal(pid, signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_stop)
    try:
        while children or (not stopping and time.monotonic() - last_active < idle_s):
            for key, _ in selector.select(timeout=0.2):
                if key.fileobj is listener:
                    conn, _ = listener.accept()
                    if stopping:
                        conn.close()  # the client runs its command itself
                        continue
                    pid = _fork_job(conn, job, [listener, selector, *children.values()])
                    if pid:
                        children[pid] = conn
                        selector.register(conn, selectors.EVENT_READ, pid)
                    else:
                        conn.close()
                elif not _peek(key.fileobj):  # the client went away: stop its job as Snakemake would
                    selector.unregister(key.fileobj)
                    _signal(key.data, signal.SIGTERM)
            _reap(children, selector)
            if children or (starter and os.getppid() == starter):
                last_active = time.monotonic()
    finally:
        if os.getpid() == server_pid:
            _unbind(listener, Path(path), inode)
            reason = f"signal {stopping[0]}" if stopping else "idle"
            print(f"forkserver {server_pid}: {reason}, exiting", flush=True)
    return 0


def _bind(path: Path) -> socket.socket | None:
    """Listen on ``path``: None when a live server already does (a socket file nobody answers is removed)."""
    import fcntl

    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(str(path))
                return None
            except OSError:
                path.unlink(missing_ok=True)
            finally:
                probe.close()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        listener.listen(64)
        return listener


def _unbind(listener: socket.socket, path: Path, inode: int) -> None:
    """Stop listening; remove the socket file if it is still this server's (``inode``: its file's, when bound)."""
    listener.close()
    try:
        if os.stat(path).st_ino == inode:
            path.unlink()
    except OSError:
        pass


def _peek(conn: socket.socket) -> bool:
    """False when the client closed its end (EOF)."""
    try:
        return bool(conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except BlockingIOError:
        return True
    except OSError:
        return False


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _reap(children: dict[int, socket.socket], selector) -> None:
    """Send each ended job's exit status to its client and close the connection."""
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is None:
            continue
        code = os.waitstatus_to_exitcode(status)
        reply = {"status": 128 - code, "signal": -code} if code < 0 else {"status": code}  # killed by signal N
        try:
            conn.sendall(json.dumps(reply).encode() + b"\n")
        except OSError:
            pass
        try:
            selector.unregister(conn)
        except (KeyError, ValueError):
            pass
        conn.close()


def _fork_job(conn: socket.socket, job: Callable[[list[str]], int], inherited: list) -> int | None:
    """Receive a job (header and the client's standard descriptors) and fork its process; the pid, or None when the
    client sent no complete job."""
    conn.settimeout(10)
    try:
        message, fds, _, _ = socket.recv_fds(conn, 4, 3)
        if len(message) != 4 or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            return None
        size = struct.unpack("!I", message)[0]
        body = b""
        while len(body) < size:
            chunk = conn.recv(size - len(body))
            if not chunk:
                raise OSError("the client closed the connection mid-header")
            body += chunk
        request = json.loads(body)
    except (OSError, ValueError) as err:
        print(f"forkserver: a client sent no complete job: {err}", flush=True)
        return None
    finally:
        conn.settimeout(None)
    sys.stdout.flush()
    sys.stderr.flush()
    server_pid = os.getpid()
    pid = os.fork()
    if pid:
        print(f"job {pid} in {request['cwd']}: chartrl {' '.join(request['argv'][:1])}", flush=True)
        for fd in fds:
            os.close(fd)
        try:
            conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        except OSError:
            _signal(pid, signal.SIGTERM)
        return pid
    _die_with_parent(server_pid)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a process's own handlers, not the server's
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)
    for held in inherited:  # the job holds none of the server's sockets (a client waits for the server's end alone)
        held.close()
    conn.close()
    _exit(_run_job(request, fds, job))


def _die_with_parent(server_pid: int) -> None:
    """In a forked job: receive SIGTERM when the server dies (Linux's ``PR_SET_PDEATHSIG``, kept across ``exec``),
    so that a job never outlives the server that forked it, however the server ends (SIGKILL, the OOM killer, a
    cgroup or a Slurm step torn down); it then ends as a stopped job does. A server already gone by now: end."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed: a job could outlive its server")
    if os.getppid() != server_pid:  # the server died between the fork and the prctl
        os._exit(128 + signal.SIGTERM)


def _run_job(request: dict, fds: list[int], job: Callable[[list[str]], int]) -> int:
    """In the forked process: become the client's command, run it, return its exit status."""
    import io
    import traceback

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    unbuffered = bool(request["env"].get("PYTHONUNBUFFERED"))  # as `python -u` (Ray sets it for its jobs)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), line_buffering=os.isatty(1), write_through=unbuffered
    )
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), errors="backslashreplace", line_buffering=True, write_through=unbuffered
    )
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    os.environ.clear()
    os.environ.update(request["env"])
    _apply_thread_vars(os.environ)
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    sys.argv = [request["argv0"], *request["argv"]]
    if "numpy" in sys.modules:  # a process of its own would draw its global seed afresh (random does on fork)
        sys.modules["numpy"].random.seed()
    try:
        return int(job(list(request["argv"])) or 0)
    except SystemExit as done:
        code = done.code
        if code is None or isinstance(code, int):
            return int(code or 0)
        print(code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        traceback.print_exc()
        return 128 + signal.SIGINT
    except BaseException:  # noqa: BLE001 (what Python prints for an uncaught exception, and its status 1)
        traceback.print_exc()
        return 1


def _positive(env, *names: str) -> int | None:
    """The first of ``names`` set to a positive whole number, as the libraries read them."""
    for name in names:
        value = env.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return None


def _apply_thread_vars(env) -> None:
    """In a forked job: the thread counts of :data:`THREAD_VARS` that the preloaded libraries read when they were
    loaded (OpenMP, which torch's intra-op threads follow, and OpenBLAS), as a process of the job's own would have
    them. The server loaded them at 1 thread wherever a variable was set (the jobs of one server set the same
    variables), so only a count above 1 is applied; libraries the server did not load read the variables
    themselves when the job loads them."""
    omp = _positive(env, "OMP_NUM_THREADS")
    blas = _positive(env, "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
    limits = {api: n for api, n in (("openmp", omp), ("blas", blas)) if n is not None and n > 1}
    if not limits:
        return
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=limits)
    if "openmp" in limits and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(limits["openmp"])


def _exit(code: int) -> None:
    """End the forked job as the interpreter ends a process, up to its module teardown: wait for its non-daemon
    threads, run the exit handlers (logging's flush among them), flush the standard streams. The teardown is left
    out: in a fork of the preloaded server it takes about 3 s (every object it frees is a copy-on-write page); a
    plain process that imported the same libraries spends about 2 s in it."""
    import atexit
    import threading

    try:
        for thread in threading.enumerate():
            if thread is not threading.main_thread() and not thread.daemon:
                thread.join()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 (a failing exit handler: reported as Python reports it)
        import traceback

        traceback.print_exc()
        code = code or 1
    os._exit(code)
