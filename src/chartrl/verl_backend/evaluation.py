"""``chartrl verl generate``: one eval series' test generations on verl, as a recipe::

    merge     the checkpoint the series names (run.json: last, best_val or a step) -> a Hugging Face folder,
              with verl's model merger (skipped when the folder already holds that very checkpoint)
    prepare   the test split (its first ``evaluate.limit`` questions, ``data.val_max_samples``) -> verl's dataset,
              as the train series ``of`` saw its data (prompt, tools, agent loop)
    generate  python -m verl.trainer.main_ppo trainer.val_only=True ... (the overrides come from the rule's
              command line, so ``snakemake -n -p`` shows them); verl dumps every generation as JSONL
    convert   the dump -> the generations contract (``chartrl.verl_backend.generations``) and the gallery, which
              the scorers, the diagonal check and the report read as they read a local evaluation; the job fails
              unless every question prepared has its ``val_kwargs.n`` samples (verl drops an over-long prompt
              and a failed agent loop without a word, and a score over the rest is not the test split's)

The job's MLflow run is ``{series}/generate``, nested under the train series' run, tagged ``backend: verl``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chartrl import tracking
from chartrl.config import MlflowSettings, ModelConfig, PromptConfig, ToolsConfig
from chartrl.data.contract import read_split
from chartrl.errors import UsageError
from chartrl.files import write_json
from chartrl.rollout.conversation import chart_image
from chartrl.rollout.generations import draw_gallery
from chartrl.verl_backend.checkpoints import merge_checkpoint, select_checkpoint
from chartrl.verl_backend.data import write_verl_dataset
from chartrl.verl_backend.generations import convert_dump
from chartrl.verl_backend.job import VerlJobError, absolute_tracking_uri, override_values, run_verl, verl_entry
from chartrl.verl_backend.overrides import GenerationFiles, hydra_overrides

log = logging.getLogger(__name__)
MERGED_FROM = "merged_from.json"


@dataclass
class VerlGenerationJob:
    series: Mapping[str, Any]
    """The eval series (with its id, ``of`` and ``checkpoint``)."""
    of: Mapping[str, Any]
    """The train series it evaluates (with its id and ``tools``)."""
    prompts: PromptConfig
    tools: ToolsConfig
    model: ModelConfig
    overrides: Sequence[str]
    run_json: Path
    data: Path
    out: Path
    gallery: Path
    gallery_size: int
    response_length: int | None
    mlflow: MlflowSettings

    @property
    def files(self) -> GenerationFiles:
        return GenerationFiles(self.out.resolve().parent / "verl")

    @property
    def with_tools(self) -> bool:
        return bool(self.of.get("tools"))


def check_overrides(job: VerlGenerationJob) -> None:
    """The overrides must be a generation job reading this job's files (see ``chartrl.verl_backend.job``)."""
    values, paths = override_values(job.overrides), job.files.paths()
    start = str(job.series.get("checkpoint")) == "start"  # the starting model itself, nothing merged
    model = json.loads(job.run_json.read_text()).get("base_model") if start else str(paths["model_dir"])
    expected = {
        "actor_rollout_ref.model.path": model,
        "data.val_files": str(paths["data_file"]),
        "trainer.validation_data_dir": str(paths["dump_dir"]),
        "trainer.val_only": "True",
    }
    wrong = [f"{k}={values.get(k)!r} (expected {v!r})" for k, v in expected.items() if values.get(k) != v]
    if wrong:
        raise UsageError(
            "the overrides are not this generation job's: " + "; ".join(wrong) + ". Generate them with "
            f"`chartrl verl overrides --series {job.series['id']}` (the generate rule does)"
        )


def merged_model(job: VerlGenerationJob) -> tuple[Path, Path]:
    """The merged checkpoint folder and the verl actor folder it came from (merged now unless already there)."""
    run = json.loads(job.run_json.read_text())
    if run.get("backend") != "verl":
        raise UsageError(
            f"{job.run_json} was trained by the {run.get('backend', 'local')} backend; a verl generation job needs a "
            "verl run (train it with backend: verl, or evaluate it with the local generate command)"
        )
    which = str(job.series.get("checkpoint", "last"))
    if which == "start":  # the model the run started from (model.path: a folder or a hub id), as verl loaded it
        return run["base_model"], run["base_model"]
    root = Path(run["checkpoints"]["last"]).parents[1]
    history = {int(k): v for k, v in run.get("val_history", {}).items()}
    actor = select_checkpoint(root, which if which in ("last", "best_val") else int(which), history)
    target, marker = job.files.model_dir, job.files.model_dir / MERGED_FROM
    if marker.is_file() and json.loads(marker.read_text()).get("actor") == str(actor):
        log.info("%s already holds %s", target, actor)
        return target, actor
    log.info("merging %s into %s with verl's model merger", actor, target)
    merge_checkpoint(actor, target)
    write_json(marker, {"actor": str(actor)})
    return target, actor


def generated_rows(rows: Sequence[Any], values: Mapping[str, str]) -> list:
    """The questions a generation job generates on: the first ``data.val_max_samples`` (``evaluate.limit``) of the
    split, or all of it. Only these are written for verl, so verl's own draw of ``val_max_samples`` rows (a seeded
    shuffle, ``RLHFDataset``) takes every one of them."""
    limit = int(values.get("data.val_max_samples", -1))
    return list(rows[:limit] if limit > 0 else rows)


def samples_per_question(values: Mapping[str, str]) -> int:
    """The samples verl generates per question (``val_kwargs.n``): what the dump must hold for each."""
    return int(values.get("actor_rollout_ref.rollout.val_kwargs.n", 1))


def prepare(job: VerlGenerationJob) -> list:
    rows = generated_rows(read_split(job.data), override_values(job.overrides))
    write_verl_dataset(
        rows, job.files.data_file, with_tools=job.with_tools, prompts=job.prompts, tools=job.tools, model=job.model
    )
    shutil.rmtree(job.files.dump_dir, ignore_errors=True)  # a dump of an earlier attempt must not be read as ours
    return rows


def generation_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The protocol view of the generations (as the local generate logs it): how often a tool was called and
    with which outcome, how often an answer was given, how often the budget cut a response."""
    count = max(1, len(records))
    summary = {
        "generations": float(len(records)),
        "tool_call_rate": sum(bool(r["tool_called"]) for r in records) / count,
        "answer_rate": sum(r["answer"] is not None for r in records) / count,
        "truncated_rate": sum(bool(r["truncated"]) for r in records) / count,
    }
    for outcome in ("executed", "malformed", "failed"):
        summary[f"tool_{outcome}_rate"] = sum(r["tool_outcome"] == outcome for r in records) / count
    return summary


@dataclass(frozen=True)
class GalleryEntry:
    """A generations-contract record in the shape ``draw_gallery`` reads (an episode's fields it uses)."""

    row: Any
    sample: int
    tool_outcome: str
    turns: list[dict[str, Any]]
    images: list[Any]

    @property
    def tool_outcomes(self) -> list[str]:
        return [] if self.tool_outcome == "none" else [self.tool_outcome]


def gallery_entries(records: Sequence[Mapping[str, Any]], rows: Sequence[Any]) -> list[GalleryEntry]:
    from PIL import Image

    by_id = {row.id: row for row in rows}
    entries = []
    for record in records:
        row = by_id[record["id"]]
        edited = [Image.open(path) for path in json.loads(record["edited_images"])[:1]]
        turns = [{"role": t["role"], "text": t.get("text", "")} for t in json.loads(record["turns"])]
        entries.append(GalleryEntry(row, record["sample"], record["tool_outcome"], turns, [chart_image(row), *edited]))
    return entries


def run_generation_job(job: VerlGenerationJob, entry: Sequence[str] | None = None) -> dict[str, float]:
    """Merge, prepare, run verl with ``trainer.val_only`` (``entry``: default ``verl_entry()``), convert."""
    entry = verl_entry() if entry is None else entry
    check_overrides(job)
    job.mlflow = MlflowSettings(absolute_tracking_uri(job.mlflow.tracking_uri), job.mlflow.experiment)
    model_dir, actor = merged_model(job)
    rows = prepare(job)
    series_id = job.series["id"]
    log.info("%s: %d test questions written in verl's format", series_id, len(rows))
    parent = json.loads(job.run_json.read_text()).get("mlflow_run_id")
    tags = tracking.eval_run_tags(job.series, "generate", parent, backend="verl")
    params = {"series": dict(job.series), "of": dict(job.of), "checkpoint_dir": str(actor)}
    with tracking.stage_run(job.mlflow, f"{series_id}/generate", tags, params) as run:
        command = [*entry, *job.overrides, *hydra_overrides(job.files.folder / "hydra")]
        log.info("running verl (val_only): %s", " ".join(command[:3]) + f" ... ({len(command) - 3} overrides)")
        code = run_verl(command, {**os.environ, "MLFLOW_TRACKING_URI": job.mlflow.tracking_uri})
        if code != 0:
            raise VerlJobError(f"verl exited with code {code} generating for {series_id}; see the log above")
        records = convert_dump(
            job.files.dump_dir,
            rows,
            job.out,
            tools=job.tools.names if job.with_tools else [],
            max_calls=job.tools.max_calls_per_turn,
            tokenizer_path=model_dir,
            image_dir=job.out.parent / "images",
            model=str(actor),
            response_length=job.response_length,
            samples_per_question=samples_per_question(override_values(job.overrides)),
        )
        draw_gallery(gallery_entries(records, rows), job.gallery, limit=job.gallery_size)
        summary = generation_summary(records)
        run.log_splits({"test": job.data})
        run.log_metrics({f"generate/{k}": v for k, v in summary.items()})
        run.log_artifact(str(job.gallery))
    log.info("%d generations of %s written to %s: %s", len(records), actor, job.out, summary)
    return summary
