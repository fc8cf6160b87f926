"""Key/value reuse across rollout passes (part of `make bench`): how much of pass 2's prefill comes from pass 1's
cache, the two-pass rollout's time per sampled token with reuse on and off against the single-pass rollout's, and a
training step of a tool series with reuse on and off (``rollout.kv_reuse``).

Same model and rows as bench_rollout. The three rollouts of a repeat run back to back from the same seed, so reuse
on and off sample the same tokens (checked, and reported), and load on the machine falls on all three alike. Times
are given as this process's CPU seconds (less sensitive than wall time to other work on the machine, which is
what the ratios use) and as wall seconds.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from common import config_rollout, summary


def _rollout(policy, config, rows, *, with_tools: bool, reuse: bool, seed: int, greedy: bool = False):
    import torch

    from chartrl.rollout.sampling import SamplingParams

    params = SamplingParams(
        temperature=config.rollout.temperature,
        top_p=config.rollout.top_p,
        max_new_tokens=config.rollout.max_new_tokens,
        greedy=greedy,
        kv_reuse=reuse,
    )
    torch.manual_seed(seed)
    stats: list[dict] = []
    started, cpu_started = time.perf_counter(), time.process_time()
    episodes = config_rollout(policy, rows, config, params, with_tools=with_tools, stats=stats)
    return time.perf_counter() - started, stats, episodes, time.process_time() - cpu_started


def _tokens(episodes) -> list[list[int]]:
    return [e.response_ids for e in episodes]


def _max_logprob_gap(a, b) -> float:
    """Largest log-prob difference between two rollouts of the same tokens."""
    gaps = [
        abs(x - y)
        for ea, eb in zip(a, b, strict=True)
        for x, y in zip(ea.response_logprobs, eb.response_logprobs, strict=True)
    ]
    return max(gaps, default=0.0)


def sections(args) -> list[str]:
    import torch
    from bench_train import _model_and_rows, _run

    from bench_rollout import _policy_and_rows

    torch.set_num_threads(2)
    kinds = {
        "single": ("single-pass (no tools)", False, True),
        "off": ("two-pass, kv_reuse off (pass 2 re-prefills)", True, False),
        "on": ("two-pass, kv_reuse on", True, True),
    }
    with tempfile.TemporaryDirectory() as workdir:
        config, policy, rows, which = _policy_and_rows(Path(workdir))
        rows = rows[:16]
        runs: dict[str, list] = {kind: [] for kind in kinds}
        for repeat in range(args.repeats):
            for kind, (_, with_tools, reuse) in kinds.items():
                runs[kind].append(_rollout(policy, config, rows, with_tools=with_tools, reuse=reuse, seed=repeat))
        greedy = {
            reuse: _rollout(policy, config, rows, with_tools=True, reuse=reuse, seed=0, greedy=True)[2]
            for reuse in (False, True)
        }
        model, rows_file, _ = _model_and_rows(Path(workdir))
        steps = {
            reuse: _run("chartrl", model, rows_file, ["--tools"] + ([] if reuse else ["--no-kv-reuse"]))
            for reuse in (False, True)
        }

    lines = [
        "## Rollout: key/value reuse across passes",
        "",
        f"Model: {which}. {len(rows)} validation questions x n={config.rollout.n}, temperature "
        f"{config.rollout.temperature}, max {config.rollout.max_new_tokens} new tokens per pass, batch "
        f"{config.rollout.batch_size}, 2 threads; {args.repeats} runs of each (min / median / max), the three "
        "rollouts of a run from the same seed.",
        "",
        "| rollout | CPU ms per sampled token | wall ms per sampled token | sampled tokens | CPU seconds |",
        "|---|---|---|---|---|",
    ]
    per_token = {}
    for kind, (label, _, _) in kinds.items():
        sampled = [sum(s["sampled_tokens"] for s in st) for _, st, _, _ in runs[kind]]
        cpu_ms = [1000 * r[3] / n for r, n in zip(runs[kind], sampled, strict=True)]
        wall_ms = [1000 * r[0] / n for r, n in zip(runs[kind], sampled, strict=True)]
        per_token[kind] = statistics.median(cpu_ms)
        cpu = summary([r[3] for r in runs[kind]])
        lines.append(f"| {label} | {summary(cpu_ms, '')} | {summary(wall_ms, '')} | {summary(sampled, '')} | {cpu} |")
    same_sampled = all(_tokens(on[2]) == _tokens(off[2]) for on, off in zip(runs["on"], runs["off"], strict=True))
    lines += [
        "",
        "Two-pass / single-pass CPU time per sampled token (median): "
        f"**{per_token['off'] / per_token['single']:.2f}x** without reuse, "
        f"**{per_token['on'] / per_token['single']:.2f}x** with reuse; reuse on / off: "
        f"**{per_token['on'] / per_token['off']:.2f}x**.",
        "",
    ]
    # the first run's pass 2, with reuse and without; and every run's pass-2 CPU seconds
    pass2 = {kind: [s["cpu_seconds"] for r in runs[kind] for s in r[1] if s["pass"] == 2] for kind in ("on", "off")}
    second = [s for s in runs["on"][0][1] if s["pass"] == 2]
    second_off = [s for s in runs["off"][0][1] if s["pass"] == 2]
    if second and second_off:
        s, off = second[0], second_off[0]
        lines += [
            f"Pass 2 ({s['sequences']} sequences, first run): {s['prefill_tokens']} prefill tokens; pass 1 had "
            f"computed {s['previous_pass_tokens']} of them, and the reuse path took "
            f"**{s['reused_prefix_tokens']} ({s['reused_prefix_tokens'] / s['prefill_tokens']:.0%} of the pass-2 "
            f"prefill, {s['reused_prefix_tokens'] / max(1, s['previous_pass_tokens']):.0%} of what pass 1 "
            f"computed)** from the cache; without reuse all {off['recomputed_prefix_tokens']} were computed again. "
            f"Pass 2 took {s['cpu_seconds']:.2f} CPU s ({s['seconds']:.2f} s wall) with reuse against "
            f"{off['cpu_seconds']:.2f} CPU s ({off['seconds']:.2f} s wall) without. Pass 2 medians over the runs: "
            f"{statistics.median(pass2['on']):.2f} CPU s with reuse, {statistics.median(pass2['off']):.2f} without.",
            "",
        ]
    else:
        lines += ["No episode called a tool in this run, so there was no pass 2.", ""]
    lines += [
        f"Same tokens with reuse on and off: sampled runs (same seed) **{'yes' if same_sampled else 'NO'}**; greedy "
        f"**{'yes' if _tokens(greedy[True]) == _tokens(greedy[False]) else 'NO'}** (largest log-prob difference "
        f"{_max_logprob_gap(greedy[True], greedy[False]):.1e}).",
        "",
    ]
    off_steps, on_steps = steps[False]["step_cpu_seconds"][1:], steps[True]["step_cpu_seconds"][1:]
    off_wall, on_wall = steps[False]["step_seconds"][1:], steps[True]["step_seconds"][1:]
    lines += [
        "Training step of a tool series (chartrl's local trainer, 4 questions x 4 samples, the bench_train "
        "settings with tools, one run each, same seed, the first step left out):",
        "",
        "| rollout.kv_reuse | CPU seconds per step | wall seconds per step | peak RSS (MB) |",
        "|---|---|---|---|",
        f"| off | {summary(off_steps)} | {summary(off_wall)} | {steps[False]['peak_rss_mb']:.0f} |",
        f"| on | {summary(on_steps)} | {summary(on_wall)} | {steps[True]['peak_rss_mb']:.0f} |",
        "",
        "on / off CPU seconds per step (median): "
        f"**{statistics.median(on_steps) / statistics.median(off_steps):.2f}x**.",
        "",
    ]
    return lines
