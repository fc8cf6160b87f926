"""``chartrl report``: the HTML report and metrics.json, logged as artifacts of an MLflow ``report`` run."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from chartrl import tracking
from chartrl.config import parse_config
from chartrl.errors import UsageError
from chartrl.report.build import build_report

log = logging.getLogger(__name__)


def cmd_report(args: argparse.Namespace) -> int:
    """The report reads the whole resolved config (``--config``, the report rule's params): it shows it."""
    try:
        config = parse_config(json.loads(args.config))
    except json.JSONDecodeError as err:
        raise UsageError(f"--config is not JSON: {err}") from err
    out = Path(args.out_dir)
    metrics = build_report(config, Path(args.results), out)
    tags = {"stage": "report", "backend": config.backend}
    with tracking.stage_run(config.mlflow, "report", tags, {"series": sorted(config.series)}) as run:
        run.log_metrics(
            {"report/series_with_training": len(metrics["training"]), "report/missing": len(metrics["missing"])}
        )
        run.log_artifact(out / "index.html")
        run.log_artifact(out / "metrics.json")
    size = (out / "index.html").stat().st_size
    log.info("report written to %s (%.1f MB)", out / "index.html", size / 1e6)
    return 0


def register(stages: argparse._SubParsersAction) -> None:
    report = stages.add_parser("report", help="the HTML report and metrics.json of a run")
    report.add_argument("--config", required=True, help="the resolved config as JSON (the report rule's params)")
    report.add_argument("--results", default="results")
    report.add_argument("--out-dir", default="results/report")
    report.set_defaults(func=cmd_report)
