"""``chartrl warmstart-check``: the after-warm-start check of a warm-started model (the warmstart_check rule): its
rollouts on validation rows, sampled and greedy, with and without tools, each next to its shuffled-image control."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from chartrl import tracking
from chartrl.commands.spec import Reads, given_spec, read_job_spec
from chartrl.commands.warmstart import refuse_small_val_split
from chartrl.config import MlflowSettings, PromptConfig, RolloutConfig, WarmstartConfig, tools_config
from chartrl.data.contract import read_split
from chartrl.files import write_json
from chartrl.model.policy import load_policy
from chartrl.rollout.generations import draw_gallery
from chartrl.threads import use_threads
from chartrl.warmstart import RUN_FILE
from chartrl.warmstart.check import check_after_warmstart

log = logging.getLogger(__name__)
READS = {
    # of warmstart, how many val rows and the seed of its sampling and shuffled-image control; the rollout
    # settings it samples with
    "warmstart-check": Reads(
        "warmstart-check", sections=("prompts", "tools", "rollout"), keys={"warmstart": ("eval_rows", "seed")}
    ),
}


def cmd_warmstart_check(args: argparse.Namespace) -> int:
    """The after-warm-start check of a warm-started model folder (chartrl.warmstart.check) on the val split: the
    check's JSON, a gallery of its sampled rollouts with tools, and the MLflow run ``base/warmstart_check``, nested
    under the warm start's run (``warmstart_run.json`` in the model folder).

    A run of its own rather than metrics added to the warm start's run: the check is rerun on its own (a rollout
    setting changed), and a rerun then supersedes its run instead of appending a second value to the warm start's
    metric history; its params are the settings it sampled with, which the warm start's run does not hold."""

    sections = read_job_spec(args.spec, READS["warmstart-check"])
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
    check = stages.add_parser(
        "warmstart-check", help="the after-warm-start check: rollouts of a warm-started model on validation rows"
    )
    check.add_argument("--model", required=True, help="the warm-started model folder")
    check.add_argument("--val", required=True, help="val split parquet (its first warmstart.eval_rows rows)")
    check.add_argument("--out", required=True, help="JSON to write: the check per decoding, prompt and control")
    check.add_argument("--gallery", required=True, help="PNG: sampled rollouts of the model with tools")
    sections = ", ".join(READS["warmstart-check"].section_names)
    check.add_argument("--spec", default=None, help=f"JSON with the sections {sections}")
    check.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    check.add_argument("--tracking-uri", default="sqlite:///results/mlflow.db")
    check.add_argument("--experiment", default="chartrl")
    check.set_defaults(func=cmd_warmstart_check)
