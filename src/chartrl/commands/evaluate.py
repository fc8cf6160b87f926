"""``chartrl generate``, ``chartrl score``, ``chartrl diagonal``: test evaluation, as the evaluate rules call it.

MLflow: each job is a run nested under the train series' run (``mlflow.parentRunId`` from its run.json):
``{series}/generate``, ``{series}/score``, ``{series}/diagonal``.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
from pathlib import Path
from typing import Any

from chartrl.commands.spec import given_spec, read_job_spec
from chartrl.config import EvaluateConfig, MlflowSettings, PromptConfig, RolloutConfig, tools_config
from chartrl.errors import UsageError
from chartrl.threads import use_threads

log = logging.getLogger(__name__)


def eval_spec(text: str, sections: tuple[str, ...]) -> dict[str, Any]:
    """An evaluation job's spec: the eval series (with its id), its train series (``of``) and ``sections``."""
    holds = "the eval series (with its id), as the evaluate rules write it"
    return read_job_spec(text, sections, entries=("series", "of"), with_ids=("series",), holds=holds)


def eval_tags(series: dict[str, Any], stage: str, parent: str | None) -> dict[str, str]:
    from chartrl.tracking import eval_run_tags

    return eval_run_tags(series, stage, parent, backend="local")


def parent_run_id(run_json: str | None) -> str | None:
    return json.loads(Path(run_json).read_text()).get("mlflow_run_id") if run_json else None


def last_step(run_json: str | Path) -> int:
    """The train run's last step (its run.json), the step its headline test figures are logged at."""
    return int(json.loads(Path(run_json).read_text()).get("last_step") or 0)


def cmd_generate(args: argparse.Namespace) -> int:
    from chartrl import tracking
    from chartrl.data.contract import read_split
    from chartrl.evaluate.checkpoints import resolve_checkpoint
    from chartrl.evaluate.generate import generate
    from chartrl.model.policy import load_policy

    spec = eval_spec(args.spec, ("evaluate", "rollout", "prompts", "tools"))
    series, of = spec["series"], spec["of"]
    evaluate = EvaluateConfig(**spec["evaluate"])
    use_threads(evaluate.threads)
    checkpoint = resolve_checkpoint(Path(args.run), series.get("checkpoint", "last"))
    policy = load_policy(checkpoint)
    settings = MlflowSettings(tracking_uri=args.tracking_uri, experiment=args.experiment)
    with tracking.stage_run(
        settings,
        f"{series['id']}/generate",
        eval_tags(series, "generate", parent_run_id(args.run)),
        given_spec(args.spec, spec),
    ) as run:
        summary = generate(
            policy,
            read_split(args.data),
            with_tools=bool(of.get("tools")),
            evaluate=evaluate,
            rollout=RolloutConfig(**spec["rollout"]),
            prompts=PromptConfig(**spec["prompts"]),
            tools=tools_config(spec["tools"]),
            out=Path(args.out),
            gallery=Path(args.gallery),
            model_label=str(checkpoint),
        )
        run.log_splits({"test": args.data})
        run.log_metrics({f"generate/{k}": v for k, v in summary.items()})
        run.log_artifact(args.gallery)
    return 0


def cmd_test_accuracy(args: argparse.Namespace) -> int:
    """A train series' last checkpoint (``--run``) or a model folder (``--model``, the warm-started base) on the
    test split: accuracy per question type next to the shuffled-image control, the sampled rerun and, for a tool
    policy, the tool-placebo control (chartrl.evaluate.accuracy).

    The numbers are also logged as metrics on the run ``{series}/test`` (``/seed{N}`` for an extra seed,
    ``/tools_{on|off}`` when ``--tools`` forces the setting), at the checkpoint's step, nested under the train run
    it read: a later stage with its own inputs (the test split, evaluate settings), rerun on its own, whose rerun
    supersedes its run. The headline figures (:func:`headline_test_metrics`) and the test split are added to the
    train run too, at the same step, so the runs table compares the train runs on test; a rerun adds a newer value
    there, which the table shows."""

    from chartrl import tracking
    from chartrl.data.contract import read_split
    from chartrl.evaluate.accuracy import test_accuracy
    from chartrl.evaluate.checkpoints import resolve_checkpoint
    from chartrl.files import write_json
    from chartrl.model.policy import load_policy

    if (args.run is None) == (args.model is None):
        raise UsageError("give exactly one of --run (a train series' run.json) and --model (a model folder)")
    spec = eval_spec(args.spec, ("evaluate", "rollout", "prompts", "tools"))
    evaluate, rollout = EvaluateConfig(**spec["evaluate"]), RolloutConfig(**spec["rollout"])
    use_threads(evaluate.threads)
    model = str(resolve_checkpoint(Path(args.run), "last")) if args.run else args.model
    with_tools = bool(spec["series"].get("tools")) if args.tools is None else args.tools == "on"
    rows = read_split(args.data)
    rows = rows[: evaluate.limit] if evaluate.limit else rows
    result = test_accuracy(
        load_policy(model),
        rows,
        with_tools=with_tools,
        prompts=PromptConfig(**spec["prompts"]),
        tools=tools_config(spec["tools"]),
        max_new_tokens=rollout.max_new_tokens,
        batch_size=rollout.batch_size,
        seed=evaluate.seed,
        temperature=rollout.temperature,
        kv_reuse=rollout.kv_reuse,
        year_rule=evaluate.year_rule,
    )
    write_json(args.out, {"series": spec["series"]["id"], "model": model, **result})
    settings = MlflowSettings(tracking_uri=args.tracking_uri, experiment=args.experiment)
    series = spec["series"]
    name = tracking.test_run_name(series["id"], args.extra_seed, args.tools)
    tags = tracking.test_run_tags(series, with_tools, parent_run_id(args.run), args.extra_seed)
    step = last_step(args.run) if args.run else 0  # the checkpoint's step, so grouped charts line the runs up
    with tracking.stage_run(settings, name, tags, given_spec(args.spec, spec)) as run:
        run.log_splits({"test": args.data})
        run.log_metrics(test_accuracy_metrics(result), step=step)
        run.log_artifact(args.out)
    train_run = tracking.existing_run(settings, parent_run_id(args.run)) if args.tools is None else None
    if train_run is not None:  # the series' own setting on its last checkpoint: its headline figures
        train_run.log_splits({"test": args.data})
        train_run.log_metrics(headline_test_metrics(result), step=step)
    return 0


def cmd_test_curve(args: argparse.Namespace) -> int:
    """Greedy test accuracy of every checkpoint a train series kept (``--run``), on the first
    ``evaluate.curve_rows`` test questions (chartrl.evaluate.curve): ``--last`` (its test_accuracy.json) stands
    for the last checkpoint and ``--start`` (the warm start's, when the run trained from it) for step 0. MLflow:
    ``test_curve/accuracy`` per step on the run ``{series}/test_curve``, nested under the train run."""

    from chartrl import tracking
    from chartrl.data.contract import read_split
    from chartrl.evaluate.accuracy import test_accuracy
    from chartrl.evaluate.curve import chosen_steps, test_curve
    from chartrl.files import write_json
    from chartrl.model.policy import load_policy

    spec = read_job_spec(
        args.spec,
        ("evaluate", "rollout", "prompts", "tools"),
        entries=("series", "chosen"),
        with_ids=("series",),
        holds="the train series (with its id) and the checkpoint each eval series of it names, as rules/evaluate.smk "
        "writes it",
    )
    evaluate, rollout = EvaluateConfig(**spec["evaluate"]), RolloutConfig(**spec["rollout"])
    use_threads(evaluate.threads)
    rows = read_split(args.data)
    rows = (rows[: evaluate.limit] if evaluate.limit else rows)[: evaluate.curve_rows]
    series = spec["series"]
    with_tools = bool(series.get("tools"))
    run_json = Path(args.run)
    last = json.loads(run_json.read_text())["last_step"]
    reuse = {int(last): Path(args.last), **({0: Path(args.start)} if args.start else {})}

    def evaluate_checkpoint(folder: Path, subset):
        result = test_accuracy(
            load_policy(folder),
            subset,
            with_tools=with_tools,
            prompts=PromptConfig(**spec["prompts"]),
            tools=tools_config(spec["tools"]),
            max_new_tokens=rollout.max_new_tokens,
            batch_size=rollout.batch_size,
            seed=evaluate.seed,
            kv_reuse=rollout.kv_reuse,
            year_rule=evaluate.year_rule,
            conditions=("test",),
        )
        return result["test"]["items"]

    curve = test_curve(
        run_json,
        rows,
        reuse=reuse,
        chosen=chosen_steps(run_json, spec["chosen"]),
        year_rule=evaluate.year_rule,
        evaluate_checkpoint=evaluate_checkpoint,
    )
    write_json(args.out, {"series": series["id"], "with_tools": with_tools, **curve})
    settings = MlflowSettings(tracking_uri=args.tracking_uri, experiment=args.experiment)
    tags = {**tracking.test_run_tags(series, with_tools, parent_run_id(args.run), None), "stage": "test_curve"}
    with tracking.stage_run(settings, f"{series['id']}/test_curve", tags, given_spec(args.spec, spec)) as run:
        run.log_splits({"test": args.data})
        for point in curve["points"]:
            run.log_metrics({"test_curve/accuracy": point["accuracy"], "test_curve/n": point["n"]}, step=point["step"])
        run.log_artifact(args.out)
    return 0


METRIC_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_\-. /:]")
"""What MLflow refuses in a metric key (question types come from the data)."""


def test_accuracy_metrics(result: dict[str, Any]) -> dict[str, float]:
    """``{condition}/accuracy``, ``{condition}/accuracy_{question type}``, ``{condition}/n`` and the format,
    tool-call and correct-label rates, for each condition (test, test_shuffled_images, test_sampled, test_placebo)."""
    from chartrl.evaluate.accuracy import CONDITIONS

    metrics: dict[str, float] = {}
    for condition in CONDITIONS:
        summary = result.get(condition)
        if summary is None:
            continue
        for key in ("accuracy", "n", "format_rate", "tool_call_rate", "correct_label_share"):
            if summary.get(key) is not None:
                metrics[f"{condition}/{key}"] = summary[key]
        for question_type, value in summary["accuracy_by_question_type"].items():
            metrics[f"{condition}/accuracy_{METRIC_KEY_UNSAFE.sub('_', question_type)}"] = value
    return metrics


HEADLINE_NAMES = {"tool_call_rate": "tool_call_ratio", "correct_label_share": "correct_label_ratio"}
"""The test condition's figures under the names the train run's ``val/`` metrics have."""


def headline_test_metrics(result: dict[str, Any]) -> dict[str, float]:
    """What the train run carries of its test accuracy: ``test/accuracy``, ``test/accuracy_{question type}``,
    ``test/n``, ``test/format_rate``, ``test/tool_call_ratio``, ``test/correct_label_ratio`` (greedy, the series'
    tool setting) and the shuffled-image control's ``test_shuffled_images/accuracy``."""
    metrics = {}
    for key, value in test_accuracy_metrics(result).items():
        condition, name = key.split("/", 1)
        if condition == "test":
            metrics[f"test/{HEADLINE_NAMES.get(name, name)}"] = value
        elif key == "test_shuffled_images/accuracy":
            metrics[key] = value
    return metrics


def cmd_score(args: argparse.Namespace) -> int:
    from chartrl import tracking
    from chartrl.config import JudgeConfig
    from chartrl.evaluate.score import score_generations
    from chartrl.files import write_json
    from chartrl.judge import log_judge_usage

    spec = eval_spec(args.spec, ("judge", "evaluate"))
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
        run.log_metrics(metrics)
        if judge is not None:
            log_judge_usage(run, judge)
        run.log_artifact(args.out)
    log.info("%s %s accuracy %s over %d items", series["id"], args.scorer, aggregate["accuracy"], aggregate["n"])
    return 0


def cmd_diagonal(args: argparse.Namespace) -> int:
    from chartrl import tracking
    from chartrl.evaluate.diagonal import diagonal
    from chartrl.files import write_json

    spec = eval_spec(args.spec, ("evaluate",))
    evaluate = EvaluateConfig(**spec["evaluate"])
    first, second = (json.loads(Path(p).read_text()) for p in (args.first, args.second))
    if first["aggregate"]["generations"] != second["aggregate"]["generations"]:
        raise UsageError(
            f"{args.first} and {args.second} scored different generations "
            f"({first['aggregate']['generations']} vs {second['aggregate']['generations']}): no diagonal check"
        )
    result = diagonal(
        first,
        second,
        samples=evaluate.bootstrap_samples,
        confidence=evaluate.confidence,
        seed=evaluate.seed,
        hacking_drift=evaluate.hacking_drift,
    )
    result["generations"] = first["aggregate"]["generations"]
    result["scores"] = [args.first, args.second]
    write_json(args.out, result)
    settings = MlflowSettings(tracking_uri=args.tracking_uri, experiment=args.experiment)
    tags = eval_tags(spec["series"], "diagonal", parent_run_id(args.run))
    with tracking.stage_run(settings, f"{spec['series']['id']}/diagonal", tags, given_spec(args.spec, spec)) as run:
        metrics = {f"diagonal/{k}": result[k] for k in ("drift", "agreement", "kappa", "n") if result[k] is not None}
        if result["signed_drift"]["mean"] is not None:
            metrics["diagonal/signed_drift"] = result["signed_drift"]["mean"]
        run.log_metrics(metrics)
        run.log_artifact(args.out)
    if str(spec["series"].get("checkpoint", "last")) == "last" and result["drift"] is not None:
        train_run = tracking.existing_run(settings, parent_run_id(args.run))
        if train_run is not None:  # the last checkpoint's drift beside the train run's test figures
            train_run.log_metrics({"test/drift": result["drift"]}, step=last_step(args.run))
    log.info(
        "diagonal %s: drift %s kappa %s: %s", result["scorers"], result["drift"], result["kappa"], result["verdict"]
    )
    return 0


def eval_arguments() -> argparse.ArgumentParser:
    """The arguments every evaluation command takes (a parent parser): the job spec, the run, MLflow."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--spec", required=True, help="JSON: the eval series (with id), its train series and sections")
    common.add_argument("--run", default=None, help="the train series' run.json (checkpoints, parent MLflow run)")
    common.add_argument("--tracking-uri", default="sqlite:///results/mlflow.db")
    common.add_argument("--experiment", default="chartrl")
    return common


def register(stages: argparse._SubParsersAction) -> None:
    common = eval_arguments()

    generate = stages.add_parser("generate", parents=[common], help="generations of a checkpoint on the test split")
    generate.add_argument("--data", required=True, help="the test split parquet")
    generate.add_argument("--out", required=True, help="generations.parquet")
    generate.add_argument("--gallery", required=True, help="gallery PNG")
    generate.set_defaults(func=cmd_generate)

    test = stages.add_parser(
        "test-accuracy", parents=[common], help="accuracy per question type on test, with the shuffled control"
    )
    test.add_argument("--model", default=None, help="a model folder (instead of --run)")
    test.add_argument("--tools", choices=["on", "off"], default=None, help="overrides the series' tools setting")
    test.add_argument("--data", required=True, help="the test split parquet")
    test.add_argument("--out", required=True, help="test_accuracy.json")
    test.add_argument(
        "--extra-seed", type=int, default=None, help="the run read is an extra seed's: MLflow run {series}/test/seed{N}"
    )
    test.set_defaults(func=cmd_test_accuracy)

    curve = stages.add_parser(
        "test-curve", parents=[common], help="greedy test accuracy of every checkpoint a train series kept"
    )
    curve.add_argument("--data", required=True, help="the test split parquet")
    curve.add_argument("--last", required=True, help="the series' test_accuracy.json: stands for its last checkpoint")
    curve.add_argument("--start", default=None, help="the warm start's test_accuracy_tools_{on,off}.json: step 0")
    curve.add_argument("--out", required=True, help="test_curve.json")
    curve.set_defaults(func=cmd_test_curve)

    score = stages.add_parser("score", parents=[common], help="score generations with one scorer")
    score.add_argument("--scorer", required=True, choices=["rule", "judge", "panel", "r1v", "multiple_choice"])
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
