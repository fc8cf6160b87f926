"""``chartrl <stage> ...``: the entry points the Snakemake rules call (also ``python -m chartrl``).

Rules pass each job the resolved slice of the config it depends on as JSON (``--spec``), so a job runs exactly
the config Snakemake validated and logged, and a change to one dataset reruns only that dataset's jobs.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from chartrl.config import ConfigError, DatasetConfig, MlflowSettings, load_config, to_plain

log = logging.getLogger("chartrl")


class UsageError(ValueError):
    """The command line itself is wrong (exit 2)."""


def _dataset_from_spec(text: str) -> DatasetConfig:
    try:
        return DatasetConfig.from_dict(json.loads(text))
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise UsageError(f"--spec is not a dataset spec as the data rule writes it: {err}") from err


# --------------------------------------------------------------------------------------------------------------
# chartrl config
# --------------------------------------------------------------------------------------------------------------


def cmd_config_check(args: argparse.Namespace) -> int:
    config = load_config(args.configfile, root=args.root)
    if args.show:
        print(json.dumps(to_plain(config.resolved), indent=2))
    else:
        train = ", ".join(s.id for s in config.train_series)
        evals = ", ".join(s.id for s in config.eval_series)
        print(
            f"config OK: {len(config.series)} series (train: {train}; eval: {evals}); "
            f"datasets: {', '.join(config.datasets)}"
        )
    return 0


# --------------------------------------------------------------------------------------------------------------
# chartrl data
# --------------------------------------------------------------------------------------------------------------


def cmd_data_build(args: argparse.Namespace) -> int:
    from chartrl.data.stage import build_split

    dataset = _dataset_from_spec(args.spec)
    if args.split not in dataset.splits:
        raise UsageError(f"split {args.split!r} is not in the spec (it has {', '.join(dataset.splits)})")
    build_split(dataset, args.split, Path(args.root), Path(args.out), Path(args.rejects), threads=args.threads)
    return 0


def cmd_data_card(args: argparse.Namespace) -> int:
    from chartrl import tracking
    from chartrl.data.stage import build_card, card_metrics, draw_sample_sheet
    from chartrl.files import write_json

    dataset = _dataset_from_spec(args.spec)
    if len(args.parquets) != len(args.rejects):
        raise UsageError("give one --rejects file per --parquets file, in the same order")
    split_files, reject_files = {}, {}
    for parquet, rejects in zip(args.parquets, args.rejects, strict=True):
        split = Path(parquet).stem
        if not Path(rejects).name.startswith(f"{split}."):
            raise UsageError(f"--rejects {rejects} does not belong to split {split} ({parquet})")
        split_files[split], reject_files[split] = Path(parquet), Path(rejects)
    card, rows = build_card(dataset, split_files, reject_files)
    draw_sample_sheet(rows, args.samples_n, Path(args.samples))
    write_json(args.out, card)
    settings = MlflowSettings(tracking_uri=args.tracking_uri, experiment=args.experiment)
    tags = {"stage": "data", "dataset": dataset.name, "source": dataset.source}
    with tracking.stage_run(settings, f"{dataset.name}/data", tags, dataset.to_dict()) as run:
        run.log_metrics(card_metrics(card))
        run.log_artifact(args.out)
        run.log_artifact(args.samples)
    log.info("card of %s written to %s", dataset.name, args.out)
    return 0


# --------------------------------------------------------------------------------------------------------------
# Parser
# --------------------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chartrl", description=__doc__.splitlines()[0])
    stages = parser.add_subparsers(dest="stage", required=True)

    config = stages.add_parser("config", help="check or show the resolved configuration")
    config_cmds = config.add_subparsers(dest="command", required=True)
    check = config_cmds.add_parser("check", help="validate config/config.yaml + config/series.yaml + overlays")
    check.add_argument("--configfile", action="append", default=[], help="an overlay, as for snakemake (repeatable)")
    check.add_argument("--root", default=".", help="repository root holding config/ (default: .)")
    check.add_argument("--show", action="store_true", help="print the resolved config (defaults filled) as JSON")
    check.set_defaults(func=cmd_config_check)

    data = stages.add_parser("data", help="the data stage")
    data_cmds = data.add_subparsers(dest="command", required=True)
    build = data_cmds.add_parser("build", help="read one split of a dataset into the parquet contract")
    build.add_argument("--spec", required=True, help="the dataset's resolved config as JSON (the rule's params)")
    build.add_argument("--split", required=True, choices=["train", "val", "test"])
    build.add_argument("--root", default=".", help="relative source paths are relative to this folder")
    build.add_argument("--threads", type=int, default=1, help="worker processes for rendering")
    build.add_argument("--out", required=True, help="the split's parquet")
    build.add_argument("--rejects", required=True, help="JSON listing the rejected rows and why")
    build.set_defaults(func=cmd_data_build)

    card = data_cmds.add_parser("card", help="sum a dataset's splits up in card.json and a sample sheet; log to MLflow")
    card.add_argument("--spec", required=True)
    card.add_argument("--parquets", nargs="+", required=True)
    card.add_argument("--rejects", nargs="+", required=True)
    card.add_argument("--out", required=True, help="card.json")
    card.add_argument("--samples", required=True, help="PNG contact sheet of charts with their boxes")
    card.add_argument("--samples-n", type=int, default=12)
    card.add_argument("--tracking-uri", required=True)
    card.add_argument("--experiment", required=True)
    card.set_defaults(func=cmd_data_card)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr, force=True
    )
    for noisy in ("alembic", "mlflow", "urllib3", "matplotlib", "PIL"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    args = build_parser().parse_args(argv)
    from chartrl.data.errors import DataSourceError, TooManyRejects

    try:
        return args.func(args)
    except (ConfigError, UsageError) as err:
        print(f"chartrl: error: {err}", file=sys.stderr)
        return 2
    except (DataSourceError, TooManyRejects) as err:
        print(f"chartrl: error: {err}", file=sys.stderr)
        return 1
