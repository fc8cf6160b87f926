"""One training run for bench_train, in its own process (so its peak RSS is its own): chartrl's trainer or TRL's
GRPOTrainer on the same model, questions, group size, completion length and reward, no tools (TRL's GRPOTrainer
has no two-pass image-tool loop), printing one JSON line with per-step wall times, tokens and peak RSS.

    python bench/train_peer.py {chartrl,trl} --model DIR --rows PARQUET --steps K --prompts P --n N --max-new-tokens T
        [--task {rule,format}] [--lr LR] [--warmup W] [--seed S] [--tools [--no-kv-reuse]]

Tasks: ``rule`` (the v1_rule reward: relaxed accuracy of the answer) and ``format`` (1 for a well-formed
``<answer>...</answer>`` response, else 0: the learning test's task, whose optimum is known). Both trainers get the
same learning rate, linear warm-up, AdamW betas (0.9, 0.98), gradient clipping and group size.

``--tools`` (chartrl only) trains a tool series (two-pass rollouts); ``--no-kv-reuse`` switches off
``rollout.kv_reuse`` (pass 2 re-prefills the whole conversation): bench_kv_reuse times a step both ways.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO  # noqa: E402

SERIES = {
    "id": "bench",
    "generation": "v1",
    "kind": "train",
    "tools": False,
    "reward": {"name": "v1_rule"},
    "algorithm": "grpo",
}


def format_reward(texts: list[str]) -> list[float]:
    from chartrl.answers import is_well_formed

    return [float(is_well_formed(t)) for t in texts]


def run_chartrl(args) -> dict:
    import torch

    from chartrl.config import JudgeConfig, MlflowSettings, PromptConfig, load_config, to_plain
    from chartrl.data.contract import read_split
    from chartrl.model.policy import load_policy
    from chartrl.rewards import build_reward
    from chartrl.train.trainer import Trainer, TrainJob

    torch.set_num_threads(2)
    config = load_config(root=REPO)
    import dataclasses

    from chartrl.commands.train import series_from

    train = dataclasses.replace(
        config.train,
        steps=args.steps,
        prompts_per_step=args.prompts,
        val_every=10_000,
        val_rows=2,
        checkpoint_every=10_000,
        micro_batch_size=args.prompts * args.n,
        lr=args.lr,
        lr_warmup_steps=args.warmup,
        kl_coef=0.0,  # TRL's beta 0: no reference model in either
        seed=args.seed,
    )
    rollout = dataclasses.replace(
        config.rollout,
        n=args.n,
        max_new_tokens=args.max_new_tokens,
        batch_size=args.prompts * args.n,
        kv_reuse=not args.no_kv_reuse,
    )
    series = {**SERIES, "tools": args.tools}
    rows = read_split(args.rows)
    with tempfile.TemporaryDirectory() as workdir:
        job = TrainJob(
            series=series_from(series, "x"),
            train=train,
            rollout=rollout,
            prompts=PromptConfig(**to_plain(config.resolved["prompts"])),
            tools=config.tools,
            spec={"series": series},
            run_dir=Path(workdir) / "run",
            mlflow=MlflowSettings(f"sqlite:///{workdir}/m.db", "bench"),
            base_model=args.model,
        )
        policy = load_policy(args.model, train=True)
        reward = build_reward("v1_rule", {}, JudgeConfig.from_dict({}))
        if args.task == "format":

            def reward(inputs):
                return [{"overall": r} for r in format_reward([i.response for i in inputs])]

        trainer = Trainer(job, policy, reward, rows, rows[:2])
        times, cpu_times, tokens, sampled, rewards = [], [], [], [], []
        for step in range(1, args.steps + 1):
            started, cpu_started = time.perf_counter(), time.process_time()
            metrics = trainer.train_step(step)
            times.append(time.perf_counter() - started)
            cpu_times.append(time.process_time() - cpu_started)
            tokens.append(metrics["perf/tokens"])
            sampled.append(metrics["perf/sampled_tokens"])
            rewards.append(metrics["reward/overall"])
    return {
        "step_seconds": times,
        "step_cpu_seconds": cpu_times,
        "tokens": tokens,
        "sampled_tokens": sampled,
        "reward": rewards,
    }


def run_trl(args) -> dict:
    import io

    import datasets
    import torch
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from chartrl.config import PromptConfig, load_config, to_plain
    from chartrl.data.contract import read_split
    from chartrl.rewards import RewardInput, get_reward
    from chartrl.rollout.conversation import prompt_text

    torch.set_num_threads(2)
    config = load_config(root=REPO)
    prompts = PromptConfig(**to_plain(config.resolved["prompts"]))
    rows = read_split(args.rows)
    rows = [rows[i % len(rows)] for i in range(args.prompts * args.steps)]
    records = {
        "prompt": [
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "image"},
                        {
                            "type": "text",
                            "text": prompt_text(r, with_tools=False, prompt_config=prompts, tool_names=()),
                        },
                    ],
                }
            ]
            for r in rows
        ],
        "image": [Image.open(io.BytesIO(r.images[0])).convert("RGB") for r in rows],
        "truth": [r.answer for r in rows],
    }
    dataset = datasets.Dataset.from_dict(records)
    rule = get_reward("v1_rule", {})

    def v1_rule(prompts, completions, truth, **kwargs):
        texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
        if args.task == "format":
            return format_reward(texts)
        return [
            s["overall"]
            for s in rule([RewardInput(response=t, ground_truth=g) for t, g in zip(texts, truth, strict=True)])
        ]

    class StepTimes(TrainerCallback):
        def __init__(self):
            self.times, self.started = [], None

        def on_step_begin(self, args_, state, control, **kwargs):
            self.started = time.perf_counter()

        def on_step_end(self, args_, state, control, **kwargs):
            self.times.append(time.perf_counter() - self.started)

    timer = StepTimes()
    with tempfile.TemporaryDirectory() as workdir:
        trainer = GRPOTrainer(
            model=AutoModelForImageTextToText.from_pretrained(args.model),
            processing_class=AutoProcessor.from_pretrained(args.model),
            reward_funcs=v1_rule,
            train_dataset=dataset,
            args=GRPOConfig(
                output_dir=workdir,
                use_cpu=True,
                max_steps=args.steps,
                per_device_train_batch_size=args.prompts * args.n,
                num_generations=args.n,
                max_completion_length=args.max_new_tokens,
                temperature=1.0,
                top_k=0,
                learning_rate=args.lr,
                lr_scheduler_type="constant_with_warmup",
                warmup_steps=args.warmup,
                adam_beta2=0.98,
                max_grad_norm=1.0,
                beta=0.0,
                loss_type="dapo",
                logging_steps=1,
                report_to=[],
                save_strategy="no",
                bf16=False,
                dataloader_num_workers=0,
                seed=args.seed,
            ),
            callbacks=[timer],
        )
        trainer.train()
        logged = [h for h in trainer.state.log_history if "completions/mean_length" in h]
    lengths = [h["completions/mean_length"] for h in logged]
    return {
        "step_seconds": timer.times,
        "mean_completion_length": lengths,
        # TRL logs the mean completion length over the step's prompts x n completions
        "sampled_tokens": [length * args.prompts * args.n for length in lengths],
        "reward": [h["reward"] for h in logged],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("which", choices=["chartrl", "trl"])
    parser.add_argument("--model", required=True)
    parser.add_argument("--rows", required=True)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--task", choices=["rule", "format"], default="rule")
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--warmup", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tools", action="store_true", help="chartrl only: a tool series (two-pass rollouts)")
    parser.add_argument("--no-kv-reuse", action="store_true", help="chartrl only: rollout.kv_reuse off")
    args = parser.parse_args()
    result = run_chartrl(args) if args.which == "chartrl" else run_trl(args)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
