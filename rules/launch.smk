# How model jobs (train, generate, test accuracy) run (launcher: inline | ray), and the local Ray head of a run: with launcher: ray and no cluster
# named (RAY_ADDRESS, ray.address), the workflow starts one head of its own when the run starts (its own ports
# and temp folder, job API on loopback, a token) and stops it, and only it, when the run ends or fails. Runs in
# one working folder share that head: each registers itself, and only the last run to end stops it
# (chartrl.ray_head.join_head / leave_head), so a run that ends first never stops another run's jobs.
import atexit
import shlex
import sys

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger

LOCAL_RAY_HEAD = CFG.launcher == "ray" and not os.environ.get("RAY_ADDRESS") and CFG.ray.address is None
# A RAY_ADDRESS that cannot take a job submission (ray.address is checked with the config) stops the run here,
# before any job, rather than at the first train job's launch.
_RAY_ADDRESS = os.environ.get("RAY_ADDRESS")
if CFG.launcher == "ray" and _RAY_ADDRESS:
    _problem = chartrl.ray_address_problem(_RAY_ADDRESS, "RAY_ADDRESS")
    if _problem:
        raise WorkflowError(_problem)


def judge_secrets_of(series_id):
    """The judge's key variables (names) a train job of `series_id` needs: those of the judge or panel its reward
    grades answers with, none for a rule-graded reward (no other launched job calls a judge: generation never
    does, and the score jobs, which do, run outside the launcher)."""
    reward = CFG.series[series_id].reward
    return chartrl.judge_key_names(CFG.judge_section(series_id), chartrl.accuracy_signal(reward.name, reward.params))


def launch_command(kind, name, config_text, num_cpus=1, num_gpus=0, secrets=()):
    """`chartrl launch ... --`, the prefix of a train (or generate) job's command: the same job config gives the
    same Ray submission id, so a resubmission attaches to a running twin. `secrets` names the variables holding
    the keys the job needs (judge_secrets_of), passed to a remote cluster's job only."""
    parts = [
        "chartrl launch",
        f"--launcher {CFG.launcher}",
        f"--submission-id {chartrl.submission_id(kind, name, config_text)}",
    ]
    if CFG.launcher == "ray":
        parts += [f"--num-cpus {num_cpus:g}", f"--num-gpus {num_gpus:g}"]
        parts.append(f"--env {','.join(CFG.ray.forward_env)}")
        if secrets:
            parts.append(f"--secret-env {','.join(secrets)}")
        parts.append(f"--stop-timeout {CFG.ray.stop_timeout_s:g}")
        if CFG.ray.address is not None:
            parts.append(f"--ray-address {shlex.quote(CFG.ray.address)}")
        if CFG.ray.python is not None and not LOCAL_RAY_HEAD:  # a local head records its own
            parts.append(f"--python {shlex.quote(CFG.ray.python)}")
    return " ".join(parts) + " --"


# What a verl train or generate job occupies: the whole cluster shape verl is given (verl.nnodes x
# verl.n_gpus_per_node). Declared as the rule's `gpu` resource so that Snakemake, limited by `--resources gpu=N`,
# queues verl jobs instead of starting them together: verl checks its resource pool once at start and fails when
# another job's workers hold the GPUs. The Ray driver itself reserves none (train_launch, generate_launch).
VERL_JOB_GPUS = CFG.verl.n_gpus

# The rest of a verl job's node, for an executor that allocates it (Slurm: --cpus-per-task, --mem): the host CPUs
# and memory its workers use besides the GPUs (FSDP's CPU offload, Ray's object store, the data loaders), an 8-GPU
# node's 32 CPUs and 256 GB. A site with other nodes sets its own in its Slurm profile's set-resources, which take
# precedence over a rule's. The same rules on the local backend are CPU jobs and ask for none of it.
VERL_JOB_RESOURCES = {"gpu": VERL_JOB_GPUS, "cpus_per_task": 32, "mem_mb": 256000}


def local_launch(kind, name, config_text, threads=None, secrets=()):
    """The launcher prefix of a local-backend model job (a seed's training, a test-accuracy pass): it reserves its
    threads (evaluate.threads unless given) and ray.job_gpus."""
    threads = CFG.evaluate.threads if threads is None else threads
    return launch_command(kind, name, config_text, threads, CFG.ray.job_gpus, secrets)


_HEAD = {}


def _launched_jobs():
    """The jobs of this run that go through the launcher (those with a `launch` param), read at onstart."""
    return [job for job in workflow.dag.needrun_jobs() if "launch" in job.rule.params.keys()]


def _gpu_jobs():
    """The jobs of this run that ask for GPUs, read at onstart: the `gpu` resource as declared, since what a job
    is given is capped by --resources gpu=N, down to 0."""
    return [job for job in workflow.dag.needrun_jobs() if job.rule.resources.get("gpu").value]


def _launched_env_pythons():
    """The Pythons of the conda environments Snakemake made (`--sdm conda`) for the jobs that run through the
    launcher; empty without conda. Read at onstart, when the environments exist."""
    from snakemake_interface_executor_plugins.settings import DeploymentMethod

    if DeploymentMethod.CONDA not in workflow.deployment_settings.deployment_method:
        return set()
    return {str(Path(job.conda_env.address) / "bin" / "python") for job in _launched_jobs() if job.conda_env}


def head_python():
    """The Python of the environment the local head and its jobs run: ray.python, else the conda environment
    Snakemake made for the launched jobs, else Snakemake's own (the head's `ray` is the one beside it)."""
    if CFG.ray.python is not None:
        return str(Path(CFG.ray.python).absolute())  # not resolved: a venv's python is a link to its base
    pythons = sorted(_launched_env_pythons())  # (not `conda = ...`: Snakemake reads that as its keyword)
    if len(pythons) > 1:
        raise WorkflowError(
            f"the launched jobs use {len(pythons)} conda environments ({', '.join(pythons)}), and the local Ray head "
            "runs one: set ray.python to the one its jobs need"
        )
    return pythons[0] if pythons else sys.executable


def _check_head_python(python):
    """On the verl backend the head's Python must import vLLM (verl builds its rollout replicas with it), or the
    first job dies minutes in; refused here, before the head or any job starts."""
    problem = chartrl.python_problem(python, chartrl.VERL_MODULES) if VERL else None
    if problem:
        raise WorkflowError(
            f"backend: verl runs its jobs on the local Ray head, and {problem}. Set ray.python to the Python of "
            "the GPU environment (envs/gpu.yaml), e.g. `ray: {python: /path/to/chartrl-gpu/bin/python}` in a "
            "--configfile overlay, or run with --sdm conda, whose environment for the verl jobs the head then runs "
            "(docs/cluster.md)"
        )


def _start_local_head():
    if not workflow.local_exec:
        # The head's job API listens on this machine's loopback: jobs an executor places elsewhere cannot reach it.
        raise WorkflowError(
            "launcher: ray with no cluster named starts a local Ray head, which jobs on other nodes (this executor's) "
            "cannot reach: set launcher: inline, as profiles/slurm does (a --config on the command line "
            "replaces the profile's whole config list, its launcher=inline included: repeat it there), or name a "
            "cluster (RAY_ADDRESS, ray.address)"
        )
    python = head_python()
    _check_head_python(python)
    temp_dir = CFG.ray.temp_dir or chartrl.default_temp_dir(os.getcwd())
    state = chartrl.join_head(
        temp_dir, base_port=CFG.ray.head_port, num_cpus=CFG.ray.num_cpus, num_gpus=CFG.ray.num_gpus, python=python
    )
    logger.info(f"local Ray head at {state.address} (temp folder {state.temp_dir}, Python {python})")
    os.environ.update(state.client_env())  # every job shell of this run submits to it
    _HEAD["state"] = state
    atexit.register(_stop_local_head)  # also on Ctrl-C, when Snakemake calls neither onsuccess nor onerror


def _stop_local_head():
    state = _HEAD.pop("state", None)
    if state is None:
        return
    others = chartrl.leave_head(state)
    if others:
        logger.info(f"local Ray head {state.address} left running: the workflow runs {others} still use it")
    else:
        logger.info(f"local Ray head {state.address} stopped")


def _check_verl_gpu_limit():
    """A local run of verl jobs must be limited to the GPUs it has (--resources gpu=N), or Snakemake starts them
    together; an executor such as Slurm allocates each job's GPUs itself. A run of CPU jobs only (the data stage
    before a GPU is booked) needs no limit."""
    if CFG.backend != "verl" or not workflow.local_exec or not _gpu_jobs():
        return
    limit = workflow.global_resources.get("gpu")
    problem = chartrl.gpu_limit_problem(None if limit is None else limit.value, CFG.verl)
    if problem:
        raise WorkflowError(problem)


def _check_tracking_store():
    """Jobs an executor places on other machines (Slurm) all write the MLflow store: a SQLite file there is shared
    by nodes (chartrl.tracking.shared_sqlite_problem), refused before the first job is submitted."""
    if workflow.local_exec:
        return
    problem = chartrl.shared_sqlite_problem(CFG.mlflow.tracking_uri, "this executor runs the jobs on several nodes")
    if problem:
        raise WorkflowError(problem)


def _check_tracking_server():
    """An MLflow server that does not answer fails the run before its first job: each job's MLflow client would
    retry it for minutes before failing. On an executor whose jobs run elsewhere (Slurm) the nodes may see the
    server when this machine does not: said, not refused."""
    problem = chartrl.unreachable_store_problem(CFG.mlflow.tracking_uri)
    if problem is None:
        return
    if workflow.local_exec:
        raise WorkflowError(problem)
    logger.warning(f"{problem} (this machine; the jobs' nodes may reach it)")


def _warn_remote_ray_store():
    """A Ray cluster named by RAY_ADDRESS or ray.address may place a job's driver and verl's trainer on other nodes
    than this one (a multi-node cluster), where a SQLite store is shared; said once, at parse time."""
    if CFG.launcher != "ray" or LOCAL_RAY_HEAD:
        return
    problem = chartrl.shared_sqlite_problem(CFG.mlflow.tracking_uri, "the Ray cluster may run jobs on several nodes")
    if problem:
        logger.warning(f"if the Ray cluster has more than one node: {problem}")


_warn_remote_ray_store()


def _use_forkserver():
    """Local jobs run their `chartrl` command in a fork of a preloaded interpreter (chartrl.forkserver), unless
    CHARTRL_FORKSERVER is set already (`off` turns it off). The local Ray head started before it is set: its jobs
    get it from the launcher (chartrl.launch.RayJobLauncher.runtime_env), and a job of a cluster named by RAY_ADDRESS
    or ray.address runs in a process of its own."""
    if workflow.local_exec:
        os.environ.setdefault("CHARTRL_FORKSERVER", "on")


onstart:
    if not workflow.touch:  # `snakemake --touch` (adopting results: docs/running.md) runs no job, needs none of it
        _check_tracking_store()
        _check_tracking_server()
        _check_verl_gpu_limit()
        if LOCAL_RAY_HEAD and _launched_jobs():  # a run of other jobs only (the data stage on a CPU node) needs none
            _start_local_head()
    _use_forkserver()


onsuccess:
    _stop_local_head()


onerror:
    _stop_local_head()
