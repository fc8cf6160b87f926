"""Sample efficiency (part of `make bench`): the learning test's task through chartrl's local trainer and through
TRL's GRPOTrainer, side by side, from the same model, seeds, batch and optimiser settings.

The task (tests/train/test_learning.py): the tiny model after the tests' short warm start (24 steps, the
`warm_model_dir` fixture's recipe) writes a well-formed `<answer>...</answer>` response about a quarter of the time
when sampled; the reward is 1 for a well-formed response, else 0, so the optimum is 1. Each trainer runs in its
own process (bench/train_peer.py); the mean reward per step is reported per seed, over the first and the last
WINDOW steps, with the curves drawn to bench/learning_curves.png.
"""

from __future__ import annotations

import dataclasses
import statistics
import tempfile
from pathlib import Path

from bench_train import _run

from common import REPO

SEEDS, STEPS, WINDOW, PROMPTS, N, MAX_NEW_TOKENS, LR, WARMUP = (0, 1, 2), 24, 8, 4, 4, 16, 1e-4, 5


def _short_warm_start(workdir: Path) -> tuple[Path, Path]:
    """The tests' warm_model_dir recipe: the tiny model, 24 warm-start steps on a few synthetic charts."""
    from chartrl.config import load_config
    from chartrl.data.contract import write_split
    from chartrl.data.stage import collect_split
    from chartrl.model.policy import load_policy
    from chartrl.model.tiny import build_tiny_model
    from chartrl.warmstart.supervised import train_warmstart

    from conftest import dataset_from

    config = load_config(root=REPO)
    dataset = dataset_from(
        {"source": "synthchart", "seed": 3, "splits": {"train": 24, "val": 8}, "questions_per_chart": 3}, name="synth"
    )
    rows = collect_split(dataset, "train", root=REPO)[0]
    build_tiny_model(workdir / "tiny", config.model, list(config.tools.names))
    policy = load_policy(workdir / "tiny", threads=2, train=True)
    warm = dataclasses.replace(config.warmstart, steps=24, batch_size=4, warmup_steps=4, lr=3e-3, perception_steps=0)
    train_warmstart(policy, rows, warm, config.prompts, config.tools)
    policy.model.save_pretrained(workdir / "warm")
    policy.processor.save_pretrained(workdir / "warm")
    return workdir / "warm", write_split(rows, workdir / "train.parquet")


def _plot(curves: dict[str, list[list[float]]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 3.5))
    for (name, runs), colour in zip(curves.items(), ("tab:blue", "tab:orange"), strict=True):
        for run in runs:
            axis.plot(range(1, len(run) + 1), run, color=colour, alpha=0.25, linewidth=1)
        mean = [statistics.fmean(values) for values in zip(*runs, strict=True)]
        axis.plot(
            range(1, len(mean) + 1), mean, color=colour, linewidth=2.2, label=f"{name} (mean of {len(runs)} seeds)"
        )
    axis.set(xlabel="step", ylabel="reward (well-formed share)", ylim=(0, 1), title="Format task: reward per step")
    axis.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    plt.close(figure)


def sections(args) -> list[str]:
    extra = ["--task", "format", "--lr", str(LR), "--warmup", str(WARMUP), "--steps", str(STEPS)]
    shape = {"prompts": PROMPTS, "n": N, "max_new_tokens": MAX_NEW_TOKENS}
    curves: dict[str, list[list[float]]] = {"chartrl": [], "TRL GRPOTrainer": []}
    with tempfile.TemporaryDirectory() as workdir:
        model, rows = _short_warm_start(Path(workdir))
        for seed in SEEDS:
            for name, which in (("chartrl", "chartrl"), ("TRL GRPOTrainer", "trl")):
                result = _run(which, model, rows, extra=[*extra, "--seed", str(seed)], **shape)
                curves[name].append(result["reward"])
    _plot(curves, REPO / "bench/learning_curves.png")
    lines = [
        "## Sample efficiency: the learning test's task, chartrl against TRL's GRPOTrainer",
        "",
        f"Tiny model after the tests' 24-step warm start; reward 1 for a well-formed `<answer>...</answer>` response. "
        f"{PROMPTS} questions x {N} samples per step, at most {MAX_NEW_TOKENS} new tokens, lr {LR} with {WARMUP} "
        f"warm-up steps (linear from 0), AdamW betas (0.9, 0.98), gradient clip 1, no KL, token-mean loss (TRL: "
        f"`loss_type='dapo'`), {STEPS} steps, seeds {list(SEEDS)}. Mean reward over the first and the last {WINDOW} "
        "steps; curves in `bench/learning_curves.png`.",
        "",
        f"| trainer | seed | reward, steps 1-{WINDOW} | reward, last {WINDOW} | gain |",
        "|---|---|---|---|---|",
    ]
    for name, runs in curves.items():
        for seed, run in zip(SEEDS, runs, strict=True):
            first, last = statistics.fmean(run[:WINDOW]), statistics.fmean(run[-WINDOW:])
            lines.append(f"| {name} | {seed} | {first:.3f} | {last:.3f} | {last - first:+.3f} |")
    for name, runs in curves.items():
        gains = [statistics.fmean(r[-WINDOW:]) - statistics.fmean(r[:WINDOW]) for r in runs]
        lines.append(f"| {name} | mean | | | {statistics.fmean(gains):+.3f} |")
    return [*lines, ""]
