"""``chartrl train``: train one series on the local backend (GRPO / Dr.GRPO), resuming from its checkpoints."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from chartrl.commands.spec import Reads, given_spec, read_job_spec, series_from
from chartrl.config import (
    ConfigError,
    JudgeConfig,
    MlflowSettings,
    PromptConfig,
    RolloutConfig,
    tools_config,
    train_config,
)
from chartrl.data.contract import read_split
from chartrl.errors import UsageError
from chartrl.model.policy import load_policy
from chartrl.rewards import accuracy_signal, build_reward
from chartrl.threads import use_threads
from chartrl.train.trainer import Trainer, TrainJob, check_setup

log = logging.getLogger(__name__)
READS = {
    # the series' own train and judge keys are in its train and judge sections; judge: given only when the
    # series' reward judges (a rule-graded series reads none of it)
    "train": Reads(
        "train",
        sections=("train", "rollout", "prompts", "tools", "judge"),
        entries=("series",),
        with_ids=("series",),
        holds="the series (with its id), as the train rule writes it",
    ),
}


def freeze_vision_tower(model) -> int:
    """Turn off training of every vision-tower parameter (Qwen2.5-VL's ``visual`` module, under PEFT too); returns
    how many tensors were frozen. A model without one is an error: the setting would silently do nothing."""
    frozen = 0
    for name, parameter in model.named_parameters():
        if ".visual." in f".{name}" and parameter.requires_grad:
            parameter.requires_grad_(False)
            frozen += 1
    if not any(".visual." in f".{name}" for name, _ in model.named_parameters()):
        raise ConfigError("train.lora.freeze_vision_tower: the model has no `visual` module to freeze")
    return frozen


def train_job(
    spec: dict,
    *,
    logged: dict,
    run_dir: Path,
    mlflow: MlflowSettings,
    base_model: str,
    inputs: dict[str, Path],
    extra_seed: bool = False,
) -> TrainJob:
    """The job a train spec (``read_job_spec(..., READS["train"])``) describes; ``logged``: the spec as the job's
    params and key hold it."""
    train = train_config(spec["train"])
    return TrainJob(
        series=series_from(spec["series"], train.dataset),
        train=train,
        rollout=RolloutConfig(**spec["rollout"]),
        prompts=PromptConfig(**spec["prompts"]),
        tools=tools_config(spec["tools"]),
        spec=logged,
        keep_steps=tuple(spec.get("keep_steps", ())),
        run_dir=run_dir,
        mlflow=mlflow,
        base_model=base_model,
        inputs=inputs,
        extra_seed=extra_seed,
    )


def job_trainer(job: TrainJob, judge: dict) -> Trainer:
    """The trainer of ``job``: its starting model (LoRA and a frozen vision tower as its train section says), its
    splits, checked (:func:`check_setup`), and its reward (``judge``: the spec's judge section)."""
    train = job.train
    policy = load_policy(job.base_model, train=True)
    if train.lora.enabled:
        from peft import LoraConfig, get_peft_model

        policy.model = get_peft_model(
            policy.model,
            LoraConfig(
                r=train.lora.r,
                lora_alpha=train.lora.alpha,
                lora_dropout=train.lora.dropout,
                target_modules=train.lora.targets,
                exclude_modules=train.lora.exclude_modules,
            ),
        )
    if train.lora.freeze_vision_tower:
        frozen = freeze_vision_tower(policy.model)
        log.info("vision tower frozen: %d parameter tensors", frozen)
    train_rows, val_rows = read_split(job.inputs["train"]), read_split(job.inputs["val"])
    check_setup(job, policy, train_rows, val_rows)
    reward = build_reward(job.series.reward.name, dict(job.series.reward.params), JudgeConfig.from_dict(judge))
    return Trainer(job, policy, reward, train_rows, val_rows)


def cmd_train(args: argparse.Namespace) -> int:
    spec = read_job_spec(args.spec, READS["train"])
    train = train_config(spec["train"])
    series = series_from(spec["series"], train.dataset)
    judged = accuracy_signal(series.reward.name, series.reward.params) in ("judge", "panel")
    # the job's params and key: the keys the rule gave, and the judge's settings only when its reward judges
    logged = given_spec(args.spec, {name: value for name, value in spec.items() if name != "judge" or judged})
    if args.extra_seed is not None and args.extra_seed != train.seed:
        raise UsageError(
            f"--extra-seed {args.extra_seed} is not the spec's train.seed ({train.seed}); the seeds rule writes both"
        )
    use_threads(train.threads)
    job = train_job(
        spec,
        logged=logged,
        run_dir=Path(args.out),
        mlflow=MlflowSettings(tracking_uri=args.tracking_uri, experiment=args.experiment),
        base_model=str(args.model),
        inputs={"train": Path(args.train), "val": Path(args.val)},
        extra_seed=args.extra_seed is not None,
    )
    summary = job_trainer(job, spec["judge"]).fit()
    log.info("%s trained: last step %d, best val %s", series.id, summary["last_step"], summary["best_val"])
    return 0


def register(stages: argparse._SubParsersAction) -> None:
    train = stages.add_parser("train", help="train one series (local backend: GRPO / Dr.GRPO)")
    train.add_argument("--spec", required=True, help="JSON: the series (with id) and the train/rollout/... sections")
    train.add_argument("--model", required=True, help="the starting model folder")
    train.add_argument("--train", required=True, help="train split parquet")
    train.add_argument("--val", required=True, help="val split parquet")
    train.add_argument("--out", required=True, help="results/runs/{series}: checkpoints, metrics.jsonl, run.json")
    train.add_argument("--tracking-uri", default="sqlite:///results/mlflow.db")
    train.add_argument("--experiment", default="chartrl")
    train.add_argument(
        "--extra-seed",
        type=int,
        default=None,
        help="this is an extra seed's run (extra_seeds; the spec's train.seed): MLflow run {series}/train/seed{N}",
    )
    train.set_defaults(func=cmd_train)
