"""``chartrl test-accuracy`` and ``chartrl test-curve``: a train run's test accuracy per question type next to its
controls, and the greedy test accuracy of every checkpoint it kept, as the evaluate rules call them."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from chartrl import tracking
from chartrl.commands.runs import eval_arguments, last_step, parent_run_id
from chartrl.commands.spec import Reads, given_spec, read_job_spec
from chartrl.config import EvaluateConfig, MlflowSettings, PromptConfig, RolloutConfig, tools_config
from chartrl.data.contract import read_split
from chartrl.errors import UsageError
from chartrl.evaluate.accuracy import CONDITIONS, test_accuracy
from chartrl.evaluate.checkpoints import resolve_checkpoint
from chartrl.evaluate.curve import chosen_steps, test_curve
from chartrl.files import write_json
from chartrl.model.policy import load_policy
from chartrl.threads import use_threads

ROLLOUT = ("rollout", "prompts", "tools")
READS = {
    "test-accuracy": Reads(
        "test-accuracy",
        sections=ROLLOUT,
        keys={"evaluate": ("limit", "seed", "year_rule", "threads")},
        entries=("series",),
        with_ids=("series",),
        holds="the train series (with its id, or warmstart), as the test_accuracy rules write it",
    ),
    "test-curve": Reads(
        "test-curve",
        sections=ROLLOUT,
        keys={"evaluate": ("limit", "curve_rows", "seed", "year_rule", "threads")},
        entries=("series", "chosen"),
        with_ids=("series",),
        holds="the train series (with its id) and the checkpoint each eval series of it names, as the test_curve "
        "rule writes it",
    ),
}


SEED_CONDITIONS = ("test", "test_shuffled_images", "test_sampled")
"""An extra train seed's test conditions: what the hypotheses and the spread over seeds read (the tool-placebo
control is the main run's, in the report's test curves)."""


def cmd_test_accuracy(args: argparse.Namespace) -> int:
    """A train series' last checkpoint (``--run``) or a model folder (``--model``, the warm-started base) on the
    test split: accuracy per question type next to the shuffled-image control, the sampled rerun and, for a tool
    policy's main run, the tool-placebo control (chartrl.evaluate.accuracy; an extra seed's run: SEED_CONDITIONS).

    The numbers are also logged as metrics on the run ``{series}/test`` (``/seed{N}`` for an extra seed,
    ``/tools_{on|off}`` when ``--tools`` forces the setting), at the checkpoint's step, nested under the train run
    it read: a later stage with its own inputs (the test split, evaluate settings), rerun on its own, whose rerun
    supersedes its run. The headline figures (:func:`headline_test_metrics`) and the test split are added to the
    train run too, at the same step, so the runs table compares the train runs on test; a rerun adds a newer value
    there, which the table shows."""

    if (args.run is None) == (args.model is None):
        raise UsageError("give exactly one of --run (a train series' run.json) and --model (a model folder)")
    spec = read_job_spec(args.spec, READS["test-accuracy"])
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
        conditions=SEED_CONDITIONS if args.extra_seed is not None else CONDITIONS,
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

    spec = read_job_spec(args.spec, READS["test-curve"])
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


def register(stages: argparse._SubParsersAction) -> None:
    common = eval_arguments()

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
