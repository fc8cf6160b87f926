"""The single-device trainer (backend ``local``): GRPO and Dr.GRPO on the two-pass rollout.

One step, as a recipe (EasyR1's ``fit`` shape: named, timed phases filling one flat metrics dict)::

    gen      sample prompts_per_step questions, roll each out rollout.n times (tools: two passes)
    reward   score every episode with the series' reward (training reward = evaluation function)
    adv      group advantages with verl's core_algos (std-normalised for grpo, mean-only for drgrpo)
    update   PPO-clip policy loss (verl), the algorithm's loss aggregation, optional KL to the start policy,
             micro-batches with gradient accumulation, gradient clipping
    val      every val_every steps (and before the first): greedy rollouts on validation questions; an extra
             seed's run (extra_seeds) validates at its last step only

Beside ``metrics.jsonl`` the run folder holds ``val_items.jsonl``: one line per validation step, each question's
greedy score (``{"step": N, "scores": {question id: 0 or 1}}``), so the report pairs validation accuracies on the
same questions across steps and series instead of treating them as independent proportions.

Sampling is seeded per step (seed, step), so a run killed at any point and restarted from its last checkpoint
redoes exactly the steps it lost: metrics.jsonl and val_items.jsonl are restored from the checkpoint, and MLflow
skips the steps it already holds.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import time
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from chartrl.config import MlflowSettings, PromptConfig, RolloutConfig, ToolsConfig, TrainConfig, TrainSeries
from chartrl.data.contract import Row
from chartrl.errors import ChartrlError
from chartrl.files import sole_writer, write_atomically, write_json
from chartrl.progress import Progress
from chartrl.rewards.registry import bonus_on_wrong
from chartrl.rollout.episodes import run_episodes
from chartrl.rollout.sampling import SamplingParams
from chartrl.tracking import end_status
from chartrl.train import checkpoints
from chartrl.train.algorithms import get_algorithm, group_advantages, kl_loss, policy_loss, policy_loss_config
from chartrl.train.batch import group_micro_batches, response_logprobs, update_batch
from chartrl.train.resume import job_key, set_aside
from chartrl.train.schedule import learning_rate

log = logging.getLogger(__name__)
PROGRESS_KEY = "reward/overall"  # logged every step: how a resumed run finds what MLflow already holds
VAL_ITEMS = "val_items.jsonl"
"""Per-question greedy validation scores, one line per validation step (written as metrics.jsonl is)."""


class SetupError(ChartrlError):
    """The trainer's inputs cannot work together; the message names the values and the fix."""

    exit_code = 2


@dataclass
class TrainJob:
    series: TrainSeries
    train: TrainConfig
    rollout: RolloutConfig
    prompts: PromptConfig
    tools: ToolsConfig
    spec: Mapping[str, Any]
    """The resolved config this job runs (logged as params; part of the key that decides what it resumes from)."""
    run_dir: Path
    mlflow: MlflowSettings
    base_model: str
    inputs: Mapping[str, Path] = field(default_factory=dict)
    """The data files the job reads by name (``train``, ``val``): their content is part of its key."""
    keep_steps: tuple[int, ...] = ()
    """Checkpoint steps an eval series names: never pruned."""
    extra_seed: bool = False
    """An extra seed's run (``extra_seeds``): its MLflow run is ``{series}/train/seed{N}``, beside the main run."""

    @property
    def run_name(self) -> str:
        from chartrl.tracking import train_run_name

        return train_run_name(self.series.id, self.train.seed if self.extra_seed else None)

    @cached_property
    def key(self) -> str:
        """What its checkpoints were computed from (``chartrl.train.resume``): the spec, the starting model's and
        the data files' content, the reward's code. Only checkpoints of the same key are resumed."""
        return job_key(self.spec, {"model": self.base_model, **self.inputs})

    @property
    def passes(self) -> int:
        return self.tools.max_tool_turns + 1 if self.series.tools else 1

    @property
    def max_response_tokens(self) -> int:
        """Dr.GRPO's constant divisor: the most tokens a response can sample (max_new_tokens per pass)."""
        return self.rollout.max_new_tokens * self.passes


@contextmanager
def timer(name: str, metrics: dict[str, float]):
    started = time.perf_counter()
    yield
    metrics[f"timing/{name}"] = time.perf_counter() - started


def reward_inputs(episodes: Sequence[Any]):
    from chartrl.rewards import RewardInput

    return [
        RewardInput(
            response=e.final_response,
            ground_truth=e.row.answer,
            question=e.row.extra.get("question", ""),
            data_source=e.row.data_source,
            subset=e.row.extra.get("subset", ""),
            tool_outcome=e.tool_outcome,
            tool_calls=len(e.tool_outcomes),
            response_tokens=e.sampled_tokens,
            id=f"{e.row.id}#{e.sample}",
        )
        for e in episodes
    ]


TRAIN_METRIC_NAMES = {
    "tool_call_rate": "tool_call_ratio",
    "executed_call_rate": "tool_success",
    "correct_label_rate": "correct_label_ratio",
    "format_rate": "format_rate",
    "mean_sampled_tokens": "response_length",
    "vision_tokens_sampled": "vision_tokens_sampled",
    "truncated_rate": "truncated_rate",
    "preamble_rate": "preamble_rate",
    "failed_call_rate": "failed_call_rate",
    "unhelpful_call_rate": "unhelpful_call_rate",
    "wrong_answer_tokens": "wrong_answer_length",
}
"""The rollout statistics (``chartrl.rollout.statistics``) the trainer logs, under the names its MLflow metrics
have (``rollout/...`` and ``val/...``, the names the report and verl's translated metrics share)."""


def tool_call_counts(episodes: Sequence[Any], prefix: str, max_tool_turns: int) -> dict[str, float]:
    """Tool calls per episode (``{prefix}/tool_calls``: the mean; ``_max``), the figure DeepEyes reports per step,
    logged when several tool turns are allowed (``tools.max_tool_turns`` > 1); with one turn an episode makes at
    most one call and ``tool_call_ratio`` already is that mean, so nothing is added."""
    if max_tool_turns <= 1 or not episodes:
        return {}
    counts = [len(e.tool_outcomes) for e in episodes]
    return {f"{prefix}/tool_calls": sum(counts) / len(counts), f"{prefix}/tool_calls_max": float(max(counts))}


def tool_metrics(episodes: Sequence[Any], prefix: str) -> dict[str, float]:
    """Per tool the episodes called: ``{prefix}/tools/{name}/calls`` (turns that called it), ``.../executed``
    (those that ran on the chart) and ``.../failed/{kind}`` (those that did not, by error kind: the tool refused
    the label, the call did not parse, no turn was left), counts over the step's episodes (the report sums them
    over a run)."""
    from chartrl.rollout.statistics import episode_tool_counts

    metrics = {}
    for name, count in episode_tool_counts(episodes).items():
        metrics[f"{prefix}/tools/{name}/calls"] = float(count["calls"])
        metrics[f"{prefix}/tools/{name}/executed"] = float(count["executed"])
        for kind, n in count["failed"].items():
            metrics[f"{prefix}/tools/{name}/failed/{kind}"] = float(n)
    return metrics


def rollout_metrics(episodes: Sequence[Any], prefix: str) -> dict[str, float]:
    from chartrl.answers import is_well_formed
    from chartrl.rollout.statistics import rollout_statistics

    statistics = {
        **rollout_statistics(episodes),
        "format_rate": sum(is_well_formed(e.final_response) for e in episodes) / len(episodes),
    }
    return {f"{prefix}/{name}": float(statistics[key]) for key, name in TRAIN_METRIC_NAMES.items()}


def check_setup(job: TrainJob, policy, train_rows: Sequence[Row], val_rows: Sequence[Row]) -> None:
    """Everything that would make the first rollout or update fail or be meaningless, before any work."""
    problems = []
    if job.rollout.n < 2:
        problems.append(
            f"rollout.n = {job.rollout.n}: a GRPO group of one response always has advantage 0; set rollout.n >= 2"
        )
    if job.train.prompts_per_step > len(train_rows):
        problems.append(
            f"train.prompts_per_step = {job.train.prompts_per_step} > {len(train_rows)} train questions; "
            "lower it or build a larger train split"
        )
    if not val_rows:
        problems.append("the validation split is empty; give the dataset a val split with rows")
    tokenizer = policy.tokenizer
    answer_tokens = max(
        len(tokenizer.encode(f"<answer>{row.answer}</answer>", add_special_tokens=False)) + 1 for row in train_rows
    )
    if answer_tokens > job.rollout.max_new_tokens:
        longest = max(train_rows, key=lambda r: len(r.answer)).answer
        problems.append(
            f"rollout.max_new_tokens = {job.rollout.max_new_tokens} cannot hold the longest answer "
            f"({answer_tokens} tokens with its tags, e.g. {longest!r}); raise rollout.max_new_tokens"
        )
    config = policy.model.config
    image_token = tokenizer.convert_tokens_to_ids("<|image_pad|>")
    if getattr(config, "image_token_id", image_token) != image_token:
        problems.append(
            f"model/processor mismatch: the model's image_token_id is {config.image_token_id} but the processor's "
            f"<|image_pad|> is {image_token}; load the processor saved with this model"
        )
    vocab = config.get_text_config().vocab_size
    if vocab < len(tokenizer):
        problems.append(f"model/processor mismatch: vocabulary {vocab} < tokenizer size {len(tokenizer)}")
    if problems:
        raise SetupError(f"series {job.series.id} cannot train:\n  " + "\n  ".join(problems))


class Trainer:
    def __init__(self, job: TrainJob, policy, reward, train_rows: Sequence[Row], val_rows: Sequence[Row]):
        import torch

        self.job, self.policy, self.reward = job, policy, reward
        self.train_rows, self.val_rows = list(train_rows), list(val_rows)[: job.train.val_rows]
        self.algorithm = get_algorithm(job.series.algorithm)
        self.model = policy.model
        self.optimizer = torch.optim.AdamW(
            [p for p in self.model.parameters() if p.requires_grad],
            lr=job.train.lr,
            betas=(0.9, 0.98),
            weight_decay=job.train.weight_decay,
        )
        self.reference = None
        if job.train.kl_coef > 0:
            import copy

            self.reference = copy.deepcopy(self.model).eval().requires_grad_(False)
        self.params = SamplingParams(
            temperature=job.rollout.temperature,
            top_p=job.rollout.top_p,
            max_new_tokens=job.rollout.max_new_tokens,
            kv_reuse=job.rollout.kv_reuse,
        )
        self.metrics_lines: list[str] = []
        self.val_item_lines: list[str] = []
        self.val_history: dict[int, float] = {}

    # ---------------------------------------------------------------------------------------------------------
    # The loop
    # ---------------------------------------------------------------------------------------------------------

    def fit(self) -> dict[str, Any]:
        """Train to ``train.steps`` (resuming from this job's own checkpoints), the only writer of the run folder
        while it runs: a rerun started while another process still writes there waits for it or fails."""
        with sole_writer(self.job.run_dir, what=f"series {self.job.series.id}'s run"):
            return self._fit()

    def _fit(self) -> dict[str, Any]:
        job = self.job
        start, run = self._start_or_resume()
        progress = Progress(f"{job.series.id} train", job.train.steps - start, log, interval=0.0, unit="steps")
        try:
            if start == 0 and self.validates(0):
                self._log(run, 0, *self.validate())
            for step in range(start + 1, job.train.steps + 1):
                metrics, val_scores = self.train_step(step), None
                if self.validates(step):
                    with timer("val", metrics):
                        val_metrics, val_scores = self.validate()
                        metrics.update(val_metrics)
                self._log(run, step, metrics, val_scores)
                if step % job.train.checkpoint_every == 0 or step == job.train.steps:
                    self._checkpoint(step, run)
                progress.advance()
                last_val = self.val_history[max(self.val_history)] if self.val_history else float("nan")
                log.info(
                    "%s step %d/%d reward %.3f tool_call_ratio %.2f last val/accuracy %.3f (%s)",
                    job.series.id,
                    step,
                    job.train.steps,
                    metrics["reward/overall"],
                    metrics.get("rollout/tool_call_ratio", 0.0),
                    last_val,
                    progress.line().split(": ", 1)[1],
                )
        except BaseException as error:  # a SIGTERM arrives here as errors.Stopped: the run ends KILLED
            run.finish(end_status(error))
            raise
        summary = self._finish(run)
        run.finish("FINISHED")
        return summary

    def validates(self, step: int) -> bool:
        """Whether the run validates after ``step`` (0: before the first): every ``train.val_every`` steps, before
        the first and at the last. An extra seed's run validates at its last step only: the curves the report draws
        are the main run's, and what the verdicts read of an extra seed (its test answers, its last validation for a
        ``val_accuracy`` hypothesis) needs no more. Sampling is seeded per step, so this changes no step's work."""
        if step == self.job.train.steps:
            return True
        return not self.job.extra_seed and step % self.job.train.val_every == 0

    def train_step(self, step: int) -> dict[str, float]:
        import torch

        job, metrics = self.job, {}
        started = time.perf_counter()
        with timer("gen", metrics):
            rng = random.Random(f"train-prompts:{job.train.seed}:{step}")
            prompts = draw_prompts(self.train_rows, job.train.prompts_per_step, rng)
            torch.manual_seed(hash_seed(job.train.seed, step))
            self.model.eval()
            stats: list[dict[str, float]] = []
            episodes = run_episodes(
                self.policy,
                prompts,
                with_tools=job.series.tools,
                n=job.rollout.n,
                params=self.params,
                prompt_config=job.prompts,
                tools=job.tools,
                batch_size=job.rollout.batch_size,
                stats=stats,
            )
        judge = getattr(self.reward, "judge", None)
        before = judge_usage(judge)
        with timer("reward", metrics):
            scored = self.reward(reward_inputs(episodes))
        # this step's judge calls, tokens, cache hits and failures (differences, so a resumed run logs the same)
        metrics.update({key: value - before[key] for key, value in judge_usage(judge).items()})
        with timer("adv", metrics):
            batch = update_batch(episodes)
            scores = [s["overall"] for s in scored]
            groups = np.array([i // job.rollout.n for i in range(len(episodes))])
            batch.advantages = group_advantages(scores, batch.response_mask, groups, self.algorithm)
            degenerate = [len({scores[i] for i in np.flatnonzero(groups == g)}) == 1 for g in sorted(set(groups))]
            keep = [i for i in range(len(episodes)) if not (job.train.exclude_degenerate and degenerate[groups[i]])]
        with timer("update_actor", metrics):
            lr = learning_rate(job.train, step)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            metrics["actor/lr"] = lr
            metrics.update(self.update(batch.select(keep)) if keep else {"actor/skipped": 1.0})
        for part in scored[0]:
            metrics[f"reward/{part}"] = sum(s[part] for s in scored) / len(scored)
        if (paid := bonus_on_wrong(scored, getattr(self.reward, "bonuses", ()))) is not None:
            metrics["reward/bonus_on_wrong"] = paid
        metrics.update(rollout_metrics(episodes, "rollout"))
        metrics.update(tool_metrics(episodes, "rollout"))
        metrics.update(tool_call_counts(episodes, "rollout", job.tools.max_tool_turns))
        metrics["train/degenerate_fraction"] = sum(degenerate) / len(degenerate)
        metrics["train/updated_sequences"] = float(len(keep))
        sampled = sum(s["sampled_tokens"] for s in stats)
        metrics["perf/sampled_tokens"] = float(sampled)
        metrics["perf/tokens"] = float(sampled + sum(s["prefill_tokens"] for s in stats))
        metrics["timing/step"] = time.perf_counter() - started
        metrics["perf/tokens_per_second"] = metrics["perf/tokens"] / metrics["timing/step"]
        return metrics

    def update(self, batch) -> dict[str, float]:
        """PPO epochs over the batch in micro-batches; the losses are normalised by the whole batch, so the
        accumulated gradient is that of the batch loss."""
        import torch

        job = self.job
        tokens = int(batch.response_mask.sum())
        sequences = int((batch.response_mask.sum(-1) > 0).sum())
        config = policy_loss_config(
            job.train.clip_low, max(tokens, 1), max(sequences, 1), job.max_response_tokens, job.train.clip_high
        )
        totals = {"actor/loss": 0.0, "actor/pg_loss": 0.0, "actor/kl": 0.0, "actor/clipfrac": 0.0, "actor/ppo_kl": 0.0}
        micro_batches = group_micro_batches(batch, job.train.micro_batch_size, self.policy.ids.image_pad)
        self.model.train()
        for _ in range(job.train.ppo_epochs):
            self.optimizer.zero_grad(set_to_none=True)
            for rows in micro_batches:
                micro = batch.select(rows)
                share = float(micro.response_mask.sum()) / max(tokens, 1)
                logprob = response_logprobs(self.model, self.policy, micro, self.params.temperature)  # (b, R)
                pg_loss, pg_metrics = policy_loss(
                    micro.old_logprobs, logprob, micro.advantages, micro.response_mask, self.algorithm, config
                )
                loss = pg_loss
                if self.reference is not None:
                    with torch.no_grad():
                        ref = response_logprobs(self.reference, self.policy, micro, self.params.temperature)
                    kl = kl_loss(logprob, ref, micro.response_mask, self.algorithm, config)
                    loss = loss + job.train.kl_coef * kl
                    totals["actor/kl"] += kl.item()
                loss.backward()
                totals["actor/loss"] += loss.item()
                totals["actor/pg_loss"] += pg_loss.item()
                totals["actor/clipfrac"] += pg_metrics["actor/pg_clipfrac"] * share
                totals["actor/ppo_kl"] += pg_metrics["actor/ppo_kl"] * share
            grad_norm = torch.nn.utils.clip_grad_norm_(
                [p for p in self.model.parameters() if p.requires_grad], job.train.grad_clip
            )
            self.optimizer.step()
        self.model.eval()
        epochs = job.train.ppo_epochs
        return {
            **{k: v / epochs for k, v in totals.items()},
            "actor/grad_norm": float(grad_norm),
        }

    def validate(self) -> tuple[dict[str, float], dict[str, float]]:
        """Greedy rollouts on the validation questions, and on the same questions with each chart swapped for
        another's (the shuffled-image control: accuracy that survives it does not come from the image). Returns
        the metrics and each validation question's score (question id -> relaxed accuracy, the val/accuracy
        terms)."""
        from chartrl.rollout.checks import shuffled_rows
        from chartrl.rollout.statistics import accuracy_by_question_type

        metrics, scores = {}, {}
        for prefix, rows in (
            ("val", self.val_rows),
            ("val_shuffled_images", shuffled_rows(self.val_rows, self.job.train.seed)),
        ):
            episodes = self._greedy(rows)
            metrics[f"{prefix}/accuracy"] = _accuracy(episodes)
            for qtype, accuracy in accuracy_by_question_type(episodes).items():
                metrics[f"{prefix}/accuracy_{qtype}"] = accuracy
            if prefix == "val":
                scores = question_scores(episodes)
                metrics.update(rollout_metrics(episodes, "val"))
                metrics.update(tool_metrics(episodes, "val"))
                metrics.update(tool_call_counts(episodes, "val", self.job.tools.max_tool_turns))
                if self.reward.accuracy_signal == "own":  # a recipe's reward grades its own answer form (r1v, boxed)
                    scored = self.reward(reward_inputs(episodes))
                    for part in ("accuracy", "format"):
                        metrics[f"val/reward_{part}"] = sum(s[part] for s in scored) / len(scored)
        return metrics, scores

    def _greedy(self, rows: Sequence[Row]) -> list[Any]:
        import torch

        job = self.job
        torch.manual_seed(hash_seed(job.train.seed, -1))
        self.model.eval()
        return run_episodes(
            self.policy,
            rows,
            with_tools=job.series.tools,
            n=1,
            params=SamplingParams(
                max_new_tokens=job.rollout.max_new_tokens, greedy=True, kv_reuse=job.rollout.kv_reuse
            ),
            prompt_config=job.prompts,
            tools=job.tools,
            batch_size=job.rollout.batch_size,
        )

    # ---------------------------------------------------------------------------------------------------------
    # Logging, checkpoints, resume
    # ---------------------------------------------------------------------------------------------------------

    def _log(self, run, step: int, metrics: dict[str, float], val_scores: dict[str, float] | None = None) -> None:
        """Append the step's metrics (and, at a validation step, its per-question scores) to the run folder's
        partial files, which a killed run leaves behind and a resumed one rewrites from its checkpoint."""
        if "val/accuracy" in metrics:
            self.val_history[step] = metrics["val/accuracy"]
        record = {"step": step, **{k: float(v) for k, v in sorted(metrics.items())}}
        self.metrics_lines.append(json.dumps(record) + "\n")
        _append(self.job.run_dir / "metrics.partial.jsonl", self.metrics_lines[-1])
        if val_scores is not None:
            self.val_item_lines.append(json.dumps({"step": step, "scores": val_scores}) + "\n")
            _append(self.job.run_dir / partial_name(VAL_ITEMS), self.val_item_lines[-1])
        run.log_metrics(metrics, step=step)

    def _state(self, run) -> dict[str, Any]:
        return {"job_key": self.job.key, "mlflow_run_id": run.run_id, "val_history": self.val_history}

    def _checkpoint(self, step: int, run) -> None:
        checkpoints.save_checkpoint(
            self.job.run_dir,
            step,
            self.policy,
            self.optimizer,
            self._state(run),
            self.metrics_lines,
            {VAL_ITEMS: self.val_item_lines},
        )
        best = self._best_step()
        keep = set(self.job.keep_steps) | ({best} if best is not None else set())
        checkpoints.prune(self.job.run_dir, self.job.train.keep_last, keep=keep)
        log.info("checkpoint step_%d written", step)

    def _best_step(self) -> int | None:
        saved = checkpoints.checkpoint_dirs(self.job.run_dir)
        scored = [(self.val_history[s], s) for s in saved if s in self.val_history]
        return max(scored)[1] if scored else None

    def _start_or_resume(self):
        from chartrl import tracking

        job = self.job
        job.run_dir.mkdir(parents=True, exist_ok=True)
        found = checkpoints.checkpoint_dirs(job.run_dir)
        latest = max(found) if found else None
        their_key = checkpoints.load_state(found[latest]).get("job_key") if latest is not None else None
        if latest is not None and their_key == job.key:
            return self._resume(latest, found[latest])
        aside = set_aside(job.run_dir, ("checkpoints", "metrics.partial.jsonl", partial_name(VAL_ITEMS)), their_key)
        if aside is not None:
            log.warning(
                "%s: the checkpoints in %s were trained from other inputs, settings or reward code (key %s, this job's "
                "is %s): moved to %s, training from step 0",
                job.series.id,
                job.run_dir,
                their_key,
                job.key,
                aside,
            )
        tags = tracking.train_run_tags(job.series, backend="local", seed=job.train.seed)
        run = tracking.start_run(job.mlflow, job.run_name, tags, job.spec)
        run.log_splits(job.inputs)
        return 0, run

    def _resume(self, step: int, path: Path):
        import torch

        from chartrl import tracking

        state = checkpoints.load_state(path)
        self._load_weights(path)
        self.optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=True)["optimizer"])
        self.metrics_lines = (path / "metrics.jsonl").read_text().splitlines(keepends=True)
        saved_items = path / VAL_ITEMS  # absent from a checkpoint saved before per-question results were kept
        self.val_item_lines = saved_items.read_text().splitlines(keepends=True) if saved_items.is_file() else []
        self.val_history = {int(k): v for k, v in state["val_history"].items()}
        restored = {"metrics.partial.jsonl": self.metrics_lines, partial_name(VAL_ITEMS): self.val_item_lines}
        for name, lines in restored.items():
            write_atomically(self.job.run_dir / name, lambda tmp, lines=lines: tmp.write_text("".join(lines)))
        log.info("resuming %s from checkpoint step_%d", self.job.series.id, step)
        return step, tracking.resume_run(self.job.mlflow, state["mlflow_run_id"], PROGRESS_KEY)

    def _load_weights(self, path: Path) -> None:
        """Load a checkpoint's weights into the live model (the optimizer keeps its parameter references)."""
        if (Path(path) / "adapter_config.json").exists():
            from peft import set_peft_model_state_dict
            from peft.utils import load_peft_weights

            set_peft_model_state_dict(self.model, load_peft_weights(str(path)))
            return
        from transformers import AutoModelForImageTextToText

        saved = AutoModelForImageTextToText.from_pretrained(str(path))
        self.model.load_state_dict(saved.state_dict())

    def _finish(self, run) -> dict[str, Any]:
        from chartrl import tracking

        job = self.job
        found = checkpoints.checkpoint_dirs(job.run_dir)
        last = max(found)
        best = self._best_step()
        summary = {
            "series": job.series.id,
            "backend": "local",
            "source_commit": tracking.source_commit(),
            "mlflow_run_id": run.run_id,
            "last_step": last,
            "job_key": job.key,
            "base_model": job.base_model,
            "checkpoints": {
                "last": str(found[last]),
                "best_val": str(found[best]) if best is not None else str(found[last]),
                "steps": {str(s): str(p) for s, p in found.items()},
            },
            "best_val": {"step": best, "accuracy": self.val_history.get(best)} if best is not None else None,
            "val_history": {str(k): v for k, v in sorted(self.val_history.items())},
        }
        write_atomically(job.run_dir / "metrics.jsonl", lambda tmp: tmp.write_text("".join(self.metrics_lines)))
        write_atomically(job.run_dir / VAL_ITEMS, lambda tmp: tmp.write_text("".join(self.val_item_lines)))
        write_json(job.run_dir / "run.json", summary)
        (job.run_dir / "metrics.partial.jsonl").unlink(missing_ok=True)
        (job.run_dir / partial_name(VAL_ITEMS)).unlink(missing_ok=True)
        return summary


def judge_usage(judge) -> dict[str, float]:
    if judge is None:
        return {}
    from chartrl.judge import usage_metrics

    return usage_metrics(judge, "judge")


def partial_name(name: str) -> str:
    """The name a run file has while the run writes it (``val_items.jsonl`` -> ``val_items.partial.jsonl``)."""
    stem, suffix = name.rsplit(".", 1)
    return f"{stem}.partial.{suffix}"


def _append(path: Path, line: str) -> None:
    with open(path, "a") as handle:
        handle.write(line)


def question_scores(episodes: Sequence[Any]) -> dict[str, float]:
    """Question id -> relaxed accuracy of its extracted answer (no answer: 0): the terms of :func:`_accuracy`."""
    from chartrl.answers import answer_accuracy

    return {e.row.id: answer_accuracy(e.final_response, e.row.answer) for e in episodes}


def _accuracy(episodes: Sequence[Any]) -> float:
    """Mean relaxed accuracy of the extracted answers (no answer: 0), the rule scorer's accuracy."""
    from chartrl.answers import answer_accuracy

    scores = [answer_accuracy(e.final_response, e.row.answer) for e in episodes]
    return sum(scores) / len(scores) if scores else 0.0


def draw_prompts(rows: Sequence[Row], count: int, rng: random.Random) -> list[Row]:
    """``count`` distinct questions of ``rows``: uniformly (``rng.sample``) unless a row carries a sampling weight
    (``extra.sample_weight``, what the shortcut filter's ``downweight`` mode writes); then each is drawn in
    proportion to its weight (others weigh 1), without replacement, by Efraimidis and Spirakis' keys
    (``u ** (1 / w)``, the ``count`` largest): "Weighted random sampling with a reservoir", IPL 97(5), 2006."""
    weights = [float(row.extra.get("sample_weight", 1.0)) for row in rows]
    if all(w == 1.0 for w in weights):
        return rng.sample(list(rows), count)
    keys = [rng.random() ** (1.0 / w) for w in weights]
    order = sorted(range(len(rows)), key=keys.__getitem__, reverse=True)[:count]
    return [rows[i] for i in order]


def hash_seed(seed: int, step: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{step}".encode()).digest()[:4], "little")
