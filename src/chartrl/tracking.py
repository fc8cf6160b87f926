"""MLflow conventions, in one place.

- One experiment per config (``mlflow.experiment``); the default store is ``sqlite:///results/mlflow.db`` and
  artifacts go beside it (``results/mlartifacts/``). The experiment is tagged with MLflow 3's experiment kind
  ``custom_model_development`` (``mlflow.experimentKind``), so the UI opens it on its training runs, not on the
  GenAI (traces) view.
- One run per (subject, stage), named ``{subject}/{stage}`` (``e1/train``, ``synthchart/data``, ``e1/test``),
  tagged with ``stage`` and whatever else the stage knows (``series``, ``generation``, ``reward``, ``algorithm``,
  ``tools``, ``backend``, ``dataset``, ``seed``). A run of an extra seed has a name of its own
  (``e1/train/seed1``, ``e1/test/seed1``), so it never supersedes the main run.
- A series' runs carry its description (``config/series.yaml``) as the run's MLflow description
  (``mlflow.note.content``).
- Params are the resolved config of that subject, flattened, logged once. Metrics go in batches.
- The parquet splits a run reads are its dataset inputs (the runs table's Dataset column): named by their path under
  ``results/`` (``data/synthchart/train``), the digest the first characters of the file's SHA-256 (the whole hash
  and the row count in the profile), context ``train``, ``validation`` or ``test`` (:meth:`StageRun.log_splits`).
- A train run also carries its series' headline test figures (``test/accuracy``, ``test/accuracy_{type}``,
  ``test/tool_call_ratio``, ``test/drift``, ...), added by the test-accuracy and diagonal jobs beside their own
  runs, so the train runs compare side by side (:func:`existing_run`).
- Every run is tagged with the commit of the checkout its job ran (MLflow's own ``mlflow.source.git.commit``, with
  ``-dirty`` when chartrl's code or the workflow differed from it; none outside a git checkout): the same commit
  is in a train run's ``run.json`` (``source_commit``), so a result names the code that made it.
- Every run starts tagged ``chartrl.superseded=false``, so ``tags.chartrl.superseded = 'false'`` finds the current
  runs; a stage rerun from scratch starts a new run and tags the older runs of the same name
  ``chartrl.superseded=true`` (with the id of the run that replaced them).
- A run ends FINISHED, FAILED when its job raised, or KILLED when its job was stopped (SIGTERM, Ctrl-C): never
  left RUNNING by a job that ended (:func:`end_status`).
- No secret reaches params or tags: any value containing the value of a secret-looking environment variable
  (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``) is refused before anything is logged.
- A SQLite store serves the jobs of one machine. Jobs on several nodes (verl on ``verl.nnodes`` > 1, a Slurm
  executor) need an MLflow server (:func:`shared_sqlite_problem`, checked before anything runs); a store a job
  cannot reach fails it before its work starts (:func:`unreachable_store_problem`).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from chartrl.config import Config, MlflowSettings, config_check
from chartrl.errors import Stopped

log = logging.getLogger(__name__)

SUPERSEDED_TAG = "chartrl.superseded"
GIT_COMMIT_TAG = "mlflow.source.git.commit"
CODE_PATHS = ("src", "rules", "Snakefile")
"""What makes a checkout's code differ from its commit (``-dirty``): chartrl and the workflow, not results or docs."""
SUPERSEDED_BY_TAG = "chartrl.superseded_by"
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
"""MLflow 3's kind for a model-training experiment (the UI's ``CUSTOM_MODEL_DEVELOPMENT``; ``genai_development``
is the other), which decides the view the experiment opens on."""
DESCRIPTION_TAG = "mlflow.note.content"
"""MLflow's run description (shown on the run's page)."""
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
MAX_PARAM_LENGTH = 6000  # MLflow's limit on a param value
SPLIT_CONTEXTS = {"train": "train", "val": "validation", "test": "test"}
"""The context (MLflow's ``mlflow.data.context`` input tag) a split is logged under."""
DIGEST_LENGTH = 12
"""Characters of the file's SHA-256 kept as the dataset's digest (the UI shows it beside the name)."""


class SecretLeak(ValueError):
    """A value about to be logged contains a secret from the environment."""


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested mappings -> dotted keys with string values (lists as JSON-ish text)."""
    flat: dict[str, str] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, f"{name}."))
        else:
            text = str(list(value) if isinstance(value, tuple) else value)
            flat[name] = text if len(text) <= MAX_PARAM_LENGTH else text[: MAX_PARAM_LENGTH - 3] + "..."
    return flat


def refuse_secrets(values: Mapping[str, str]) -> None:
    secrets = {name: value for name, value in os.environ.items() if SECRET_NAME.search(name) and len(value) >= 8}
    for key, text in values.items():
        for name, secret in secrets.items():
            if secret in str(text) or secret in key:
                raise SecretLeak(
                    f"refusing to log '{key}' to MLflow: it contains the value of the environment variable {name}. "
                    "Config should name the variable holding a secret, never hold the secret itself."
                )


def shown_uri(tracking_uri: str) -> str:
    """A tracking URI fit for a message: any ``user:password@`` in it replaced by ``***@``."""
    return re.sub(r"(?<=://)[^/@]+@", "***@", tracking_uri)


def artifact_root(tracking_uri: str) -> str | None:
    """For a SQLite store, the artifact folder beside the database; otherwise the server decides."""
    if tracking_uri.startswith("sqlite:///"):
        db = Path(tracking_uri.removeprefix("sqlite:///"))
        return (db.parent / "mlartifacts").resolve().as_uri()
    return None


MLFLOW_SERVER_FIX = (
    "run one MLflow server for the study where every node reaches it, its database on that machine's local disk "
    "(e.g. `mlflow server --backend-store-uri sqlite:////local/chartrl/mlflow.db --host 0.0.0.0 --port 5000`), and "
    "set mlflow.tracking_uri to http://<that host>:5000 (docs/cluster.md)"
)


def shared_sqlite_problem(tracking_uri: str, writers: str) -> str | None:
    """Why ``tracking_uri`` cannot take the writes of ``writers`` (jobs on several nodes), or None. A SQLite file
    on a shared filesystem is written by every node's jobs at once, and SQLite's locks do not hold over NFS
    (sqlite.org/howtocorrupt.html, section 2.1; its WAL mode needs shared memory, so one machine): runs and
    metrics can be lost or the database corrupted, silently."""
    if not tracking_uri.startswith("sqlite:"):
        return None
    return (
        f"mlflow.tracking_uri {shown_uri(tracking_uri)!r} is a SQLite file, and {writers}: SQLite's locking does not "
        f"hold across machines on a shared filesystem, so runs and metrics can be lost or the file corrupted; "
        + MLFLOW_SERVER_FIX
    )


@config_check("mlflow store across nodes")
def config_store_problems(config: Config) -> list[str]:
    """verl on several nodes logs from several machines (its trainer's actor and the job's driver need not share
    one): the store must be a server (the workflow checks a Slurm executor's jobs the same way)."""
    if config.backend != "verl" or config.verl.nnodes < 2:
        return []
    writers = f"verl.nnodes {config.verl.nnodes} puts verl's processes on several nodes"
    problem = shared_sqlite_problem(config.mlflow.tracking_uri, writers)
    return [problem] if problem else []


def unreachable_store_problem(tracking_uri: str, timeout_s: float = 10.0) -> str | None:
    """Why this process cannot reach the MLflow server at ``tracking_uri``, or None (a SQLite store, or a server
    that answered at all). Asked once, before a job starts its work: MLflow's own client retries a dead server for
    minutes, and verl, whose logger gives up after three tries, trains on without tracking."""
    import urllib.error
    import urllib.request

    if not tracking_uri.startswith(("http://", "https://")):
        return None
    try:
        urllib.request.urlopen(tracking_uri.rstrip("/") + "/health", timeout=timeout_s).close()
    except urllib.error.HTTPError:
        return None  # it answered (an auth proxy, an older server without /health): reachable
    except (OSError, ValueError) as err:
        where = f"mlflow.tracking_uri {shown_uri(tracking_uri)!r} from {os.uname().nodename}"
        return (
            f"cannot reach the MLflow server at {where} ({getattr(err, 'reason', err)}): start it, or set "
            "mlflow.tracking_uri to an address this node reaches"
        )
    return None


@contextmanager
def _store_lock(tracking_uri: str) -> Iterator[None]:
    """Serialise first contact with a SQLite store: MLflow creates and migrates the schema on first use, and two
    jobs doing that at once collide ("duplicate column name"). Later writes are safe to interleave."""
    if not tracking_uri.startswith("sqlite:///"):
        yield
        return
    db = Path(tracking_uri.removeprefix("sqlite:///"))
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(db.with_name(db.name + ".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _client(settings: MlflowSettings):
    """A client on the store, the store created and migrated (under a lock) before it is returned."""
    from mlflow.tracking import MlflowClient

    with _store_lock(settings.tracking_uri):
        client = MlflowClient(tracking_uri=settings.tracking_uri)
        client.search_experiments(max_results=1)  # forces schema creation/migration now, inside the lock
    return client


def experiment_id(client, settings: MlflowSettings) -> str:
    from mlflow.exceptions import MlflowException

    with _store_lock(settings.tracking_uri):
        experiment = client.get_experiment_by_name(settings.experiment)
        if experiment is not None:
            if EXPERIMENT_KIND_TAG not in experiment.tags:  # made before the tag was set, or by hand
                client.set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
            return experiment.experiment_id
        try:
            return client.create_experiment(
                settings.experiment,
                artifact_location=artifact_root(settings.tracking_uri),
                tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND},
            )
        except MlflowException:  # created a moment ago by a job on another store client (a server store)
            experiment = client.get_experiment_by_name(settings.experiment)
            if experiment is None:
                raise
            return experiment.experiment_id


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def dataset_name(path: Path) -> str:
    """A split's dataset name: its path under ``results/`` without the suffix (``data/synthchart/train``,
    ``filter/synthchart/train``), else its folder and stem."""
    parts = path.with_suffix("").parts
    if "results" in parts[:-1]:
        return "/".join(parts[len(parts) - parts[::-1].index("results") :])
    return "/".join(parts[-2:])


def split_input(path: str | Path, split: str):
    """An MLflow dataset input for the parquet split at ``path``: read from the file's bytes and its parquet footer
    (the row count), never loaded."""
    import pyarrow.parquet as pq
    from mlflow.entities import Dataset, DatasetInput, InputTag
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    path = Path(path).resolve()
    sha256 = file_sha256(path)
    dataset = Dataset(
        name=dataset_name(path),
        digest=sha256[:DIGEST_LENGTH],
        source_type="local",
        source=json.dumps({"uri": str(path)}),
        profile=json.dumps({"num_rows": pq.ParquetFile(path).metadata.num_rows, "sha256": sha256}),
    )
    refuse_secrets({"dataset.name": dataset.name, "dataset.source": dataset.source})
    return DatasetInput(dataset, tags=[InputTag(MLFLOW_DATASET_CONTEXT, SPLIT_CONTEXTS.get(split, split))])


class StageRun:
    """A handle on one MLflow run: batched metrics (steps at or below ``skip_through`` are not logged again,
    so a resumed job never logs a step twice), dataset inputs, artifacts, the end status."""

    def __init__(self, client, run_id: str, skip_through: int = -1):
        self.client, self.run_id, self.skip_through = client, run_id, skip_through

    def log_metrics(self, metrics: Mapping[str, float], step: int = 0) -> None:
        from mlflow.entities import Metric

        if step <= self.skip_through:
            return
        now = int(time.time() * 1000)
        batch = [Metric(key, float(value), now, step) for key, value in metrics.items()]
        for start in range(0, len(batch), 1000):  # MLflow accepts at most 1000 metrics per batch
            self.client.log_batch(self.run_id, metrics=batch[start : start + 1000])

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        self.client.log_artifact(self.run_id, str(path), artifact_path)

    def log_splits(self, splits: Mapping[str, str | Path]) -> None:
        """The parquet splits the run read (``{"train": path, "val": path}``) as its dataset inputs; logging one
        again (a resumed job) adds nothing."""
        if splits:
            inputs = [split_input(path, split) for split, path in splits.items()]
            log_inputs(self.client, self.run_id, inputs)

    def finish(self, status: str = "FINISHED") -> None:
        self.client.set_terminated(self.run_id, status)


def log_inputs(client, run_id: str, inputs: list, attempts: int = 5) -> None:
    """``client.log_inputs``, tried again when another job inserted the same dataset between this one's look-up and
    its insert (two train jobs starting together log the same splits into one experiment, and a SQL store refuses
    the second row with a unique-constraint error); on the next try the store finds the row and links it."""
    from mlflow.exceptions import MlflowException

    for attempt in range(attempts):
        try:
            client.log_inputs(run_id, datasets=inputs)
            return
        except MlflowException as error:
            if "UNIQUE constraint failed: datasets." not in str(error) or attempt == attempts - 1:
                raise
            time.sleep(0.05 * (attempt + 1))


def end_status(error: BaseException) -> str:
    """The status of a run whose job ended by ``error``: KILLED when the job was stopped (a SIGTERM raised as
    :class:`~chartrl.errors.Stopped`, a Ctrl-C), FAILED otherwise."""
    return "KILLED" if isinstance(error, (Stopped, KeyboardInterrupt)) else "FAILED"


def find_runs(client, experiment: str, run_name: str, include_superseded: bool = False) -> list:
    runs = client.search_runs([experiment], filter_string=f"tags.`mlflow.runName` = '{run_name}'", max_results=1000)
    if include_superseded:
        return list(runs)
    return [r for r in runs if r.data.tags.get(SUPERSEDED_TAG) != "true"]


def _described(tags: dict[str, str], description: str | None) -> dict[str, str]:
    if description:
        tags[DESCRIPTION_TAG] = description
    return tags


def _nested(tags: dict[str, str], parent: str | None) -> dict[str, str]:
    if parent:
        tags["mlflow.parentRunId"] = parent  # nests the run under the train series' run in the MLflow UI
    return tags


def train_run_name(series_id: str, seed: int | None = None) -> str:
    """``{series}/train`` for the main run, ``{series}/train/seed{N}`` for an extra seed's."""
    return f"{series_id}/train" + (f"/seed{seed}" if seed is not None else "")


def test_run_name(series_id: str, seed: int | None = None, tools: str | None = None) -> str:
    """``{series}/test`` (per-type test accuracy of a train series' last checkpoint), ``/seed{N}`` for an extra
    seed's, ``/tools_{on|off}`` when the tool setting is forced (the warm-started model)."""
    name = f"{series_id}/test"
    if seed is not None:
        name += f"/seed{seed}"
    if tools is not None:
        name += f"/tools_{tools}"
    return name


def train_run_tags(series, backend: str, seed: int | None = None) -> dict[str, str]:
    """The tags of a train series' run ``{series}/train``, whichever backend trains it (``seed``: its train
    seed)."""
    tags = {
        "series": series.id,
        "generation": series.generation,
        "stage": "train",
        "reward": series.reward.name,
        "algorithm": series.algorithm,
        "tools": str(series.tools).lower(),
        "backend": backend,
    }
    if seed is not None:
        tags["seed"] = str(seed)
    return _described(tags, series.description)


def eval_run_tags(series: Mapping[str, Any], stage: str, parent: str | None, backend: str) -> dict[str, str]:
    """The tags of an eval series' run (``{series}/generate``, ``/score``, ``/diagonal``), nested under the train
    series' run ``parent`` (its ``mlflow.parentRunId``) when there is one."""
    tags = {
        "series": series["id"],
        "generation": str(series.get("generation", "")),
        "stage": stage,
        "of": str(series["of"]),
        "checkpoint": str(series.get("checkpoint", "last")),
        "backend": backend,
    }
    return _nested(_described(tags, series.get("description")), parent)


def test_run_tags(series: Mapping[str, Any], with_tools: bool, parent: str | None, seed: int | None) -> dict[str, str]:
    """The tags of a test-accuracy run (``{series}/test``), nested under the train run it read."""
    tags = {"series": series["id"], "stage": "test", "tools": str(with_tools).lower(), "backend": "local"}
    if series.get("generation"):
        tags["generation"] = str(series["generation"])
    if seed is not None:
        tags["seed"] = str(seed)
    return _nested(_described(tags, series.get("description")), parent)


@functools.cache
def source_commit(root: str | None = None) -> str | None:
    """The commit of the checkout this job runs from (``CHARTRL_SOURCE``, else the working folder), with ``-dirty``
    when its code (:data:`CODE_PATHS`) differs from that commit; None outside a git checkout or without git."""
    import subprocess

    folder = root or os.environ.get("CHARTRL_SOURCE") or os.getcwd()

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", folder, *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return None
    changed = git("status", "--porcelain", "--untracked-files=no", "--", *CODE_PATHS)
    return f"{commit}-dirty" if changed else commit


def start_run(settings: MlflowSettings, run_name: str, tags: Mapping[str, str], params: Mapping[str, Any]) -> StageRun:
    """A fresh run for ``run_name`` (older runs of that name are tagged superseded), tags and flattened params
    logged once."""
    flat_params = flatten(params)
    str_tags = {k: str(v) for k, v in tags.items()}
    if (commit := source_commit()) is not None:
        str_tags.setdefault(GIT_COMMIT_TAG, commit)
    refuse_secrets({**flat_params, **str_tags})
    client = _client(settings)
    exp = experiment_id(client, settings)
    older = find_runs(client, exp, run_name)
    # Tagged current from the start: a filter on tags.chartrl.superseded = 'false' then finds it (MLflow's search
    # cannot select runs that lack a tag).
    run = client.create_run(exp, run_name=run_name, tags={**str_tags, SUPERSEDED_TAG: "false"})
    run_id = run.info.run_id
    for old in older:
        client.set_tag(old.info.run_id, SUPERSEDED_TAG, "true")
        client.set_tag(old.info.run_id, SUPERSEDED_BY_TAG, run_id)
    from mlflow.entities import Param

    items = [Param(k, v) for k, v in flat_params.items()]
    for start in range(0, len(items), 100):  # MLflow accepts at most 100 params per batch
        client.log_batch(run_id, params=items[start : start + 100])
    log.info("MLflow run %s (%s) in experiment %s at %s", run_name, run_id, settings.experiment, settings.tracking_uri)
    return StageRun(client, run_id)


def run_exists(settings: MlflowSettings, run_id: str) -> bool:
    """Whether ``run_id`` is in the store and not deleted."""
    from mlflow.exceptions import MlflowException

    try:
        return _client(settings).get_run(run_id).info.lifecycle_stage != "deleted"
    except MlflowException:
        return False


def existing_run(settings: MlflowSettings, run_id: str | None) -> StageRun | None:
    """A handle that adds metrics and inputs to the run ``run_id`` as it is: not reopened, its status untouched
    (a finished train run stays FINISHED); None when there is no such run (no id, or gone from the store)."""
    if not run_id or not run_exists(settings, run_id):
        if run_id:
            log.warning("MLflow run %s is not in %s: nothing added to it", run_id, shown_uri(settings.tracking_uri))
        return None
    return StageRun(_client(settings), run_id)


def resume_run(settings: MlflowSettings, run_id: str, progress_key: str) -> StageRun:
    """Reopen ``run_id``; steps already logged for ``progress_key`` (a metric every step logs) are skipped."""
    client = _client(settings)
    history = client.get_metric_history(run_id, progress_key)
    last = max((m.step for m in history), default=-1)
    client.update_run(run_id, status="RUNNING")
    log.info("MLflow run %s resumed; steps up to %d were logged before", run_id, last)
    return StageRun(client, run_id, skip_through=last)


@contextmanager
def stage_run(
    settings: MlflowSettings,
    run_name: str,
    tags: Mapping[str, str],
    params: Mapping[str, Any],
    resume: str | None = None,
    progress_key: str = "",
) -> Iterator[StageRun]:
    """Start a fresh run for ``run_name`` (superseding older ones), or reopen ``resume`` (a resumed job's run: the
    steps it holds of ``progress_key`` are not logged again), and end it FINISHED, or FAILED if the body raises, or
    KILLED if the job is stopped."""
    run = resume_run(settings, resume, progress_key) if resume else start_run(settings, run_name, tags, params)
    try:
        yield run
    except BaseException as error:
        run.finish(end_status(error))
        raise
    run.finish("FINISHED")
