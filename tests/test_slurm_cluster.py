"""The Slurm path for real, on a one-node Slurm started here (Debian's slurm-wlm and munge; `make slurm-check`
installs them): the rehearsal (config/gpu.yaml + config/rehearsal.yaml, the local backend, no GPU) runs through
`--workflow-profile profiles/slurm` and the locked snakemake-executor-plugin-slurm. Every job is submitted with
`sbatch` to slurmctld and run by slurmd; one train job is cancelled with `scancel` halfway through its steps, and
the profile's `retries` resubmit it, so the run still finishes with every checkpoint, step and MLflow metric. What
the profile gets wrong against a real sbatch (partition, account, memory, time limit, the exported environment)
fails here.

The cluster: munged, slurmctld and slurmd in a temporary folder with a generated slurm.conf, on free loopback ports:
one node (`localhost`, this machine's CPUs, up to 2, and 90% of its memory), no cgroups (proctrack/linuxproc,
task/none), select/cons_tres with CPUs and memory consumable. Its default partition is `debug`, so a job sent to a
partition nobody has (the profile's old `cpu`) fails at sbatch; the node is also in a partition named `gpu`, the
one the profile sends the verl rules to, which on this backend are CPU jobs. There is no accounting database
(slurmdbd): `sacct` answers nothing, so the plugin finds no default account (and submits without one, as on a
cluster without accounts) and the run asks `squeue` for the jobs' states (`--slurm-status-command squeue`; the
controller keeps finished jobs for MinJobAge). Every daemon started here is stopped when the module ends."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import BIN, REPO, job_environment
from conftest import mlflow_server as conftest_mlflow_server

pytestmark = [pytest.mark.slow, pytest.mark.slurm]

SBIN = ("/usr/sbin", "/usr/bin")
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "squeue", "scancel", "sinfo", "munge")
OVERLAYS = (str(REPO / "config" / "gpu.yaml"), str(REPO / "config" / "rehearsal.yaml"))
KILLED = "e1"  # the train series cancelled halfway: e4 evaluates its step 1, which keep_last 1 alone would delete
KILLED_AFTER_STEP = 2  # of rehearsal.yaml's 4
TRAIN_SERIES = ("e1", "e2", "e3", "e6", "e7", "e10", "e11", "e12")
RUN_TIMEOUT_S = 3600


def slurm_program(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(SBIN))


@pytest.fixture(scope="module")
def programs() -> dict[str, str]:
    found = {name: slurm_program(name) for name in (*DAEMONS, *CLIENTS)}
    missing = sorted(name for name, path in found.items() if path is None)
    if missing:
        message = f"{', '.join(missing)} not found: apt-get install slurm-wlm munge (make slurm-check does)"
        if os.environ.get("CHARTRL_REQUIRE_SLURM"):
            raise AssertionError(message)
        pytest.skip(message)
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def node_memory_mb() -> int:
    """90% of this machine's memory (/proc/meminfo), what the node offers its jobs."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 9 // 10 // 1024
    raise AssertionError("/proc/meminfo has no MemTotal")


@dataclass
class Cluster:
    folder: Path
    env: dict[str, str]
    cpus: int
    memory_mb: int

    def run(self, *command: str, check: bool = True) -> str:
        result = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=60)
        if check and result.returncode != 0:
            raise AssertionError(f"{' '.join(command)} failed ({result.returncode}): {result.stderr}\n{self.logs()}")
        return result.stdout

    def jobs(self) -> list[dict[str, str]]:
        """Every job the controller holds, finished ones included (kept for MinJobAge)."""
        out = self.run("squeue", "--states=all", "--noheader", "--format=%i|%T|%P|%k|%j")
        fields = ("id", "state", "partition", "comment", "name")
        return [dict(zip(fields, line.split("|"))) for line in out.splitlines()]

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted((self.folder / "log").glob("*.log")))


def slurm_conf(folder: Path, user: str, cpus: int, memory_mb: int) -> str:
    return f"""\
ClusterName=chartrl-check
SlurmctldHost={socket.gethostname()}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser={user}
SlurmdUser={user}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={folder / "munge" / "munge.socket"}
StateSaveLocation={folder / "state"}
SlurmdSpoolDir={folder / "spool"}
SlurmctldPidFile={folder / "slurmctld.pid"}
SlurmdPidFile={folder / "slurmd.pid"}
SlurmctldLogFile={folder / "log" / "slurmctld.log"}
SlurmdLogFile={folder / "log" / "slurmd.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
MpiDefault=none
ReturnToService=2
MinJobAge=7200
KillWait=10
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=localhost MaxTime=INFINITE State=UP
"""


def srun_with_conf(folder: Path, srun: str, conf: Path) -> Path:
    """A folder with an `srun` that names this cluster's slurm.conf. Inside a job the Slurm plugin's jobstep runs
    the rule through `srun` with every SLURM_* variable but the job's identity removed, SLURM_CONF with them
    (snakemake-executor-plugin-slurm-jobstep 0.6.1; snakemake-executor-plugin-slurm issue #164): its srun then finds
    no configuration except at the default /etc/slurm/slurm.conf, which this test leaves alone."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(f'#!/bin/sh\nSLURM_CONF={conf} exec {srun} "$@"\n')
    (bin_dir / "srun").chmod(0o755)
    return bin_dir


def stop(process: subprocess.Popen, name: str) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def cluster(programs, tmp_path_factory):
    """munged, slurmctld and slurmd in the foreground as this module's children; stopped (jobs cancelled first)
    when the module ends."""
    import getpass

    folder = tmp_path_factory.mktemp("slurm")
    for sub in ("munge", "state", "spool", "log"):
        (folder / sub).mkdir()
    key = folder / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    cpus, memory_mb = min(2, os.cpu_count() or 1), node_memory_mb()
    conf = folder / "slurm.conf"
    conf.write_text(slurm_conf(folder, getpass.getuser(), cpus, memory_mb))
    env = job_environment(
        SLURM_CONF=str(conf), PATH=os.pathsep.join([str(srun_with_conf(folder, programs["srun"], conf)), str(BIN),
                                                    os.environ["PATH"]])
    )  # fmt: skip
    daemons: list[tuple[str, subprocess.Popen]] = []
    log = open(folder / "log" / "daemons.out", "w")

    def start(name: str, *args: str) -> None:
        command = [programs[name], *args]
        daemons.append((name, subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)))

    try:
        munge = folder / "munge"
        start("munged", "--foreground", "--force", f"--socket={munge / 'munge.socket'}", f"--key-file={key}",
              f"--pid-file={munge / 'munged.pid'}", f"--log-file={munge / 'munged.log'}",
              f"--seed-file={munge / 'munged.seed'}")  # fmt: skip
        wait_for(lambda: (munge / "munge.socket").exists(), "munged's socket", daemons, folder)
        start("slurmctld", "-D", "-c", "-f", str(conf))
        start("slurmd", "-D", "-N", "localhost", "-f", str(conf))
        result = Cluster(folder, env, cpus, memory_mb)

        def node_idle() -> bool:
            out = subprocess.run(["sinfo", "--noheader", "--format=%t"], env=env, capture_output=True, text=True)
            return out.returncode == 0 and out.stdout.split()[:1] == ["idle"]

        wait_for(node_idle, "the node to register idle", daemons, folder)
        yield result
    finally:
        if any(name == "slurmctld" and p.poll() is None for name, p in daemons):
            # the jobs first, while slurmd can still end their processes
            subprocess.run(["scancel", "--user", getpass.getuser()], env=env, capture_output=True)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                out = subprocess.run(["squeue", "--noheader", "--format=%i"], env=env, capture_output=True, text=True)
                if out.returncode != 0 or not out.stdout.strip():
                    break
                time.sleep(1)
        for name, process in reversed(daemons):
            stop(process, name)
        log.close()


def wait_for(ready, what: str, daemons, folder: Path, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        for name, process in daemons:
            if process.poll() is not None:
                raise AssertionError(f"{name} exited ({process.returncode}) while waiting for {what}:\n"
                                     + Cluster(folder, {}, 0, 0).logs())  # fmt: skip
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}:\n" + Cluster(folder, {}, 0, 0).logs())
        time.sleep(0.5)


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """`mlflow server` on loopback, as docs/cluster.md runs it for jobs on several nodes; stopped at the end."""
    folder = tmp_path_factory.mktemp("mlflow-server")
    with conftest_mlflow_server(f"sqlite:///{folder / 'mlflow.db'}", folder) as address:
        yield address


@dataclass
class SlurmRun:
    workdir: Path
    output: str
    returncode: int
    wall_s: float
    killed: dict[str, str]
    jobs: list[dict[str, str]]


@pytest.fixture(scope="module")
def slurm_run(cluster, mlflow_server, tmp_path_factory):
    """The rehearsal through the Slurm profile, one train job cancelled halfway."""
    workdir = tmp_path_factory.mktemp("rehearsal-slurm")
    site = workdir / "site.yaml"  # the guide's site overlay: here only the MLflow server
    site.write_text(f"mlflow:\n  tracking_uri: {mlflow_server}\n")
    command = [
        str(BIN / "snakemake"), "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
        "--workflow-profile", str(REPO / "profiles" / "slurm"),
        "--sdm", "env-modules",  # conda is not installed here; the rehearsal's jobs run .venv's chartrl
        "--slurm-status-command", "squeue",  # no accounting database: sacct answers nothing
        "--slurm-init-seconds-before-status-checks", "5",
        "--configfile", *OVERLAYS, str(site),
    ]  # fmt: skip
    log_path = workdir / "snakemake.log"
    started = time.monotonic()
    killed: dict[str, str] = {}
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, cwd=workdir, env=cluster.env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = started + RUN_TIMEOUT_S
            while process.poll() is None:
                if time.monotonic() > deadline:
                    raise AssertionError(f"the run took over {RUN_TIMEOUT_S} s:\n{log_path.read_text()[-4000:]}")
                if not killed:
                    killed = cancel_halfway(cluster, workdir)
                time.sleep(0.5)
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)  # Snakemake cancels its Slurm jobs
                process.wait(timeout=120)
    wall_s = time.monotonic() - started
    version = cluster.run("sinfo", "--version").strip()
    jobs = cluster.jobs()
    # the figures bench/slurm_check.md records (seen with pytest -s, as make slurm-check runs it)
    print(f"\n{version}: the rehearsal through profiles/slurm in {wall_s:.0f} s, {len(jobs)} Slurm jobs")
    return SlurmRun(workdir, log_path.read_text(), process.returncode, wall_s, killed, jobs)


def cancel_halfway(cluster: Cluster, workdir: Path) -> dict[str, str]:
    """scancel the KILLED series' train job once it has saved step KILLED_AFTER_STEP of its 4, before it ends."""
    comment = f"rule_train_wildcards_{KILLED}"
    running = [job for job in cluster.jobs() if job["comment"] == comment and job["state"] == "RUNNING"]
    checkpoint = workdir / "results" / "runs" / KILLED / "checkpoints" / f"step_{KILLED_AFTER_STEP}"
    if not running or not checkpoint.is_dir():
        return {}
    if (workdir / "results" / "runs" / KILLED / "run.json").exists():
        raise AssertionError(f"train {KILLED} finished before it could be cancelled halfway")
    cluster.run("scancel", running[0]["id"])
    return running[0]


def test_the_rehearsal_runs_to_its_report_through_slurm(slurm_run):
    assert slurm_run.returncode == 0, slurm_run.output[-6000:]
    report = slurm_run.workdir / "results" / "report"
    assert (report / "index.html").is_file() and (report / "metrics.json").is_file()


def test_every_job_was_an_sbatch_job_and_each_rule_log_is_where_the_guide_says(slurm_run):
    """Snakemake's job table (the planned jobs by rule) against the controller's jobs: each planned job ran as one
    Slurm job that completed, the cancelled one once more; only the target rule `all` ran in Snakemake itself."""
    planned = job_stats(slurm_run.output)
    assert planned.pop("all") == 1 and planned.get("train") == len(TRAIN_SERIES), planned
    completed: dict[str, int] = {}
    for job in slurm_run.jobs:
        if job["state"] == "COMPLETED":
            completed[rule_of(job)] = completed.get(rule_of(job), 0) + 1
    assert completed == planned
    assert {job["state"] for job in slurm_run.jobs} == {"COMPLETED", "CANCELLED"}  # none failed
    cancelled = [job for job in slurm_run.jobs if job["state"] == "CANCELLED"]
    assert [job["comment"] for job in cancelled] == [f"rule_train_wildcards_{KILLED}"]
    # the CPU jobs in the cluster's default partition (no name in the profile), the verl rules' in the named one
    partitions = {rule_of(job): job["partition"] for job in slurm_run.jobs}
    assert partitions["data_split"] == "debug" and partitions["train"] == "gpu", partitions
    logs = slurm_run.workdir / "results" / "logs"
    for series in TRAIN_SERIES:
        assert (logs / "train" / f"{series}.log").stat().st_size > 0, series
    # the cancelled job's own Slurm log is kept beside them (a successful job's is deleted)
    kept = list((logs / "slurm").rglob(f"{slurm_run.killed['id']}.log"))
    assert len(kept) == 1, sorted(str(p) for p in (logs / "slurm").rglob("*.log"))


def rule_of(job: dict[str, str]) -> str:
    """The rule of a Slurm job, from the comment the plugin gives it (``rule_<rule>_wildcards_<wildcards>``)."""
    return job["comment"].removeprefix("rule_").split("_wildcards_")[0]


def job_stats(output: str) -> dict[str, int]:
    """The first "Job stats:" table Snakemake prints: rule -> count."""
    lines = output.splitlines()
    start = lines.index("Job stats:") + 3  # past the title, the header and its underline
    counts = {}
    for line in lines[start:]:
        parts = line.split()
        if len(parts) != 2 or parts[0] == "total":
            break
        counts[parts[0]] = int(parts[1])
    return counts


def test_the_cancelled_train_job_was_resubmitted_and_resumed_with_nothing_lost(slurm_run):
    assert slurm_run.killed, "no train job was cancelled"
    # the rule's log is the resubmitted job's: it continued from the checkpoint the cancelled one saved last
    log = (slurm_run.workdir / "results" / "logs" / "train" / f"{KILLED}.log").read_text()
    resumed = re.search(rf"resuming {KILLED} from checkpoint step_(\d+)", log)
    assert resumed and int(resumed.group(1)) >= KILLED_AFTER_STEP, log[-3000:]
    run = json.loads((slurm_run.workdir / "results" / "runs" / KILLED / "run.json").read_text())
    assert run["last_step"] == 4
    steps = [json.loads(line)["step"] for line in (slurm_run.workdir / f"results/runs/{KILLED}/metrics.jsonl").open()]
    assert steps == sorted(set(steps)) and steps[-1] == 4
    # e4 evaluates step 1 of e1: kept through the cancellation and the resumed job's pruning
    assert (slurm_run.workdir / f"results/runs/{KILLED}/checkpoints/step_1").is_dir()
    assert list((slurm_run.workdir / "results/eval/e4").glob("scores_*.json"))


def test_the_mlflow_runs_are_on_the_server(slurm_run, mlflow_server):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_server)
    experiment = client.get_experiment_by_name("chartrl-rehearsal")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    current = {r.data.tags.get("mlflow.runName"): r for r in runs if r.data.tags.get("chartrl.superseded") != "true"}
    for series in TRAIN_SERIES:
        run = current[f"{series}/train"]
        assert run.info.status == "FINISHED", series
    # the cancelled series' run continued, not restarted: one run, every step's reward logged once
    killed = current[f"{KILLED}/train"]
    assert json.loads((slurm_run.workdir / f"results/runs/{KILLED}/run.json").read_text())["mlflow_run_id"] == (
        killed.info.run_id
    )
    history = sorted(m.step for m in client.get_metric_history(killed.info.run_id, "reward/overall"))
    assert history == sorted(set(history)) and history[-1] == 4, history
