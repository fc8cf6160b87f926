"""``chartrl generate``: the generations of the checkpoint an eval series names, on the test split (the generate
rule); MLflow run ``{series}/generate``, nested under the train series' run."""

from __future__ import annotations

import argparse
from pathlib import Path

from chartrl import tracking
from chartrl.commands.runs import eval_arguments, eval_tags, parent_run_id
from chartrl.commands.spec import Reads, given_spec, read_job_spec
from chartrl.config import EvaluateConfig, MlflowSettings, PromptConfig, RolloutConfig, tools_config
from chartrl.data.contract import read_split
from chartrl.evaluate.checkpoints import resolve_checkpoint
from chartrl.evaluate.generate import generate
from chartrl.model.policy import load_policy
from chartrl.threads import use_threads

HOLDS = "the eval series (with its id) and its train series (of), as the evaluate rules write them"
READS = {
    "generate": Reads(
        "generate",
        sections=("rollout", "prompts", "tools"),
        keys={"evaluate": ("n", "greedy", "limit", "seed", "gallery_size", "threads")},
        entries=("series", "of"),
        with_ids=("series",),
        holds=HOLDS,
    ),
}


def cmd_generate(args: argparse.Namespace) -> int:
    spec = read_job_spec(args.spec, READS["generate"])
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


def register(stages: argparse._SubParsersAction) -> None:
    generate_parser = stages.add_parser(
        "generate", parents=[eval_arguments()], help="generations of a checkpoint on the test split"
    )
    generate_parser.add_argument("--data", required=True, help="the test split parquet")
    generate_parser.add_argument("--out", required=True, help="generations.parquet")
    generate_parser.add_argument("--gallery", required=True, help="gallery PNG")
    generate_parser.set_defaults(func=cmd_generate)
