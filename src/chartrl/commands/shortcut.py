"""``chartrl shortcut answers`` and ``chartrl shortcut filter``: the shortcut filter's two jobs (rules/filter.smk).

- ``answers --spec JSON --model DIR --data train.parquet --out answers.parquet``: the local backend's answers of
  the starting policy to the examined train questions without a usable chart (on verl: ``chartrl verl
  shortcut-answers``, same output).
- ``filter --spec JSON --data train.parquet --answers answers.parquet --out train.parquet --card card.json``: the
  decision, the filtered split and the card (the same on both backends); MLflow run ``{dataset}/shortcut_filter``.

The spec holds ``filter`` (``{"id": dataset, **datasets.<dataset>.shortcut_filter}``) and the sections read.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from chartrl import tracking
from chartrl.commands.spec import FILTER_HOLDS, Reads, filter_settings, read_job_spec
from chartrl.config import EvaluateConfig, MlflowSettings, PromptConfig, RolloutConfig, tools_config
from chartrl.data.contract import read_split, write_split
from chartrl.errors import UsageError
from chartrl.evaluate.shortcut import (
    answers_by_question,
    card_metrics,
    decide,
    examined_rows,
    filtered_split,
    sample_answers,
    shortcut_card,
)
from chartrl.files import write_json
from chartrl.model.policy import load_policy
from chartrl.rollout.generations import write_generations
from chartrl.threads import use_threads

log = logging.getLogger(__name__)
READS = {
    "shortcut answers": Reads(
        "shortcut answers",
        sections=("rollout", "prompts", "tools"),
        keys={"evaluate": ("threads",)},
        entries=("filter",),
        with_ids=("filter",),
        holds=FILTER_HOLDS,
    ),
    "shortcut filter": Reads(
        "shortcut filter",
        keys={"evaluate": ("bootstrap_samples", "confidence", "seed")},
        entries=("filter",),
        with_ids=("filter",),
        holds=FILTER_HOLDS,
    ),
}


def cmd_answers(args: argparse.Namespace) -> int:
    spec = read_job_spec(args.spec, READS["shortcut answers"])
    settings = filter_settings(spec)
    use_threads(EvaluateConfig(**spec["evaluate"]).threads)
    rows = examined_rows(read_split(args.data), settings)
    episodes = sample_answers(
        load_policy(args.model),
        rows,
        settings,
        rollout=RolloutConfig(**spec["rollout"]),
        prompts=PromptConfig(**spec["prompts"]),
        tools=tools_config(spec["tools"]),
    )
    out = Path(args.out)
    write_generations(episodes, out, out.parent / "images", str(args.model))
    log.info("%d answers without a usable chart (%d questions) written to %s", len(episodes), len(rows), out)
    return 0


def cmd_filter(args: argparse.Namespace) -> int:
    import pyarrow.parquet as pq

    spec = read_job_spec(args.spec, READS["shortcut filter"])
    settings = filter_settings(spec)
    dataset = spec["filter"]["id"]
    evaluate = EvaluateConfig(**spec["evaluate"])
    rows = read_split(args.data)
    examined = examined_rows(rows, settings)
    answers = answers_by_question(pq.read_table(args.answers, columns=["id", "sample", "final_response"]).to_pylist())
    try:
        decisions = decide(examined, answers, settings)
    except ValueError as err:
        raise UsageError(f"{args.answers}: {err}") from err
    kept = filtered_split(rows, decisions, settings)
    card = shortcut_card(
        dataset,
        rows,
        decisions,
        answers,
        settings,
        kept=len(kept),
        bootstrap_samples=evaluate.bootstrap_samples,
        confidence=evaluate.confidence,
        seed=evaluate.seed,
        backend=args.backend,
    )
    write_split(kept, args.out)
    write_json(args.card, card)
    settings_mlflow = MlflowSettings(tracking_uri=args.tracking_uri, experiment=args.experiment)
    tags = {"stage": "shortcut_filter", "dataset": dataset, "backend": args.backend}
    with tracking.stage_run(settings_mlflow, f"{dataset}/shortcut_filter", tags, spec["filter"]) as run:
        run.log_metrics(card_metrics(card))
        run.log_artifact(args.card)
    log.info(
        "%s: %d of %d examined train questions are shortcut questions (%s); %d rows written to %s",
        dataset,
        card["shortcut"],
        card["examined"],
        settings.mode,
        len(kept),
        args.out,
    )
    return 0


def register(stages: argparse._SubParsersAction) -> None:
    shortcut = stages.add_parser("shortcut", help="the shortcut filter of a train split")
    commands = shortcut.add_subparsers(dest="command", required=True)

    answers = commands.add_parser("answers", help="the starting policy's answers without a usable chart (local)")
    answers.add_argument("--spec", required=True, help="JSON: filter (dataset id and settings) and the sections")
    answers.add_argument("--model", required=True, help="the starting policy (a model folder)")
    answers.add_argument("--data", required=True, help="the train split (our contract)")
    answers.add_argument("--out", required=True, help="results/filter/{dataset}/answers.parquet")
    answers.set_defaults(func=cmd_answers)

    decide = commands.add_parser("filter", help="decide, write the filtered split and the card")
    decide.add_argument("--spec", required=True, help="JSON: filter (dataset id and settings) and evaluate")
    decide.add_argument("--data", required=True, help="the train split (our contract)")
    decide.add_argument("--answers", required=True, help="the answers (generations contract)")
    decide.add_argument("--out", required=True, help="results/filter/{dataset}/train.parquet")
    decide.add_argument("--card", required=True, help="results/filter/{dataset}/card.json")
    decide.add_argument("--backend", default="local", choices=["local", "verl"], help="which backend answered")
    decide.add_argument("--tracking-uri", default="sqlite:///results/mlflow.db")
    decide.add_argument("--experiment", default="chartrl")
    decide.set_defaults(func=cmd_filter)
