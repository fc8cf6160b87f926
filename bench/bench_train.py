"""Training benchmarks (part of `make bench`): one GRPO step of chartrl's local trainer against TRL's GRPOTrainer
(what a user would pick for one device), same tiny model, questions, group size, completion length and reward,
no tools (TRL's GRPOTrainer has no image-tool second pass), each in its own process for a clean peak RSS.

Uses results/models/base (from `make run`) when it exists, else the tiny model warm-started briefly by
bench_rollout's helper; rows from results/data/synthchart/val.parquet.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import REPO, summary

PROMPTS, N, MAX_NEW_TOKENS, STEPS = 4, 4, 48, 5


def _run(
    which: str,
    model: Path,
    rows: Path,
    extra: list[str] = (),
    prompts: int = PROMPTS,
    n: int = N,
    max_new_tokens: int = MAX_NEW_TOKENS,
) -> dict:
    command = [
        sys.executable,
        str(REPO / "bench/train_peer.py"),
        which,
        "--model",
        str(model),
        "--rows",
        str(rows),
        "--steps",
        str(STEPS),
        "--prompts",
        str(prompts),
        "--n",
        str(n),
        "--max-new-tokens",
        str(max_new_tokens),
        *extra,
    ]
    result = subprocess.run(
        command, capture_output=True, text=True, env=dict(os.environ, TOKENIZERS_PARALLELISM="false")
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    if result.returncode != 0 or not lines:
        raise RuntimeError(f"{which} run failed:\n{result.stderr[-3000:]}")
    return json.loads(lines[-1].removeprefix("RESULT "))


def _model_and_rows(workdir: Path) -> tuple[Path, Path, str]:
    from chartrl.data.contract import write_split

    base, val = REPO / "results/models/base", REPO / "results/data/synthchart/val.parquet"
    if base.exists() and val.exists():
        return base, val, "results/models/base"
    from bench_rollout import _policy_and_rows

    _, policy, rows, which = _policy_and_rows(workdir)
    policy.model.save_pretrained(workdir / "model")
    policy.processor.save_pretrained(workdir / "model")
    return workdir / "model", write_split(rows, workdir / "val.parquet"), which


def sections(args) -> list[str]:
    with tempfile.TemporaryDirectory() as workdir:
        model, rows, which = _model_and_rows(Path(workdir))
        ours, trl = _run("chartrl", model, rows), _run("trl", model, rows)
    # the first step pays for warm-up (allocations, lazy imports) in both: leave it out of the medians
    our_steps, trl_steps = ours["step_seconds"][1:], trl["step_seconds"][1:]
    ratio = statistics.median(trl_steps) / statistics.median(our_steps)
    tokens = [t / s for t, s in zip(ours["tokens"][1:], our_steps, strict=True)]
    # per sampled token: the two trainers sample different completion lengths from the same model, so seconds per
    # step alone may compare different amounts of work (each step's time over the tokens it sampled)
    our_per_token = [s / t for s, t in zip(our_steps, ours["sampled_tokens"][1:], strict=True)]
    trl_per_token = [s / t for s, t in zip(trl_steps, trl["sampled_tokens"][1:], strict=True)]
    token_ratio = statistics.median(trl_per_token) / statistics.median(our_per_token)
    return [
        "## Training step: chartrl's local trainer against TRL's GRPOTrainer",
        "",
        f"Model: {which}. {PROMPTS} questions x {N} samples, at most {MAX_NEW_TOKENS} new tokens, v1_rule reward, "
        f"no tools, full fine-tuning, AdamW, 2 threads, CPU; {STEPS} steps each, the first left out. Sampled "
        "tokens: the completion tokens of a step's rollout (TRL: its logged mean completion length x "
        f"{PROMPTS * N} completions).",
        "",
        "| trainer | seconds per step | sampled tokens per step | ms per sampled token | peak RSS (MB) |",
        "|---|---|---|---|---|",
        f"| chartrl (local backend) | {summary(our_steps)} | {summary(ours['sampled_tokens'][1:], 'tokens')} | "
        f"{summary([1000 * x for x in our_per_token], 'ms')} | {ours['peak_rss_mb']:.0f} |",
        f"| TRL GRPOTrainer | {summary(trl_steps)} | {summary(trl['sampled_tokens'][1:], 'tokens')} | "
        f"{summary([1000 * x for x in trl_per_token], 'ms')} | {trl['peak_rss_mb']:.0f} |",
        "",
        f"TRL / chartrl (medians): **{ratio:.2f}x** per step, **{token_ratio:.2f}x** per sampled token. chartrl "
        f"processed {summary(tokens, 'tokens/s')} (prompt + sampled tokens of the rollout).",
        "",
    ]
