"""``chartrl score``, ``chartrl diagonal`` and ``chartrl seed-diagonal``: an eval series' generations scored by one
scorer, the diagonal check of two scorers on the same generations, and an extra train seed's diagonal check of its
greedy test answers, as the evaluate rules call them. MLflow: ``{series}/score/{scorer}`` (``{series}/matrix/{scorer}``
for a matrix cell), ``{series}/diagonal`` (nested under the train series' run) and ``{series}/diagonal/seed{N}``."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from chartrl import tracking
from chartrl.commands.runs import eval_arguments, eval_tags, last_step, parent_run_id
from chartrl.commands.spec import Reads, given_spec, read_job_spec
from chartrl.config import EvaluateConfig, JudgeConfig, MlflowSettings
from chartrl.errors import UsageError
from chartrl.evaluate.diagonal import diagonal
from chartrl.data.contract import read_split
from chartrl.evaluate.score import SCORER_JUDGES, score_generations, score_inputs, test_answer_inputs
from chartrl.files import write_json
from chartrl.judge import log_judge_usage

log = logging.getLogger(__name__)
HOLDS = "the eval series (with its id) and its train series (of), as the evaluate rules write them"
READS = {
    "score": Reads(
        "score", sections=("judge",), keys={"evaluate": ("year_rule",)}, entries=("series", "of"),
        with_ids=("series",), holds=HOLDS,
    ),  # judge: given only for a scorer that judges (SCORER_JUDGES)
    "diagonal": Reads(
        "diagonal", keys={"evaluate": ("bootstrap_samples", "confidence", "seed", "hacking_drift")},
        entries=("series", "of"), with_ids=("series",), holds=HOLDS,
    ),
    "seed-diagonal": Reads(
        "seed-diagonal", sections=("judge",),
        keys={"evaluate": ("year_rule", "bootstrap_samples", "confidence", "seed", "hacking_drift")},
        entries=("series", "of"), with_ids=("series",), holds=HOLDS,
    ),  # judge: given only when one of the diagonal's scorers judges
}  # fmt: skip


def cmd_score(args: argparse.Namespace) -> int:
    spec = read_job_spec(args.spec, READS["score"])
    series = spec["series"]
    if args.scorer not in series.get("scorers", []) and not args.matrix:
        raise UsageError(
            f"series {series['id']} does not use scorer {args.scorer!r} (its scorers: {series.get('scorers')})"
        )
    result, judge = score_generations(
        Path(args.generations),
        args.scorer,
        JudgeConfig.from_dict(spec["judge"]),
        EvaluateConfig(**spec["evaluate"]).year_rule,
    )
    write_json(args.out, result)
    aggregate = result["aggregate"]
    settings = MlflowSettings(tracking_uri=args.tracking_uri, experiment=args.experiment)
    tags = {**eval_tags(series, "score", parent_run_id(args.run)), "scorer": args.scorer}
    if aggregate["year_rule"] is not None:  # a recipe's scorer (r1v, multiple_choice) reads no years
        tags["year_rule"] = aggregate["year_rule"]
    if judge is not None:
        tags["judge"] = judge.describe().get("kind", judge.name)
    stage = "matrix" if args.matrix and args.scorer not in series.get("scorers", []) else "score"
    params = given_spec(args.spec, spec)
    if judge is None:  # a scorer that asks no judge reads none of its settings (the rule's spec leaves them out)
        params.pop("judge")
    with tracking.stage_run(settings, f"{series['id']}/{stage}/{args.scorer}", tags, params) as run:
        metrics = {f"test/{k}": v for k, v in aggregate.items() if isinstance(v, int | float) and v is not None}
        for subset, values in aggregate["by_subset"].items():
            if values["accuracy"] is not None:
                metrics[f"test/accuracy_{subset}"] = values["accuracy"]
            if values.get("published_accuracy") is not None:  # the rule scorer's (chartrl.evaluate.score)
                metrics[f"test/published_accuracy_{subset}"] = values["published_accuracy"]
        run.log_metrics(metrics)
        if judge is not None:
            log_judge_usage(run, judge)
        run.log_artifact(args.out)
    published = aggregate["published_accuracy"]
    log.info(
        "%s %s accuracy %s over %d items (published rule: %s)",
        series["id"],
        args.scorer,
        aggregate["accuracy"],
        aggregate["n"],
        published if published is not None else aggregate["why_no_published"],
    )
    return 0


def _diagonal(first: dict, second: dict, evaluate: EvaluateConfig) -> dict:
    """The diagonal check of two scorers' scores of the same answers, with the evaluate section's bootstrap."""
    return diagonal(
        first,
        second,
        samples=evaluate.bootstrap_samples,
        confidence=evaluate.confidence,
        seed=evaluate.seed,
        hacking_drift=evaluate.hacking_drift,
    )


def _diagonal_metrics(result: dict) -> dict[str, float]:
    """A diagonal check's MLflow metrics: drift, agreement, kappa, n and the signed drift, those it has."""
    metrics = {f"diagonal/{k}": result[k] for k in ("drift", "agreement", "kappa", "n") if result[k] is not None}
    if result["signed_drift"]["mean"] is not None:
        metrics["diagonal/signed_drift"] = result["signed_drift"]["mean"]
    return metrics


def cmd_diagonal(args: argparse.Namespace) -> int:
    spec = read_job_spec(args.spec, READS["diagonal"])
    evaluate = EvaluateConfig(**spec["evaluate"])
    first, second = (json.loads(Path(p).read_text()) for p in (args.first, args.second))
    if first["aggregate"]["generations"] != second["aggregate"]["generations"]:
        raise UsageError(
            f"{args.first} and {args.second} scored different generations "
            f"({first['aggregate']['generations']} vs {second['aggregate']['generations']}): no diagonal check"
        )
    result = _diagonal(first, second, evaluate)
    result["generations"] = first["aggregate"]["generations"]
    result["scores"] = [args.first, args.second]
    write_json(args.out, result)
    settings = MlflowSettings(tracking_uri=args.tracking_uri, experiment=args.experiment)
    tags = eval_tags(spec["series"], "diagonal", parent_run_id(args.run))
    with tracking.stage_run(settings, f"{spec['series']['id']}/diagonal", tags, given_spec(args.spec, spec)) as run:
        run.log_metrics(_diagonal_metrics(result))
        run.log_artifact(args.out)
    if str(spec["series"].get("checkpoint", "last")) == "last" and result["drift"] is not None:
        train_run = tracking.existing_run(settings, parent_run_id(args.run))
        if train_run is not None:  # the last checkpoint's drift beside the train run's test figures
            train_run.log_metrics({"test/drift": result["drift"]}, step=last_step(args.run))
    log.info(
        "diagonal %s: drift %s kappa %s: %s", result["scorers"], result["drift"], result["kappa"], result["verdict"]
    )
    return 0


def cmd_seed_diagonal(args: argparse.Namespace) -> int:
    """The diagonal check of an extra train seed's run: its greedy test answers (``test_accuracy.json``) scored by
    the two scorers of the eval series' diagonal, compared as ``chartrl diagonal`` compares them. MLflow:
    ``{series}/diagonal/seed{N}``."""
    spec = read_job_spec(args.spec, READS["seed-diagonal"])
    evaluate = EvaluateConfig(**spec["evaluate"])
    judge_config = JudgeConfig.from_dict(spec["judge"])
    records = json.loads(Path(args.test_accuracy).read_text())["test"]["items"]
    rows = {row.id: row for row in read_split(args.data)}
    inputs = test_answer_inputs(records, rows, args.test_accuracy)
    first, _ = score_inputs(inputs, args.test_accuracy, args.scorers[0], judge_config, evaluate.year_rule)
    second, judge = score_inputs(inputs, args.test_accuracy, args.scorers[1], judge_config, evaluate.year_rule)
    result = _diagonal(first, second, evaluate)
    result["generations"] = args.test_accuracy
    result["seed"] = args.extra_seed
    write_json(args.out, result)
    settings = MlflowSettings(tracking_uri=args.tracking_uri, experiment=args.experiment)
    tags = {**eval_tags(spec["series"], "diagonal", None), "seed": str(args.extra_seed)}
    name = f"{spec['series']['id']}/diagonal/seed{args.extra_seed}"
    params = given_spec(args.spec, spec)
    if judge is None:  # neither scorer asks a judge: the rule's spec leaves its settings out
        params.pop("judge")
    with tracking.stage_run(settings, name, tags, params) as run:
        run.log_metrics(_diagonal_metrics(result))
        run.log_artifact(args.out)
        if judge is not None:
            log_judge_usage(run, judge)
    log.info(
        "seed %s diagonal %s: drift %s: %s", args.extra_seed, result["scorers"], result["drift"], result["verdict"]
    )
    return 0


def register(stages: argparse._SubParsersAction) -> None:
    common = eval_arguments()

    score = stages.add_parser("score", parents=[common], help="score generations with one scorer")
    score.add_argument("--scorer", required=True, choices=sorted(SCORER_JUDGES))
    score.add_argument("--generations", required=True)
    score.add_argument("--out", required=True, help="scores_{scorer}.json")
    score.add_argument(
        "--matrix",
        action="store_true",
        help="a cell of the reward x scorer matrix: any scorer, not only the series' own (MLflow run "
        "{series}/matrix/{scorer})",
    )
    score.set_defaults(func=cmd_score)

    diag = stages.add_parser("diagonal", parents=[common], help="compare two scorers on the same generations")
    diag.add_argument("--first", required=True, help="scores JSON of the first scorer (the rule)")
    diag.add_argument("--second", required=True, help="scores JSON of the second scorer (judge or panel)")
    diag.add_argument("--out", required=True, help="diagonal.json")
    diag.set_defaults(func=cmd_diagonal)

    seed_diag = stages.add_parser(
        "seed-diagonal", parents=[common], help="an extra train seed's diagonal check, of its greedy test answers"
    )
    seed_diag.add_argument("--test-accuracy", required=True, help="the seed's test_accuracy.json")
    seed_diag.add_argument("--data", required=True, help="the test split parquet (the questions)")
    seed_diag.add_argument(
        "--scorers", nargs=2, required=True, choices=["rule", "judge", "panel"], help="the diagonal's two scorers"
    )
    seed_diag.add_argument("--extra-seed", type=int, required=True, help="the train seed")
    seed_diag.add_argument("--out", required=True, help="results/seeds/{eval series}/seed{N}/diagonal.json")
    seed_diag.set_defaults(func=cmd_seed_diagonal)
