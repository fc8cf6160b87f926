"""``chartrl rerank`` and ``chartrl rerank-score``: best-of-N reranking at test time (chartrl.evaluate.rerank), as
the rules ``rerank`` and ``rerank_score`` call them.

MLflow: ``{series}/rerank`` (the sampling) and ``{series}/rerank/{scorer}`` (each method's accuracy, interval, gap
to greedy and costs), nested under the train series' run.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from chartrl import tracking
from chartrl.commands.runs import eval_arguments, eval_tags, parent_run_id
from chartrl.commands.spec import Reads, given_spec, read_job_spec
from chartrl.config import (
    EvaluateConfig,
    JudgeConfig,
    MlflowSettings,
    PromptConfig,
    RerankConfig,
    RolloutConfig,
    tools_config,
)
from chartrl.data.contract import read_split
from chartrl.errors import UsageError
from chartrl.evaluate.checkpoints import resolve_checkpoint
from chartrl.evaluate.rerank import charts_by_id, rerank_scores, sample_responses
from chartrl.files import write_json
from chartrl.judge import judge_for_accuracy, log_judge_usage
from chartrl.judge.prm import OpenAIScorer
from chartrl.model.policy import load_policy
from chartrl.threads import use_threads

log = logging.getLogger(__name__)
HOLDS = "the eval series (with its id) and its train series (of), as the rerank rules write them"
READS = {
    # the series' rerank settings say the rest
    "rerank": Reads(
        "rerank",
        sections=("rollout", "prompts", "tools"),
        keys={"evaluate": ("limit", "threads")},
        entries=("series", "of"),
        with_ids=("series",),
        holds=HOLDS,
    ),
    # judge: given only for a scorer that judges
    "rerank-score": Reads(
        "rerank-score",
        sections=("judge",),
        keys={"evaluate": ("bootstrap_samples", "confidence", "seed", "greedy")},
        entries=("series", "of"),
        with_ids=("series",),
        holds=HOLDS,
    ),
}


def _rerank_of(series: dict[str, Any]) -> RerankConfig:
    if not series.get("rerank"):
        raise UsageError(f"series {series['id']} sets no rerank (add rerank: {{n: N, by: [...]}} to the series)")
    return RerankConfig.from_dict(series["rerank"])


def cmd_rerank(args: argparse.Namespace) -> int:
    spec = read_job_spec(args.spec, READS["rerank"])
    series, of = spec["series"], spec["of"]
    rerank = _rerank_of(series)
    evaluate = EvaluateConfig(**spec["evaluate"])
    use_threads(evaluate.threads)
    checkpoint = resolve_checkpoint(Path(args.run), series.get("checkpoint", "last"))
    settings = MlflowSettings(tracking_uri=args.tracking_uri, experiment=args.experiment)
    tags = eval_tags(series, "rerank", parent_run_id(args.run))
    with tracking.stage_run(settings, f"{series['id']}/rerank", tags, given_spec(args.spec, spec)) as run:
        summary = sample_responses(
            load_policy(checkpoint),
            read_split(args.data),
            with_tools=bool(of.get("tools")),
            rerank=rerank,
            evaluate=evaluate,
            rollout=RolloutConfig(**spec["rollout"]),
            prompts=PromptConfig(**spec["prompts"]),
            tools=tools_config(spec["tools"]),
            out=Path(args.out),
        )
        run.log_metrics({f"rerank/{k}": v for k, v in summary.items()})
    return 0


def rerank_metrics(result: dict[str, Any]) -> dict[str, float]:
    """``rerank/{method}/accuracy``, ``/low``, ``/high``, ``/gap_vs_greedy`` and every numeric cost."""
    metrics: dict[str, float] = {}
    for method, values in result["methods"].items():
        for key in ("accuracy", "low", "high", "n"):
            if values.get(key) is not None:
                metrics[f"rerank/{method}/{key}"] = values[key]
        if values["gap_vs_greedy"]["mean"] is not None:
            metrics[f"rerank/{method}/gap_vs_greedy"] = values["gap_vs_greedy"]["mean"]
        for key, value in values["costs"].items():
            if isinstance(value, int | float):
                metrics[f"rerank/{method}/cost_{key}"] = value
    return metrics


def cmd_rerank_score(args: argparse.Namespace) -> int:
    import pyarrow.parquet as pq

    spec = read_job_spec(args.spec, READS["rerank-score"])
    series = spec["series"]
    if args.scorer not in series.get("scorers", []):
        raise UsageError(
            f"series {series['id']} does not use scorer {args.scorer!r} (its scorers: {series.get('scorers')})"
        )
    rerank = _rerank_of(series)
    evaluate = EvaluateConfig(**spec["evaluate"])
    judge_config = JudgeConfig.from_dict(spec["judge"])
    judge = judge_for_accuracy(args.scorer, judge_config)
    external, charts = None, None
    if "scorer" in rerank.by:
        external = OpenAIScorer.from_rerank(rerank.scorer)
        ids = pq.read_table(args.samples, columns=["id"]).column("id").to_pylist()
        charts = charts_by_id(Path(args.data), ids)
    greedy = json.loads(Path(args.greedy_scores).read_text())
    table = pq.read_table(args.generations, columns=["id", "sample", "response_tokens"]).to_pylist()
    greedy_tokens = {r["id"]: r["response_tokens"] for r in table if r["sample"] == 0}
    result = rerank_scores(
        Path(args.samples),
        greedy,
        greedy_tokens,
        scorer_name=args.scorer,
        judge=judge,
        methods=rerank.by,
        external=external,
        charts=charts,
        bootstrap_samples=evaluate.bootstrap_samples,
        confidence=evaluate.confidence,
        seed=evaluate.seed,
        max_judge_failure_fraction=judge_config.max_judge_failure_fraction,
    )
    result.update(
        {
            "series": series["id"],
            "samples_file": args.samples,
            "greedy_scores": args.greedy_scores,
            "greedy": evaluate.greedy,
        }
    )
    write_json(args.out, result)
    settings = MlflowSettings(tracking_uri=args.tracking_uri, experiment=args.experiment)
    tags = {**eval_tags(series, "rerank_score", parent_run_id(args.run)), "scorer": args.scorer}
    params = given_spec(args.spec, spec)
    if judge is None:  # the rule scorer reads none of the judge's settings (the rule's spec leaves them out)
        params.pop("judge")
    with tracking.stage_run(settings, f"{series['id']}/rerank/{args.scorer}", tags, params) as run:
        run.log_metrics(rerank_metrics(result))
        if judge is not None:
            log_judge_usage(run, judge)
        if external is not None:
            log_judge_usage(run, external, prefix="rerank_scorer")
        run.log_artifact(args.out)
    for method, values in result["methods"].items():
        log.info(
            "%s %s %s: accuracy %s over %d questions",
            series["id"],
            args.scorer,
            method,
            values["accuracy"],
            values["n"],
        )
    return 0


def register(stages: argparse._SubParsersAction) -> None:
    common = eval_arguments()

    sample = stages.add_parser("rerank", parents=[common], help="N sampled responses per test question (best-of-N)")
    sample.add_argument("--data", required=True, help="the test split parquet")
    sample.add_argument("--out", required=True, help="rerank.parquet")
    sample.set_defaults(func=cmd_rerank)

    score = stages.add_parser("rerank-score", parents=[common], help="each rerank method's accuracy under a scorer")
    score.add_argument("--scorer", required=True, choices=["rule", "judge", "panel"])
    score.add_argument("--samples", required=True, help="rerank.parquet")
    score.add_argument("--greedy-scores", required=True, help="the series' scores_{scorer}.json")
    score.add_argument("--generations", required=True, help="the series' generations.parquet (greedy token counts)")
    score.add_argument("--data", required=True, help="the test split parquet (the charts, for the external scorer)")
    score.add_argument("--out", required=True, help="rerank_{scorer}.json")
    score.set_defaults(func=cmd_rerank_score)
