"""How a train or generate job runs, for either backend: one registry of launchers, chosen by ``launcher:``.

- ``inline``: the command replaces the launcher's own process (``exec``): the job runs in the rule's process,
  with the rule's environment less RAY_ADDRESS (a verl job starts its own Ray on its node); for a Slurm job, for
  debugging and for tests that do not exercise Ray.
- ``ray``: the command is submitted as a Ray job to the cluster at ``RAY_ADDRESS`` (or ``ray.address``; the
  workflow sets ``RAY_ADDRESS`` to the local head it starts when neither is given), so Ray places concurrent jobs
  on the CPUs and GPUs they reserve. The launcher streams the job's log, and its exit code mirrors the job's
  status (0 succeeded; the driver's exit code, or 1, failed; 143 stopped on SIGTERM, 130 on SIGINT).

A Ray job's submission id is derived from what it runs (``chartrl-{kind}-{name}-{digest}``): submitting the same
job while it runs attaches to it instead of starting a twin; once it has ended, a resubmission gets the next free
id (``...-2``), since Ray never reuses one. ``ray job submit`` forwards no environment, so the launcher passes the
variables named in ``ray.forward_env`` in the job's runtime environment, and the judge's key variables to the jobs
whose reward asks a judge (:func:`judge_key_names`); their values are read at submission and never written to a
file or a log (only the names are logged). A SIGTERM from Snakemake
(or Ctrl-C) stops the Ray job, which otherwise would outlive its client.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import shlex
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from chartrl import forkserver
from chartrl.config import Config, config_check
from chartrl.errors import ChartrlError
from chartrl.ray_head import ACTIVE, LOCAL_HEAD_ENV, python_problem, read_state

log = logging.getLogger(__name__)


class LaunchError(ChartrlError):
    """A job could not be submitted or followed (no cluster, a refused submission); the message says what to do."""


@dataclass(frozen=True)
class Job:
    """One command to run, and what Ray should reserve for it."""

    command: tuple[str, ...]
    submission_id: str
    """Derived from the job's identity and config (:func:`submission_id`)."""
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    env_names: tuple[str, ...] = ()
    """Environment variables to pass to the job when they are set here (values read at submission)."""
    secret_names: tuple[str, ...] = ()
    """Variables holding secrets (the judge's keys): passed like ``env_names``, but only where they must travel
    (:meth:`RayJobLauncher.runtime_env`), and never logged."""
    cwd: Path = field(default_factory=Path.cwd)
    metadata: Mapping[str, str] = field(default_factory=dict)
    python: str | None = None
    """The interpreter a Ray job's ``chartrl`` runs in (the local head's, or ``ray.python``); None: the ``chartrl``
    on the cluster's PATH."""

    def entrypoint(self) -> str:
        """The shell line a Ray job runs: in the submitting working directory (the results live there; on a
        multi-node cluster it must be a shared filesystem), the command exec'ed so Ray's stop signal reaches it.
        A ``chartrl`` command runs as ``<python> -m chartrl``: a bare ``chartrl`` is whichever the head's PATH
        finds first, which need not be the environment the head's workers run."""
        command = self.command
        if self.python and command[0] == "chartrl":
            command = (self.python, "-m", "chartrl", *command[1:])
        return f"cd {shlex.quote(str(self.cwd))} && exec {shlex.join(command)}"

    @property
    def modules(self) -> tuple[str, ...]:
        """What the job's Python must be able to import: vLLM for a verl job (``chartrl verl ...``), which builds
        its rollout replicas with it."""
        return VERL_MODULES if self.command[:2] == ("chartrl", "verl") else ()


VERL_MODULES = ("vllm",)


def submission_id(kind: str, name: str, config_text: str) -> str:
    """``chartrl-{kind}-{name}-{12 hex of the config's digest}``: the same job config gives the same id."""
    digest = hashlib.sha256(config_text.encode()).hexdigest()[:12]
    return f"chartrl-{kind}-{name}-{digest}"


class InlineLauncher:
    name = "inline"

    def run(self, job: Job, out: TextIO = sys.stdout) -> int:
        """Replace this process with the command (never returns), without the variables that point a Ray client
        at a cluster (:func:`inline_environment`)."""
        out.flush()
        os.chdir(job.cwd)
        os.execvpe(job.command[0], list(job.command), inline_environment(os.environ))
        raise AssertionError("unreachable: execvpe returns only by raising")


LOCAL_HEAD_CLIENT_ENV = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH")
"""What the workflow sets besides RAY_ADDRESS for the clients of its local head (``ray_head.HeadState``)."""
SIGNAL_EXIT = {signal.SIGTERM: 143, signal.SIGINT: 130}
NO_AGENT = "No available agent to submit job"
"""Ray's job API answers a submission with this (status 500, "please try again later") when the head's job agent
did not answer within its 10 s: a head just started, or busy on a loaded machine. Nothing was submitted."""
SUBMIT_TRIES, SUBMIT_PAUSE_S = 5, 5.0
"""How often a submission that met :data:`NO_AGENT` is tried, and the pause before each new try."""


def inline_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of an inline job: ``environ`` without RAY_ADDRESS (and the local head's token settings when
    they come from it). An inline verl job starts its own Ray on its node (verl's ``ray.init()``), but
    ``ray.init()`` joins the cluster RAY_ADDRESS names when it is set, and a Slurm job gets the submitting shell's
    whole environment (the Slurm plugin submits with ``--export=ALL``): a RAY_ADDRESS left in that shell would send
    the job's workers to another cluster, or hang it."""
    dropped = {"RAY_ADDRESS", LOCAL_HEAD_ENV}
    if environ.get(LOCAL_HEAD_ENV):
        dropped.update(LOCAL_HEAD_CLIENT_ENV)
    present = sorted(name for name in dropped if name in environ)
    if present:
        log.info("inline job: not passing %s (the job starts its own Ray, if any)", ", ".join(present))
    return {name: value for name, value in environ.items() if name not in dropped}


GCS_PORT, CLIENT_PORT, JOB_API_PORT = 6379, 10001, 8265
"""Ray's default ports: the GCS (``ray start --address``), the Ray client (``ray://``), the dashboard's job API."""


def ray_address_problem(address: str, source: str) -> str | None:
    """Why ``address`` (from ``source``: ``RAY_ADDRESS`` or ``ray.address``) cannot take a ``ray job submit``, or
    None. Ray users write three kinds of address; only the dashboard's job API (``http(s)://host:8265``) serves the
    job submission client, and the other two fail late and obscurely: a GCS address (``host:6379``) is read by Ray
    as ``http://host:6379`` and the request hangs or is refused; a Ray client address (``ray://host:10001``) is
    rejected by Ray with an internal error."""
    text = address.strip()
    scheme, has_scheme, rest = text.partition("://")
    if not has_scheme:
        scheme, rest = "", text
    host, _, port_text = rest.split("/", 1)[0].partition(":")
    port = int(port_text) if port_text.isdigit() else None
    use = f"`ray job submit` needs the dashboard's job API, usually http://{host or 'head-node'}:{JOB_API_PORT}"
    where = f"{source} {address!r}"
    if scheme == "ray":
        return f"{where} is a Ray client address (ray://); {use}"
    if scheme not in ("", "http", "https"):
        return f"{where} has the scheme {scheme}://, which Ray's job API does not speak; {use}"
    if text in ("auto", "local"):
        return (
            f"{where} asks ray.init to find or start a cluster, which a job submission cannot do; {use}, or unset "
            "RAY_ADDRESS and ray.address so that the workflow starts a local head"
        )
    if port == GCS_PORT:
        return f"{where} is the GCS port (what `ray start --address` joins); {use}"
    if port == CLIENT_PORT:
        return f"{where} is the Ray client port; {use}"
    if not scheme and port is None:
        return f"{where} names no port; {use}"
    return None


@config_check("ray.address")
def config_address_problems(config: Config) -> list[str]:
    """A configured ``ray.address`` must be a job API address (checked again at launch, where RAY_ADDRESS wins)."""
    if config.ray.address is None:
        return []
    problem = ray_address_problem(config.ray.address, "config key 'ray.address': value")
    return [problem] if problem else []


def job_api_address(address: str, source: str) -> str:
    """``address`` as the job submission client takes it (``host:port`` becomes ``http://host:port``, as Ray
    itself reads it), or a :class:`LaunchError` saying which address to use."""
    problem = ray_address_problem(address, source)
    if problem:
        raise LaunchError(problem)
    text = address.strip()
    return text if "://" in text else f"http://{text}"


def ray_address(configured: str | None = None, environ: Mapping[str, str] = os.environ) -> str:
    """The cluster's job API: ``RAY_ADDRESS`` wins over ``ray.address``."""
    if environ.get("RAY_ADDRESS"):
        return job_api_address(environ["RAY_ADDRESS"], "RAY_ADDRESS")
    if configured:
        return job_api_address(configured, "ray.address")
    raise LaunchError(
        "launcher: ray needs a Ray cluster: set RAY_ADDRESS (e.g. http://head-node:8265) or ray.address, or run "
        "through Snakemake, which starts a local head for the run; or use launcher: inline"
    )


class RayJobLauncher:
    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        stop_timeout_s: float = 60.0,
        poll_s: float = 0.5,
        environ: Mapping[str, str] | None = None,
        python: str | None = None,
    ):
        self.environ = os.environ if environ is None else environ
        self.address = ray_address(address, self.environ)
        self.stop_timeout_s, self.poll_s = stop_timeout_s, poll_s
        self.python = python
        """The jobs' interpreter on a cluster named by address (``ray.python``); a local head's own wins."""
        self._stop_signal: int | None = None

    @property
    def local_head(self) -> bool:
        """Whether the cluster is the local head the workflow started (``chartrl.ray_head`` marks it)."""
        return bool(self.environ.get(LOCAL_HEAD_ENV)) and self.environ.get("RAY_ADDRESS") == self.address

    def client(self):
        from ray.job_submission import JobSubmissionClient

        try:
            return JobSubmissionClient(self.address)
        except Exception as err:  # noqa: BLE001 (ConnectionError, RuntimeError, auth errors: all mean "no cluster")
            raise LaunchError(
                f"cannot reach the Ray job API at {self.address}: {err}. Is the cluster up (RAY_ADDRESS, ray.address)?"
            ) from err

    def runtime_env(self, job: Job) -> dict[str, str]:
        """The variables the job gets. Secrets (the judge's keys) travel only to a cluster that is not the local
        head: the local head was started from the workflow's environment, so its jobs inherit them, and Ray 2.60
        logs every runtime env it sets up, values included (``runtime_env_agent.log``). The forkserver's variables
        travel to the local head's jobs (its own: they run on this machine), so that their ``chartrl`` forks a
        preloaded interpreter as the workflow's other jobs do (the head started before the workflow set them)."""
        env = {name: self.environ[name] for name in job.env_names if name in self.environ}
        if self.local_head:
            env |= {name: self.environ[name] for name in (forkserver.ENV, forkserver.DIR_ENV) if name in self.environ}
        secrets = [name for name in job.secret_names if name in self.environ]
        if secrets and not self.local_head:
            log.warning(
                "passing %s to the Ray job in its runtime env, as the job needs it; Ray writes runtime envs into "
                "the cluster's runtime_env_agent.log, so prefer setting it in the cluster's own environment",
                ", ".join(secrets),
            )
            env.update({name: self.environ[name] for name in secrets})
        return env

    def job_python(self) -> str | None:
        """The interpreter the job's driver runs: the local head's own (recorded when it started: its workers run
        it too), else the one given for the cluster (``ray.python``), else None."""
        if self.local_head:
            state = read_state(self.environ[LOCAL_HEAD_ENV])
            if state is not None and state.python:
                return state.python
        return self.python

    def checked(self, job: Job) -> Job:
        """``job`` with its interpreter; refused when, on the local head, that interpreter cannot import what the
        job needs (vLLM for verl): the job would die minutes in, building its vLLM replicas."""
        from dataclasses import replace

        job = replace(job, python=self.job_python())
        if self.local_head and job.modules:
            problem = python_problem(job.python or sys.executable, job.modules)
            if problem:
                raise LaunchError(
                    f"{problem}, and the local Ray head runs its jobs there ({' '.join(job.command[:3])} needs "
                    f"{', '.join(job.modules)}). Set ray.python to the Python of the GPU environment (envs/gpu.yaml) "
                    "and restart the run, or run Snakemake with --sdm conda, whose environment the head then uses"
                )
        return job

    # ---------------------------------------------------------------------------------------------------------

    def run(self, job: Job, out: TextIO = sys.stdout) -> int:
        job = self.checked(job)
        client = self.client()
        sid = self.submit_with_retries(client, job)

        def on_signal(signum, _frame):
            if self._stop_signal is None:
                self._stop_signal = signum
                log.warning("signal %d: stopping Ray job %s", signum, sid)
                self._stop(client, sid)

        previous = {sig: signal.signal(sig, on_signal) for sig in SIGNAL_EXIT}
        try:
            asyncio.run(self._follow(client, sid, out))
            status = self._wait_terminal(client, sid)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return self.exit_code(client, sid, status)

    def submit_with_retries(self, client, job: Job, pause_s: float = SUBMIT_PAUSE_S) -> str:
        """:meth:`submit_or_attach`, tried again while Ray answers that no job agent is available (:data:`NO_AGENT`);
        each try first looks for the job, so a submission that went through after all is attached to, not doubled."""
        attempt = 1
        while True:
            try:
                return self.submit_or_attach(client, job)
            except RuntimeError as err:
                if NO_AGENT not in str(err) or attempt >= SUBMIT_TRIES:
                    raise
            attempt += 1
            log.warning(
                "%s: Ray's job API has no job agent ready on %s; trying again in %g s (try %d of %d)",
                job.submission_id,
                self.address,
                pause_s,
                attempt,
                SUBMIT_TRIES,
            )
            time.sleep(pause_s)

    def submit_or_attach(self, client, job: Job) -> str:
        ours = {j.submission_id: _status(j.status) for j in self._jobs(client, job)}
        running = sorted(sid for sid, status in ours.items() if status in ACTIVE)
        if running:
            log.info("job %s is already %s on %s: attaching to it", running[0], ours[running[0]], self.address)
            return running[0]
        sid, attempt = job.submission_id, 1
        while sid in ours:
            attempt += 1
            sid = f"{job.submission_id}-{attempt}"
        env = self.runtime_env(job)
        log.info(
            "submitting %s to %s (%g CPUs, %g GPUs; environment passed: %s)",
            sid,
            self.address,
            job.num_cpus,
            job.num_gpus,
            ", ".join(sorted(env)) or "none",
        )
        return client.submit_job(
            entrypoint=job.entrypoint(),
            submission_id=sid,
            runtime_env={"env_vars": env} if env else None,
            entrypoint_num_cpus=job.num_cpus,
            entrypoint_num_gpus=job.num_gpus,
            metadata={"chartrl": "1", **dict(job.metadata)},
        )

    @staticmethod
    def _jobs(client, job: Job) -> list:
        base = job.submission_id
        return [
            j
            for j in client.list_jobs()
            if j.submission_id and (j.submission_id == base or j.submission_id.startswith(base + "-"))
        ]

    def _stop(self, client, sid: str) -> None:
        try:
            client.stop_job(sid)
        except Exception as err:  # noqa: BLE001 (the job may have ended meanwhile: reported, not fatal)
            log.warning("stopping %s: %s", sid, err)

    async def _follow(self, client, sid: str, out: TextIO) -> None:
        """Stream the job's log while it runs; once it has ended, print the rest of its log at once. (Ray's log
        stream lags the job by several seconds, which would be each job's overhead if we waited for it.)"""
        printed = 0

        async def tail() -> None:
            nonlocal printed
            async for chunk in client.tail_job_logs(sid):
                out.write(chunk)
                out.flush()
                printed += len(chunk)

        task = asyncio.create_task(tail())
        while _status(await asyncio.to_thread(client.get_job_status, sid)) in ACTIVE:
            await asyncio.wait({task}, timeout=self.poll_s)
        task.cancel()
        if not task.cancelled() and task.done() and task.exception() is not None:
            log.warning("the log stream of %s broke (%s)", sid, task.exception())
        rest = (await asyncio.to_thread(client.get_job_logs, sid))[printed:]
        out.write(rest)
        out.flush()

    def _wait_terminal(self, client, sid: str) -> str:
        deadline = None
        while True:
            status = _status(client.get_job_status(sid))
            if status not in ACTIVE:
                return status
            if self._stop_signal is not None:
                deadline = deadline or time.monotonic() + self.stop_timeout_s
                if time.monotonic() > deadline:
                    log.error("job %s still %s %gs after it was asked to stop", sid, status, self.stop_timeout_s)
                    return status
            time.sleep(self.poll_s)

    def exit_code(self, client, sid: str, status: str) -> int:
        if self._stop_signal is not None:
            return SIGNAL_EXIT[self._stop_signal]
        if status == "SUCCEEDED":
            return 0
        info = client.get_job_info(sid)
        code = getattr(info, "driver_exit_code", None)
        reason = (info.message or "").splitlines()[0] if info.message else ""
        log.error("job %s ended %s (driver exit code %s): %s", sid, status, code, reason)
        return int(code) if code not in (None, 0) else 1


def _status(status: Any) -> str:
    return str(getattr(status, "value", status))


LAUNCHERS: dict[str, type] = {"inline": InlineLauncher, "ray": RayJobLauncher}


def get_launcher(name: str, **options: Any):
    if name not in LAUNCHERS:
        raise LaunchError(f"unknown launcher {name!r}; launchers: {', '.join(sorted(LAUNCHERS))}")
    return LAUNCHERS[name](**options) if name == "ray" else LAUNCHERS[name]()


def judge_key_names(judge: Mapping[str, Any], accuracy: str) -> list[str]:
    """The environment variables (names) holding the keys a job needs whose answers are graded by ``accuracy``
    (``chartrl.rewards.accuracy_signal``): ``judge``, the judge's key when it is an OpenAI-compatible endpoint;
    ``panel``, those of the panel's OpenAI-compatible members (a member inherits the keys it does not set, as the
    panel builds it); ``rule`` or ``own``, none. A job that grades by rule never holds a judge's key, so Ray never
    records one in its runtime env (``runtime_env_agent.log``, the job API)."""
    if accuracy == "judge":
        graders = [judge]
    elif accuracy == "panel":
        graders = [{**judge, **member} for member in judge.get("panel", {}).get("members", [])]
    else:
        return []
    return sorted({g["api_key_env"] for g in graders if g.get("backend") == "openai" and g.get("api_key_env")})


def run_job(
    launcher_name: str, job: Job, ray_options: Mapping[str, Any] | None = None, out: TextIO = sys.stdout
) -> int:
    launcher = get_launcher(launcher_name, **(dict(ray_options or {}) if launcher_name == "ray" else {}))
    return launcher.run(job, out)


def main_command(argv: Sequence[str]) -> tuple[str, ...]:
    """The command after ``--``."""
    command = tuple(argv[1:] if argv and argv[0] == "--" else argv)
    if not command:
        raise LaunchError("no command to launch: give it after `--`")
    return command
