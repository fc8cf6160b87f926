"""``chartrl data build|card``: the data stage, as the data rules call it."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from chartrl import tracking
from chartrl.commands.spec import Reads, read_job_spec
from chartrl.config import DatasetConfig, MlflowSettings
from chartrl.data.stage import build_card, build_split, card_metrics, draw_sample_sheet
from chartrl.errors import UsageError
from chartrl.files import write_json

log = logging.getLogger(__name__)
HOLDS = "the dataset's resolved config, as the data rules write it"
READS = {
    # the dataset's section, narrowed to the split (its source's split_options), local paths as the config names
    # them (relative to --root); data.min_box_coverage comes as --min-box-coverage
    "data build": Reads("data build", entries=("dataset",), holds=HOLDS),
    "data card": Reads("data card", entries=("dataset",), holds=HOLDS),
}


def dataset_from_spec(text: str, reads: Reads) -> DatasetConfig:
    spec = read_job_spec(text, reads)
    try:
        return DatasetConfig.from_dict(spec["dataset"])
    except (KeyError, TypeError) as err:
        raise UsageError(f"--spec must hold {HOLDS}: {err}") from err


def cmd_build(args: argparse.Namespace) -> int:
    dataset = dataset_from_spec(args.spec, READS["data build"])
    if args.split not in dataset.splits:
        raise UsageError(f"split {args.split!r} is not in the spec (it has {', '.join(dataset.splits)})")
    build_split(
        dataset,
        args.split,
        Path(args.root),
        Path(args.out),
        Path(args.rejects),
        threads=args.threads,
        min_box_coverage=args.min_box_coverage,
    )
    return 0


def cmd_card(args: argparse.Namespace) -> int:
    dataset = dataset_from_spec(args.spec, READS["data card"])
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


def register(stages: argparse._SubParsersAction) -> None:
    data = stages.add_parser("data", help="the data stage")
    commands = data.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="read one split of a dataset into the parquet contract")
    build.add_argument("--spec", required=True, help="the dataset's resolved config as JSON (the rule's params)")
    build.add_argument("--split", required=True, choices=["train", "val", "test"])
    build.add_argument("--root", default=".", help="relative source paths are relative to this folder")
    build.add_argument("--threads", type=int, default=1, help="worker processes for rendering")
    build.add_argument("--out", required=True, help="the split's parquet")
    build.add_argument("--rejects", required=True, help="JSON listing the rejected rows and why")
    build.add_argument(
        "--min-box-coverage",
        type=float,
        default=None,
        help="fail when fewer of the split's questions have label boxes (a tool series trains on it)",
    )
    build.set_defaults(func=cmd_build)

    card = commands.add_parser("card", help="sum a dataset's splits up in card.json and a sample sheet; log to MLflow")
    card.add_argument("--spec", required=True)
    card.add_argument("--parquets", nargs="+", required=True)
    card.add_argument("--rejects", nargs="+", required=True)
    card.add_argument("--out", required=True, help="card.json")
    card.add_argument("--samples", required=True, help="PNG contact sheet of charts with their boxes")
    card.add_argument("--samples-n", type=int, default=12)
    card.add_argument("--tracking-uri", required=True)
    card.add_argument("--experiment", required=True)
    card.set_defaults(func=cmd_card)
