"""``chartrl model tiny``, ``chartrl warmstart`` and ``chartrl warmstart-check``: the embedded default's base model,
its warm start and the check of what the warm start taught."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from chartrl.commands.spec import given_spec, read_job_spec
from chartrl.config import (
    MlflowSettings,
    PromptConfig,
    RolloutConfig,
    WarmstartConfig,
    model_config,
    tools_config,
)
from chartrl.errors import ChartrlError
from chartrl.threads import use_threads
from chartrl.warmstart import METRICS_FILE, RUN_FILE

log = logging.getLogger(__name__)


def cmd_tiny(args: argparse.Namespace) -> int:
    from chartrl.model.tiny import build_tiny_model

    sections = read_job_spec(args.spec, ("model", "tools"))
    summary = build_tiny_model(
        Path(args.out), model_config(sections["model"]), list(sections["tools"]["names"]), seed=args.seed
    )
    print(json.dumps(summary))
    return 0


WARMSTART_SECTIONS = ("warmstart", "prompts", "tools")
"""What the warm start trains from (the rule leaves out warmstart.eval_rows: only the check reads it)."""
CHECK_SECTIONS = ("warmstart", "prompts", "tools", "rollout")
"""What the after-warm-start check reads (of warmstart: eval_rows and seed; the rollout settings it samples with)."""
CHECK_MIN_ROWS = 2
"""The check's shuffled-image control shows each row another row's chart."""
PROGRESS_KEY = "warmstart/loss"
"""Logged every warm-start step: how a resumed job finds the steps its MLflow run already holds."""


def checkpoint_folder(out: str | Path) -> Path:
    """Where ``chartrl warmstart --out OUT`` keeps its resume checkpoint: ``OUT.resume`` beside it, not inside it,
    so a workflow that removes a failed job's output (Snakemake does) leaves the checkpoint for the rerun."""
    out = Path(out)
    return out.with_name(f"{out.name}.resume")


def resume_key(sections: dict[str, Any], model: str | Path, train: str | Path) -> str:
    """What a warm start computes from: its settings and the bytes of the model folder and the train split."""
    import hashlib

    digest = hashlib.sha256(json.dumps(sections, sort_keys=True).encode())
    files = sorted(p for p in Path(model).rglob("*") if p.is_file()) + [Path(train)]
    for path in files:
        digest.update(f"\0{path.relative_to(model) if path.is_relative_to(model) else path.name}\0".encode())
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def cmd_warmstart(args: argparse.Namespace) -> int:
    import shutil

    from chartrl import tracking
    from chartrl.data.contract import read_split
    from chartrl.files import atomic_dir, write_json
    from chartrl.model.policy import load_policy
    from chartrl.warmstart.supervised import (
        CHECKPOINT_EVERY,
        Checkpointing,
        read_checkpoint,
        save_history,
        train_warmstart,
    )

    sections = read_job_spec(args.spec, WARMSTART_SECTIONS)
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


def cmd_warmstart_check(args: argparse.Namespace) -> int:
    """The after-warm-start check of a warm-started model folder (chartrl.warmstart.check) on the val split: the
    check's JSON, a gallery of its sampled rollouts with tools, and the MLflow run ``base/warmstart_check``, nested
    under the warm start's run (``warmstart_run.json`` in the model folder).

    A run of its own rather than metrics added to the warm start's run: the check is rerun on its own (a rollout
    setting changed), and a rerun then supersedes its run instead of appending a second value to the warm start's
    metric history; its params are the settings it sampled with, which the warm start's run does not hold."""

    from chartrl import tracking
    from chartrl.data.contract import read_split
    from chartrl.files import write_json
    from chartrl.model.policy import load_policy
    from chartrl.rollout.generations import draw_gallery
    from chartrl.warmstart.check import check_after_warmstart

    sections = read_job_spec(args.spec, CHECK_SECTIONS)
    cfg = WarmstartConfig(**sections["warmstart"])
    use_threads(args.threads)
    rows = read_split(args.val)[: cfg.eval_rows]
    refuse_small_val_split(args.val, len(rows))
    policy = load_policy(args.model)
    settings = MlflowSettings(tracking_uri=args.tracking_uri, experiment=args.experiment)
    tags = {"stage": "warmstart_check", "model": "tiny", "backend": "local"}
    parent = _warmstart_run(args.model)
    if parent:
        tags["mlflow.parentRunId"] = parent  # nested under the warm start's run in the MLflow UI
    with tracking.stage_run(settings, "base/warmstart_check", tags, given_spec(args.spec, sections)) as run:
        run.log_splits({"val": args.val})
        check, episodes = check_after_warmstart(
            policy,
            rows,
            seed=cfg.seed,
            prompt_config=PromptConfig(**sections["prompts"]),
            tools=tools_config(sections["tools"]),
            rollout=RolloutConfig(**sections["rollout"]),
        )
        draw_gallery(episodes, Path(args.gallery))
        write_json(args.out, check)
        run.log_metrics({f"after_warmstart/{k}": v for k, v in _flat(check).items()})
        run.log_artifact(args.out)
        run.log_artifact(args.gallery)
    headline = {k: round(v, 3) for k, v in _flat(check).items() if "accuracy_by" not in k and "/episodes" not in k}
    log.info("after the warm start: %s", json.dumps(headline))
    return 0


def _warmstart_run(model: str | Path) -> str | None:
    """The MLflow run id of the warm start that wrote ``model`` (none for a model from elsewhere)."""
    path = Path(model) / RUN_FILE
    return json.loads(path.read_text()).get("mlflow_run_id") if path.exists() else None


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, float]:
    flat = {}
    for key, value in data.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}/"))
        elif isinstance(value, int | float):
            flat[f"{prefix}{key}"] = float(value)
    return flat


def register(stages: argparse._SubParsersAction) -> None:
    model = stages.add_parser("model", help="build models")
    commands = model.add_subparsers(dest="command", required=True)
    tiny = commands.add_parser("tiny", help="build the tiny Qwen2.5-VL-architecture model (random weights)")
    tiny.add_argument("--out", required=True, help="Hugging Face model folder to write")
    tiny.add_argument("--seed", type=int, default=None, help="overrides model.tiny.seed")
    tiny.add_argument("--spec", default=None, help="JSON with the model and tools sections (defaults otherwise)")
    tiny.set_defaults(func=cmd_tiny)

    warm = stages.add_parser("warmstart", help="supervised warm start of a model on synthetic demonstrations")
    warm.add_argument("--model", required=True, help="the model folder to start from")
    warm.add_argument("--train", required=True, help="train split parquet (demonstrations)")
    warm.add_argument(
        "--val",
        default=None,
        help="val split parquet: refused before the warm start when too small for the after-warm-start check",
    )
    warm.add_argument("--out", required=True, help="model folder to write")
    warm.add_argument("--spec", default=None, help=f"JSON with the sections {', '.join(WARMSTART_SECTIONS)}")
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

    check = stages.add_parser(
        "warmstart-check", help="the after-warm-start check: rollouts of a warm-started model on validation rows"
    )
    check.add_argument("--model", required=True, help="the warm-started model folder")
    check.add_argument("--val", required=True, help="val split parquet (its first warmstart.eval_rows rows)")
    check.add_argument("--out", required=True, help="JSON to write: the check per decoding, prompt and control")
    check.add_argument("--gallery", required=True, help="PNG: sampled rollouts of the model with tools")
    check.add_argument("--spec", default=None, help=f"JSON with the sections {', '.join(CHECK_SECTIONS)}")
    check.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    check.add_argument("--tracking-uri", default="sqlite:///results/mlflow.db")
    check.add_argument("--experiment", default="chartrl")
    check.set_defaults(func=cmd_warmstart_check)
