"""``chartrl warmstart``: the supervised warm start of the tiny model (the warmstart rule), resumable from its
checkpoints."""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import shutil
from pathlib import Path
from typing import Any

from chartrl import tracking
from chartrl.commands.spec import Reads, given_spec, read_job_spec
from chartrl.config import MlflowSettings, PromptConfig, WarmstartConfig, tools_config
from chartrl.data.contract import read_split
from chartrl.errors import ChartrlError
from chartrl.files import atomic_dir, write_json
from chartrl.model.policy import load_policy
from chartrl.threads import use_threads
from chartrl.warmstart import METRICS_FILE, RUN_FILE
from chartrl.warmstart.supervised import (
    CHECKPOINT_EVERY,
    Checkpointing,
    read_checkpoint,
    save_history,
    train_warmstart,
)

log = logging.getLogger(__name__)
READS = {
    # what the warm start trains from: all of warmstart but the check's eval_rows, the prompts and tools its
    # demonstrations are written with (not the rollout settings: only the check samples)
    "warmstart": Reads("warmstart", sections=("prompts", "tools"), all_but={"warmstart": ("eval_rows",)}),
}
CHECK_MIN_ROWS = 2
"""The after-warm-start check's shuffled-image control shows each row another row's chart."""
PROGRESS_KEY = "warmstart/loss"
"""Logged every warm-start step: how a resumed job finds the steps its MLflow run already holds."""


def checkpoint_folder(out: str | Path) -> Path:
    """Where ``chartrl warmstart --out OUT`` keeps its resume checkpoint: ``OUT.resume`` beside it, not inside it,
    so a workflow that removes a failed job's output (Snakemake does) leaves the checkpoint for the rerun."""
    out = Path(out)
    return out.with_name(f"{out.name}.resume")


def resume_key(sections: dict[str, Any], model: str | Path, train: str | Path) -> str:
    """What a warm start computes from: its settings and the bytes of the model folder and the train split."""
    digest = hashlib.sha256(json.dumps(sections, sort_keys=True).encode())
    files = sorted(p for p in Path(model).rglob("*") if p.is_file()) + [Path(train)]
    for path in files:
        digest.update(f"\0{path.relative_to(model) if path.is_relative_to(model) else path.name}\0".encode())
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def cmd_warmstart(args: argparse.Namespace) -> int:
    sections = read_job_spec(args.spec, READS["warmstart"])
    cfg = WarmstartConfig(**sections["warmstart"])
    prompt_config = PromptConfig(**sections["prompts"])
    tools = tools_config(sections["tools"])
    use_threads(cfg.threads)
    train_rows = read_split(args.train)
    if args.val is not None:  # refused before the warm start, not by the check after it
        refuse_small_val_split(args.val, len(read_split(args.val)))
    policy = load_policy(args.model, train=True)
    settings = MlflowSettings(tracking_uri=args.tracking_uri, experiment=args.experiment)
    tags = {"stage": "warmstart", "model": "tiny", "backend": "local"}
    folder = checkpoint_folder(args.out)
    trained_from = given_spec(args.spec, sections)  # the training's settings: the check's keys left out
    key = resume_key(trained_from, args.model, args.train)
    state = read_checkpoint(folder, key)
    resumed = state["meta"].get("mlflow_run_id") if state else None
    if resumed and not tracking.run_exists(settings, resumed):
        log.warning("the warm start's MLflow run %s is gone: a new run gets the checkpoint's steps", resumed)
        resumed = None
    opened = tracking.stage_run(
        settings, "base/warmstart", tags, trained_from, resume=resumed, progress_key=PROGRESS_KEY
    )
    with opened as run:
        run.log_splits({"train": args.train})
        if state and not resumed:
            for metrics in state["history"]:
                run.log_metrics(metrics, step=int(metrics["step"]))
        every = args.checkpoint_every or CHECKPOINT_EVERY
        checkpointing = Checkpointing(folder, key, every, meta={"mlflow_run_id": run.run_id})
        history = train_warmstart(
            policy,
            train_rows,
            cfg,
            prompt_config,
            tools,
            on_step=lambda m: run.log_metrics(m, step=int(m["step"])),
            checkpointing=checkpointing,
        )
        with atomic_dir(args.out) as tmp:
            policy.model.save_pretrained(tmp)
            policy.processor.save_pretrained(tmp)
            save_history(history, tmp / METRICS_FILE)
            write_json(tmp / RUN_FILE, {"mlflow_run_id": run.run_id, "steps": cfg.steps})
            source = Path(args.model) / "chartrl_model.json"
            if source.exists():
                (tmp / "chartrl_model.json").write_text(source.read_text())
        shutil.rmtree(folder, ignore_errors=True)  # the model is written: nothing left to resume
    log.info("warm start done: %d steps, the model in %s", cfg.steps, args.out)
    return 0


def refuse_small_val_split(path: str | Path, rows: int) -> None:
    """The check cannot run on fewer than CHECK_MIN_ROWS validation rows: say so before minutes of training."""
    if rows < CHECK_MIN_ROWS:
        raise ChartrlError(
            f"{path}: the after-warm-start check needs at least {CHECK_MIN_ROWS} validation rows (its shuffled-image "
            f"control shows each row another row's chart); the split has {rows}: give the val split more rows"
        )


def register(stages: argparse._SubParsersAction) -> None:
    warm = stages.add_parser("warmstart", help="supervised warm start of a model on synthetic demonstrations")
    warm.add_argument("--model", required=True, help="the model folder to start from")
    warm.add_argument("--train", required=True, help="train split parquet (demonstrations)")
    warm.add_argument(
        "--val",
        default=None,
        help="val split parquet: refused before the warm start when too small for the after-warm-start check",
    )
    warm.add_argument("--out", required=True, help="model folder to write")
    sections = ", ".join(READS["warmstart"].section_names)
    warm.add_argument("--spec", default=None, help=f"JSON with the sections {sections}")
    warm.add_argument("--tracking-uri", default="sqlite:///results/mlflow.db")
    warm.add_argument("--experiment", default="chartrl")
    warm.add_argument(
        "--checkpoint-every",
        type=int,
        default=None,
        help="steps between resume checkpoints, kept in OUT.resume (default: CHECKPOINT_EVERY of "
        "chartrl.warmstart.supervised); a rerun of a stopped job with the same inputs and settings resumes from the "
        "last one",
    )
    warm.set_defaults(func=cmd_warmstart)
