"""The appending key/value cache (chartrl.rollout.cache) against transformers' ``DynamicCache`` (part of
`make bench`): the two-pass rollout of a tool series, sampled and greedy, once with each cache.

Same model and rows as bench_rollout. Each repeat runs both caches back to back from the same seed, so load on
the machine falls on both alike; the tokens and log-probs must come out the same to the last bit (checked, and
reported). Times are this process's CPU seconds per sampled token (the ratio uses them) and wall seconds.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from common import paired_rollouts, same_outcomes, summary


def sections(args) -> list[str]:
    import torch
    from transformers import DynamicCache

    from chartrl.rollout import cache

    from bench_rollout import _policy_and_rows

    torch.set_num_threads(2)
    appending = cache.appending_cache

    def dynamic(config, reserve, data=None):
        return DynamicCache(ddp_cache_data=data, config=config)

    kinds = {"dynamic": ("transformers DynamicCache (concatenates)", dynamic), "appending": ("appending", appending)}
    with tempfile.TemporaryDirectory() as workdir:
        config, policy, rows, which = _policy_and_rows(Path(workdir))
        rows = rows[:16]
        try:
            runs = paired_rollouts(
                policy,
                config,
                rows,
                kinds,
                lambda kind: setattr(cache, "appending_cache", kinds[kind][1]),
                args.repeats,
            )
        finally:
            cache.appending_cache = appending

    lines = [
        "## Rollout: the appending key/value cache",
        "",
        f"Model: {which}. The two-pass rollout with tools on {len(rows)} validation questions (sampled: n="
        f"{config.rollout.n}, temperature {config.rollout.temperature}; greedy: n=1), max "
        f"{config.rollout.max_new_tokens} new tokens per pass, batch {config.rollout.batch_size}, 2 threads, "
        "key/value reuse on; "
        f"{args.repeats} runs of each (min / median / max), both caches of a run back to back from the same seed.",
        "",
        "| rollout | cache | CPU ms per sampled token | wall ms per sampled token | sampled tokens |",
        "|---|---|---|---|---|",
    ]
    ratios = {}
    for greedy in (False, True):
        per_token = {}
        for kind, (label, _) in kinds.items():
            results = runs[kind, greedy]
            cpu_ms = [1000 * r[0] / r[2] for r in results]
            wall_ms = [1000 * r[1] / r[2] for r in results]
            per_token[kind] = statistics.median(cpu_ms)
            tokens = summary([r[2] for r in results], "")
            mode = "greedy" if greedy else "sampled"
            lines.append(f"| {mode} | {label} | {summary(cpu_ms, '')} | {summary(wall_ms, '')} | {tokens} |")
        ratios[greedy] = per_token["dynamic"] / per_token["appending"]
    same = same_outcomes(runs, "appending", "dynamic")
    lines += [
        "",
        f"DynamicCache / appending CPU time per sampled token (median): **{ratios[False]:.2f}x** sampled, "
        f"**{ratios[True]:.2f}x** greedy. The same tokens and log-probs, bit for bit, in every run: "
        f"**{'yes' if same else 'NO'}**.",
        "",
    ]
    return lines
