"""Precision benchmark (part of `make bench`): what bfloat16 autocast would buy the miniature on this CPU, beside
float32 (what the embedded default runs) in one run, for the three kinds of work in `make run`:

- a warm-start update (the supervised loss, backward, AdamW) on demonstrations of the protocol phase, 2 threads as
  the warm start runs;
- sampling a rollout (two passes with tools, the key/value cache), 1 thread as a training job runs;
- an RL update (log-probs of the sampled responses, backward), 1 thread.

Each kind runs float32 and bfloat16 alternately on copies of the same weights and inputs. Autocast changes the
numbers too (the last column): a switch to it would change results, so it would need issue 14's seed checks.

Uses results/models/base and the validation split when they exist, else the tiny model warm-started briefly
(bench_rollout's helper).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import random
import statistics
import tempfile
import time
from pathlib import Path

from common import config_rollout, summary

WARMSTART_STEP = 450  # a step of the protocol phase (tool calls, observations, answers): the longest sequences


def _autocast(precision: str):
    import torch

    if precision == "bfloat16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _warmstart_updates(policy, rows, config, steps: int) -> dict[str, tuple[list[float], float]]:
    """Seconds per update and the loss after ``steps`` updates, per precision, from the same weights."""
    import torch

    from chartrl.warmstart.supervised import call_target, step_demonstrations, supervised_loss

    cfg = config.warmstart
    text_rows = [row for row in rows if call_target(row, config.tools)]
    rng = random.Random(0)
    demos = [
        step_demonstrations(policy, rows, text_rows, rng, WARMSTART_STEP + i, cfg, config.prompts, config.tools)
        for i in range(steps)
    ]
    models = {p: copy.deepcopy(policy.model).train() for p in ("float32", "bfloat16")}
    optimizers = {p: torch.optim.AdamW(m.parameters(), lr=1e-4) for p, m in models.items()}
    seconds: dict[str, list[float]] = {p: [] for p in models}
    losses: dict[str, float] = {}
    for batch in demos:
        for precision, model in models.items():
            live = dataclasses.replace(policy, model=model)
            started = time.perf_counter()
            with _autocast(precision):
                loss = supervised_loss(live, batch, cfg.micro_batch_size)
            optimizers[precision].zero_grad(set_to_none=True)
            loss.backward()
            optimizers[precision].step()
            seconds[precision].append(time.perf_counter() - started)
            losses[precision] = loss.item()
    return {p: (seconds[p][1:], losses[p]) for p in models}  # the first update pays for allocations


def _rollouts_and_updates(policy, rows, config, repeats: int):
    """Per precision: seconds per sampled token of a rollout, seconds of an RL update over its episodes, and the
    episodes' mean response length."""
    import torch

    from chartrl.model.batching import length_groups
    from chartrl.rollout.sampling import SamplingParams
    from chartrl.train.batch import response_logprobs, update_batch

    params = SamplingParams(temperature=config.rollout.temperature, max_new_tokens=config.rollout.max_new_tokens)
    out: dict[str, dict[str, list[float]]] = {
        p: {"sample": [], "update": [], "length": []} for p in ("float32", "bfloat16")
    }
    for repeat in range(repeats):
        for precision in out:
            model = copy.deepcopy(policy.model).eval()
            live = dataclasses.replace(policy, model=model)
            torch.manual_seed(repeat)
            stats: list[dict] = []
            started = time.perf_counter()
            with _autocast(precision):
                episodes = config_rollout(live, rows, config, params, with_tools=True, stats=stats)
            sampled = sum(s["sampled_tokens"] for s in stats)
            out[precision]["sample"].append((time.perf_counter() - started) / max(1, sampled))
            batch = update_batch(episodes)
            model.train()
            started = time.perf_counter()
            tokens = batch.response_mask.sum()
            for group in length_groups([len(s.ids) for s in batch.sequences], config.train.micro_batch_size):
                micro = batch.select(group)  # the trainer's micro-batches, in length order
                with _autocast(precision):
                    logprob = response_logprobs(model, live, micro, config.rollout.temperature)
                    loss = -(logprob * micro.response_mask).sum() / tokens
                loss.backward()
            out[precision]["update"].append(time.perf_counter() - started)
            out[precision]["length"].append(float(tokens) / len(episodes))
    return out


def sections(args) -> list[str]:
    import torch

    from bench_rollout import _policy_and_rows

    steps = 4 * args.repeats
    with tempfile.TemporaryDirectory() as workdir:
        config, policy, rows, which = _policy_and_rows(Path(workdir))
        torch.set_num_threads(2)
        warm = _warmstart_updates(policy, rows, config, steps)
        torch.set_num_threads(1)
        rl = _rollouts_and_updates(policy, rows[:8], config, args.repeats)
    median = statistics.median
    lines = [
        "## Precision: bfloat16 autocast against float32 on this CPU",
        "",
        f"Model: {which}. Warm-start updates: {steps} batches of {config.warmstart.batch_size} demonstrations of "
        f"warm-start step {WARMSTART_STEP} on ({_micro(config.warmstart.micro_batch_size)}), 2 threads, the first "
        "update left out. Rollouts: 8 validation "
        f"questions x n={config.rollout.n} with tools, then one RL update over their episodes (micro-batches of "
        f"{config.train.micro_batch_size} in length order), 1 thread, "
        f"{args.repeats} runs. Both precisions alternate, each from the same weights (min / median / max).",
        "",
        "| work | float32 | bfloat16 autocast | float32 / bfloat16 (median; above 1: autocast faster) | what changes |",
        "|---|---|---|---|---|",
    ]
    (f32, f32_loss), (b16, b16_loss) = warm["float32"], warm["bfloat16"]
    lines.append(
        f"| warm-start update (s) | {summary(f32)} | {summary(b16)} | {median(f32) / median(b16):.2f}x | "
        f"loss after {steps} updates {f32_loss:.4f} against {b16_loss:.4f} |"
    )
    f32s, b16s = rl["float32"]["sample"], rl["bfloat16"]["sample"]
    lengths = (median(rl["float32"]["length"]), median(rl["bfloat16"]["length"]))
    lines.append(
        f"| rollout, ms per sampled token | {summary([1e3 * v for v in f32s], 'ms')} | "
        f"{summary([1e3 * v for v in b16s], 'ms')} | {median(f32s) / median(b16s):.2f}x | "
        f"mean response {lengths[0]:.1f} against {lengths[1]:.1f} tokens |"
    )
    f32u, b16u = rl["float32"]["update"], rl["bfloat16"]["update"]
    lines.append(
        f"| RL update over the rollout's episodes (s) | {summary(f32u)} | {summary(b16u)} | "
        f"{median(f32u) / median(b16u):.2f}x | its own episodes in each precision |"
    )
    lines += [
        "",
        "A training step is about half sampling and half update, and the warm start is a third of `make run`'s "
        'critical path: autocast is not adopted (docs/results.md, "bfloat16 on the CPU").',
        "",
    ]
    return lines


def _micro(size: int | None) -> str:
    return "whole batches" if size is None else f"micro-batches of {size} in length order"
