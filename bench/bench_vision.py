"""The vision tower once per distinct image (chartrl.model.vision) against the tower on every copy (part of
`make bench`): the two-pass rollout of a tool series, sampled (``rollout.n`` copies of each chart) and greedy (one
copy per question; questions asked of one chart share it), once each way.

Same model and rows as bench_rollout. Each repeat runs both ways back to back from the same seed, so load on the
machine falls on both alike; the tokens and log-probs must come out the same to the last bit (checked, and
reported). Times are this process's CPU seconds per rollout (the ratio uses them) and wall seconds.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from common import paired_rollouts, same_outcomes, summary


def sections(args) -> list[str]:
    import torch

    from bench_rollout import _policy_and_rows

    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as workdir:
        config, policy, rows, which = _policy_and_rows(Path(workdir))
        rows = rows[:16]
        inner = policy.model.get_base_model() if hasattr(policy.model, "get_base_model") else policy.model
        shared_class = type(inner.model)
        every_class = shared_class.__mro__[2]  # the transformers class the sharing mixin sits before
        kinds = {"every": ("tower on every copy", every_class), "shared": ("once per distinct image", shared_class)}
        try:
            runs = paired_rollouts(
                policy,
                config,
                rows,
                kinds,
                lambda kind: setattr(inner.model, "__class__", kinds[kind][1]),
                args.repeats,
            )
        finally:
            inner.model.__class__ = shared_class
    charts = len({row.images[0] for row in rows})
    lines = [
        "## Rollout: the vision tower once per distinct image",
        "",
        f"Model: {which}. The two-pass rollout with tools on {len(rows)} validation questions about {charts} "
        f"charts (sampled: n={config.rollout.n}; greedy: n=1), max {config.rollout.max_new_tokens} new tokens per "
        f"pass, batch {config.rollout.batch_size}, 2 threads; {args.repeats} runs of each (min / median / max), both "
        "ways of a run back to back from the same seed.",
        "",
        "| rollout | vision tower | CPU s per rollout | wall s per rollout |",
        "|---|---|---|---|",
    ]
    ratios = {}
    for greedy in (False, True):
        mode = "greedy" if greedy else "sampled"
        for kind, (label, _) in kinds.items():
            results = runs[kind, greedy]
            lines.append(
                f"| {mode} | {label} | {summary([r[0] for r in results])} | {summary([r[1] for r in results])} |"
            )
        ratios[greedy] = statistics.median(r[0] for r in runs["every", greedy]) / statistics.median(
            r[0] for r in runs["shared", greedy]
        )
    same = same_outcomes(runs, "every", "shared")
    lines += [
        "",
        f"Every copy / once per distinct image, CPU time per rollout (median): **{ratios[False]:.2f}x** sampled, "
        f"**{ratios[True]:.2f}x** greedy. The same tokens and log-probs, bit for bit, in every run: "
        f"**{'yes' if same else 'NO'}**.",
        "",
    ]
    return lines
