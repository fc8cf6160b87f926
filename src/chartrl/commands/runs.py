"""What the evaluation commands share: the train run an evaluation reads (its MLflow run is their parent, its
last step the step of their headline figures), their MLflow tags and their common arguments."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from chartrl.tracking import eval_run_tags


def eval_tags(series: dict[str, Any], stage: str, parent: str | None) -> dict[str, str]:
    return eval_run_tags(series, stage, parent, backend="local")


def parent_run_id(run_json: str | None) -> str | None:
    return json.loads(Path(run_json).read_text()).get("mlflow_run_id") if run_json else None


def last_step(run_json: str | Path) -> int:
    """The train run's last step (its run.json), the step its headline test figures are logged at."""
    return int(json.loads(Path(run_json).read_text()).get("last_step") or 0)


def eval_arguments() -> argparse.ArgumentParser:
    """The arguments every evaluation command takes (a parent parser): the job spec, the run, MLflow."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--spec", required=True, help="JSON: the eval series (with id), its train series and sections")
    common.add_argument("--run", default=None, help="the train series' run.json (checkpoints, parent MLflow run)")
    common.add_argument("--tracking-uri", default="sqlite:///results/mlflow.db")
    common.add_argument("--experiment", default="chartrl")
    return common
