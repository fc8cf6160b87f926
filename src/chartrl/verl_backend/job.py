"""``chartrl verl train``: one series trained by verl, as a recipe::

    prepare   our train/val splits -> verl's dataset parquet; the tool YAML (tool series); sizes checked
    track     the series' MLflow run (``{series}/train``, backend verl), resumed when the same config reruns
    train     python -m verl.trainer.main_ppo <the series' overrides> + where verl logs (MLFLOW_RUN_ID)
    export    the run's metrics -> metrics.jsonl; the checkpoints -> run.json (last, best on validation)

The overrides come from the rule's command line (``chartrl.verl_backend.overrides``, so a dry run shows them); the
job checks that they read the files it wrote. A SIGTERM (Snakemake cancelling, ``ray job stop``) is passed on to
verl's whole process group, and the job fails with verl's exit code.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from chartrl import tracking
from chartrl.config import MlflowSettings, ModelConfig, PromptConfig, ToolsConfig, TrainConfig, TrainSeries
from chartrl.data.contract import read_split
from chartrl.errors import ChartrlError, UsageError
from chartrl.files import sole_writer, write_json
from chartrl.tracking import shown_uri, unreachable_store_problem
from chartrl.train.resume import job_key, set_aside
from chartrl.verl_backend.checkpoints import CheckpointKeeper, select_checkpoint, verl_checkpoints
from chartrl.verl_backend.checks import dataset_problems
from chartrl.verl_backend.data import write_verl_dataset
from chartrl.verl_backend.hydra import override_key
from chartrl.verl_backend.metrics import (
    PROGRESS_KEY,
    export_metrics,
    measured_figures,
    replan_arguments,
    trained_steps,
    val_history,
)
from chartrl.verl_backend.overrides import SeriesFiles, hydra_overrides, mlflow_overrides
from chartrl.verl_backend.tool_config import write_tool_config

log = logging.getLogger(__name__)
VERL_MAIN = (sys.executable, "-m", "verl.trainer.main_ppo")
ENTRY_VARIABLE = "CHARTRL_VERL_ENTRY"
"""A test seam, for tests only: when set, a command line (split like a shell's) that ``chartrl verl train`` and
``chartrl verl generate`` run instead of ``python -m verl.trainer.main_ppo``, with the same overrides and
environment. verl's trainer needs GPUs, so the workflow test runs the whole verl DAG with a stand-in
(``tests/verl_backend/verl_standin.py``) through it. Every use is logged; unset, verl itself runs."""


def verl_entry() -> tuple[str, ...]:
    """What runs verl: ``CHARTRL_VERL_ENTRY`` when set (a test stand-in), else verl's ``main_ppo``."""
    import shlex

    text = os.environ.get(ENTRY_VARIABLE, "").strip()
    if not text:
        return VERL_MAIN
    log.warning("%s is set: running %r instead of verl.trainer.main_ppo (a test seam)", ENTRY_VARIABLE, text)
    return tuple(shlex.split(text))


KEEPER_POLL_ENV = "CHARTRL_CHECKPOINT_POLL_S"
"""Seconds between two looks for a checkpoint to keep (default 10; verl saves one every few minutes at most)."""


class VerlJobError(ChartrlError):
    """verl failed, or the job's inputs cannot work together."""


@dataclass
class VerlTrainJob:
    series: TrainSeries
    train: TrainConfig
    prompts: PromptConfig
    tools: ToolsConfig
    model: ModelConfig
    spec: Mapping[str, Any]
    """The resolved config this job runs (logged as MLflow params)."""
    overrides: Sequence[str]
    run_dir: Path
    train_split: Path
    val_split: Path
    mlflow: MlflowSettings
    keep_steps: tuple[int, ...] = ()
    """Checkpoint steps an eval series names: kept out of verl's pruning (``checkpoints.CheckpointKeeper``)."""

    @property
    def files(self) -> SeriesFiles:
        return SeriesFiles(self.run_dir.resolve())

    @cached_property
    def key(self) -> str:
        """What its checkpoints were computed from (``chartrl.train.resume``): the spec and the overrides, the
        content of the starting model (a local folder; a hub id by name) and of the splits, the reward's code.
        verl's ``resume_mode=auto`` continues whatever checkpoints it finds, so only this key's are left for it."""
        model = override_values(self.overrides).get("actor_rollout_ref.model.path", "")
        spec = {"spec": self.spec, "overrides": list(self.overrides)}
        return job_key(spec, {"model": model, "train": self.train_split, "val": self.val_split})


def absolute_tracking_uri(uri: str) -> str:
    """A relative SQLite store made absolute: verl's loggers run in Ray actors with another working directory."""
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri.startswith(prefix + "/"):
        return prefix + str(Path(uri.removeprefix(prefix)).resolve())
    return uri


def override_values(overrides: Sequence[str]) -> dict[str, str]:
    return {override_key(o): o.split("=", 1)[1].strip("'") for o in overrides}


def check_overrides(job: VerlTrainJob) -> None:
    """The overrides must read the files this job writes (a rule and a job out of step fail here, not in verl)."""
    values, files = override_values(job.overrides), job.files
    expected = {"data.train_files": str(files.train_data), "data.val_files": str(files.val_data)}
    if job.series.tools:
        expected["actor_rollout_ref.rollout.multi_turn.tool_config_path"] = str(files.tool_config)
    wrong = [
        f"{key}={values.get(key)!r} (expected {value!r})" for key, value in expected.items() if values.get(key) != value
    ]
    if wrong:
        raise UsageError(
            "the overrides do not point at this job's files: " + "; ".join(wrong) + ". Generate them with "
            f"`chartrl verl overrides --series {job.series.id}` (the train rule does)"
        )


def prepare(job: VerlTrainJob) -> dict[str, int]:
    """Convert the splits and write the tool YAML; returns the row counts."""
    check_overrides(job)
    train_rows, val_rows = read_split(job.train_split), read_split(job.val_split)
    problems = dataset_problems(len(train_rows), len(val_rows), job.train.prompts_per_step)
    if problems:
        raise VerlJobError(f"series {job.series.id} cannot train on verl:\n  " + "\n  ".join(problems))
    files = job.files
    options = {"with_tools": job.series.tools, "prompts": job.prompts, "tools": job.tools, "model": job.model}
    write_verl_dataset(train_rows, files.train_data, **options)
    write_verl_dataset(val_rows, files.val_data, **options)
    if job.series.tools:
        write_tool_config(files.tool_config, job.tools.names)
    return {"train": len(train_rows), "val": len(val_rows)}


def start_tracking(job: VerlTrainJob):
    """The series' MLflow run: the one a previous attempt of this very job (same key) started, whose checkpoints
    verl resumes from, else a fresh one (older runs of the name are tagged superseded); then the checkpoints of
    another key, or of none recorded, are moved aside first, so that ``resume_mode=auto`` finds none of them."""
    state_file = job.files.verl_dir / "job.json"
    state = json.loads(state_file.read_text()) if state_file.is_file() else {}
    if state.get("job_key") == job.key:
        log.info("resuming MLflow run %s of an earlier attempt", state["mlflow_run_id"])
        return tracking.resume_run(job.mlflow, state["mlflow_run_id"], PROGRESS_KEY)
    aside = set_aside(job.files.run_dir, (job.files.checkpoints.name,), state.get("job_key"))
    if aside is not None:
        log.warning(
            "%s: the checkpoints in %s were trained from other inputs, settings or reward code (key %s, this job's is "
            "%s): moved to %s, so verl trains from step 0",
            job.series.id,
            job.files.checkpoints,
            state.get("job_key"),
            job.key,
            aside,
        )
    tags = tracking.train_run_tags(job.series, backend="verl", seed=job.train.seed)
    run = tracking.start_run(job.mlflow, tracking.train_run_name(job.series.id), tags, job.spec)
    run.log_splits({"train": job.train_split, "val": job.val_split})
    write_json(state_file, {"job_key": job.key, "mlflow_run_id": run.run_id})
    return run


def verl_command(job: VerlTrainJob, run_id: str, entry: Sequence[str] = VERL_MAIN) -> list[str]:
    return [
        *entry,
        *job.overrides,
        *mlflow_overrides(job.mlflow.tracking_uri, run_id),
        *hydra_overrides(job.files.hydra_dir),
    ]


def run_verl(command: Sequence[str], env: Mapping[str, str]) -> int:
    """Run verl in its own process group, its output streamed; SIGTERM/SIGINT stop the whole group."""
    process = subprocess.Popen(list(command), env=dict(env), start_new_session=True)

    def stop(signum, _frame):
        log.warning("signal %d: stopping verl (process group %d)", signum, process.pid)
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        return process.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def finish(job: VerlTrainJob, run_id: str) -> dict[str, Any]:
    """metrics.jsonl from the MLflow run, run.json from the checkpoints verl saved. A run that holds no training
    step fails the job: verl's MLflow logger, when it cannot reach the store, warns and trains on without it
    (``verl/utils/tracking.py``), and the job would otherwise succeed with an empty metrics.jsonl."""
    lines = export_metrics(job.mlflow.tracking_uri, run_id, job.run_dir / "metrics.jsonl")
    if not trained_steps(lines):
        store = shown_uri(job.mlflow.tracking_uri)
        raise VerlJobError(
            f"verl finished but no training step reached MLflow run {run_id} at {store} (no "
            f"'{PROGRESS_KEY}' logged): verl goes on without MLflow when its workers cannot reach the store (look "
            "for 'MLflow initialization attempt' in the log above). Make the tracking URI reachable from every Ray "
            "worker (a SQLite file on a filesystem all nodes see, or an MLflow server) and rerun"
        )
    found = verl_checkpoints(job.files.checkpoints)
    if not found:
        raise VerlJobError(
            f"verl finished but saved no checkpoint under {job.files.checkpoints}; "
            "check trainer.save_freq (train.checkpoint_every)"
        )
    missing = [step for step in job.keep_steps if step not in found]
    if missing:
        raise VerlJobError(
            f"series {job.series.id}: the checkpoints of step(s) {', '.join(map(str, missing))}, which an eval series "
            f"names, are not under {job.files.checkpoints} (saved: {', '.join(map(str, found))}); check "
            "trainer.save_freq (train.checkpoint_every) and trainer.total_training_steps (train.steps)"
        )
    history = val_history(lines)
    last, best = (
        select_checkpoint(job.files.checkpoints, "last"),
        select_checkpoint(job.files.checkpoints, "best_val", history),
    )
    best_step = next(s for s, p in found.items() if p == best)
    measured = job_measurements(job, lines)
    summary = {
        "series": job.series.id,
        "backend": "verl",
        "source_commit": tracking.source_commit(),
        "mlflow_run_id": run_id,
        "last_step": next(s for s, p in found.items() if p == last),
        "job_key": job.key,
        "base_model": override_values(job.overrides).get("actor_rollout_ref.model.path"),
        "model": {"path": job.model.path, "revision": job.model.revision},
        "checkpoint_format": "verl_fsdp",
        "checkpoints": {
            "last": str(last),
            "best_val": str(best),
            "steps": {str(s): str(p) for s, p in found.items()},
        },
        "best_val": {"step": best_step, "accuracy": history.get(best_step)} if history else None,
        "val_history": {str(k): v for k, v in sorted(history.items())},
        "measured": measured,
    }
    write_json(job.run_dir / "run.json", summary)
    return summary


def job_measurements(job: VerlTrainJob, lines: list[dict[str, Any]]) -> dict[str, float] | None:
    """The run's measured figures (``metrics.measured_figures``), logged with the ``chartrl plan`` arguments that
    re-plan a study at them: what the smoke run is for."""
    values = override_values(job.overrides)
    longest = int(values.get("data.max_prompt_length", 0)) + int(values.get("data.max_response_length", 0))
    figures = measured_figures(lines, longest) if longest else None
    if figures:
        shown = ", ".join(f"{name} {value:,.2f}" for name, value in figures.items())
        log.info("%s measured: %s", job.series.id, shown)
        arguments = replan_arguments(figures)
        if arguments:
            log.info("%s: re-plan the study at them: chartrl plan --configfile ... %s", job.series.id, arguments)
    return figures


def run_train_job(job: VerlTrainJob, entry: Sequence[str] | None = None) -> dict[str, Any]:
    """Prepare, track, run verl (``entry``: default :func:`verl_entry`) and summarise, as the run folder's only
    writer (a rerun started while another process still writes there waits for it or fails)."""
    with sole_writer(job.files.run_dir, what=f"series {job.series.id}'s run"):
        return _run_train_job(job, verl_entry() if entry is None else entry)


def _run_train_job(job: VerlTrainJob, entry: Sequence[str]) -> dict[str, Any]:
    job.mlflow = MlflowSettings(absolute_tracking_uri(job.mlflow.tracking_uri), job.mlflow.experiment)
    problem = unreachable_store_problem(job.mlflow.tracking_uri)  # before any work: see finish() for why
    if problem:
        raise VerlJobError(f"series {job.series.id}: {problem}")
    counts = prepare(job)
    log.info("%s: verl data written (%d train, %d val questions)", job.series.id, counts["train"], counts["val"])
    run = start_tracking(job)
    overrides_file = job.files.verl_dir / "overrides.txt"
    overrides_file.write_text("\n".join(job.overrides) + "\n")
    run.log_artifact(overrides_file)
    env = {**os.environ, "MLFLOW_TRACKING_URI": job.mlflow.tracking_uri, "MLFLOW_RUN_ID": run.run_id}
    command = verl_command(job, run.run_id, entry)
    log.info("running verl: %s", " ".join(command[:3]) + f" ... ({len(command) - 3} overrides)")

    poll_s = float(os.environ.get(KEEPER_POLL_ENV, 10))
    # keep_last: verl prunes only what this run of it saved; the keeper prunes what an earlier attempt of the job
    # saved (a resumed run), once newer checkpoints replace it
    with CheckpointKeeper(job.files.checkpoints, job.keep_steps, poll_s, keep_last=job.train.keep_last):
        code = run_verl(command, env)
    if code != 0:
        run.finish("FAILED")
        raise VerlJobError(f"verl exited with code {code} for series {job.series.id}; see the log above")
    try:
        summary = finish(job, run.run_id)
    except BaseException:
        run.finish("FAILED")
        raise
    run.finish("FINISHED")
    return summary
