"""Rollout benchmarks (part of `make bench`): two-pass (tool) against single-pass (no-tool) generation on the
embedded default's warm-started model, and how much of pass 2's prefill repeats work pass 1 already did.

Uses results/models/base (from `make run`) when it exists, else builds the tiny model and warm-starts it briefly
so that it calls tools. Rows: the validation split of the embedded default (results/data/synthchart/val.parquet),
or freshly rendered charts.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path

from common import REPO, config_rollout, summary


def _policy_and_rows(workdir: Path):
    from chartrl.config import load_config
    from chartrl.data.contract import read_split
    from chartrl.data.stage import collect_split
    from chartrl.model.policy import load_policy

    config = load_config(root=REPO)
    base = REPO / "results/models/base"
    val = REPO / "results/data/synthchart/val.parquet"
    if val.exists():
        rows = read_split(val)
    else:
        dataset = dataclasses.replace(
            config.datasets["synthchart"], options={**config.datasets["synthchart"].options, "splits": {"val": 40}}
        )
        rows = collect_split(dataset, "val", REPO, threads=2)[0]
    if not base.exists():
        from chartrl.model.tiny import build_tiny_model
        from chartrl.warmstart.supervised import train_warmstart

        build_tiny_model(workdir / "tiny", config.model, list(config.tools.names))
        policy = load_policy(workdir / "tiny", train=True)
        train_warmstart(policy, rows, dataclasses.replace(config.warmstart, steps=80), config.prompts, config.tools)
        return config, policy, rows, "tiny model, 80-step warm start (no results/models/base)"
    return config, load_policy(base), rows, "results/models/base"


def sections(args) -> list[str]:
    import torch

    from chartrl.rollout.sampling import SamplingParams

    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as workdir:
        config, policy, rows, which = _policy_and_rows(Path(workdir))
        rows = rows[:16]
        params = SamplingParams(temperature=config.rollout.temperature, max_new_tokens=config.rollout.max_new_tokens)
        results = {}
        for with_tools in (False, True):
            runs = []
            for repeat in range(args.repeats):
                torch.manual_seed(repeat)
                stats: list[dict] = []
                started = time.perf_counter()
                episodes = config_rollout(policy, rows, config, params, with_tools=with_tools, stats=stats)
                seconds = time.perf_counter() - started
                runs.append((seconds, stats, episodes))
            results[with_tools] = runs
    lines = [
        "## Rollout: two passes (tools) against one (no tools)",
        "",
        f"Model: {which}. {len(rows)} validation questions x n={config.rollout.n}, sampling at temperature "
        f"{config.rollout.temperature}, max {config.rollout.max_new_tokens} new tokens per pass, "
        f"batch {config.rollout.batch_size}, 2 threads; {args.repeats} runs (min / median / max).",
        "",
        "| rollout | sampled tokens/s | all tokens/s (prefill + sampled) | seconds | tool calls |",
        "|---|---|---|---|---|",
    ]
    medians = {}
    for with_tools, runs in results.items():
        sampled = [sum(s["sampled_tokens"] for s in st) / sec for sec, st, _ in runs]
        total = [sum(s["sampled_tokens"] + s["prefill_tokens"] for s in st) / sec for sec, st, _ in runs]
        calls = sum(bool(e.tool_outcomes) for e in runs[0][2]) / len(runs[0][2])
        medians[with_tools] = sorted(sampled)[len(sampled) // 2]
        label = "two-pass (tools)" if with_tools else "single-pass (no tools)"
        seconds = summary([r[0] for r in runs])
        lines.append(f"| {label} | {summary(sampled, '')} | {summary(total, '')} | {seconds} | {calls:.0%} |")
    lines += ["", f"two-pass / single-pass sampled tokens/s (median): **{medians[True] / medians[False]:.2f}x**", ""]
    _, stats, _ = results[True][0]
    second = [s for s in stats if s["pass"] == 2]
    if second:
        s = second[0]
        share = s["previous_pass_tokens"] / s["prefill_tokens"] if s["prefill_tokens"] else 0.0
        lines += [
            f"Pass 2 ({s['sequences']} sequences): {s['prefill_tokens']} prefill tokens, of which "
            f"{s['previous_pass_tokens']} ({share:.0%}) were already computed in pass 1: "
            f"{s['reused_prefix_tokens']} taken from pass 1's keys/values (rollout.kv_reuse, see the next section), "
            f"{s['recomputed_prefix_tokens']} computed again; the rest is the tool turn (observation text and the "
            "edited image's tokens) and the generation prompt.",
            "",
        ]
    else:
        lines += ["No episode called a tool in this run, so there was no pass 2.", ""]
    return lines
