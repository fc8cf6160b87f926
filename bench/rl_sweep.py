"""RL settings sweep on the embedded default: one train series (e1 unless --series), from the warm start of
`make run` (results/models/base), with one train setting changed per run, each run a real `chartrl train` job.

    python bench/rl_sweep.py --out bench/rl_sweep.md [--series e1] [--seeds 0] [--jobs 2] [--only NAME ...]

Runs two jobs at a time (one torch thread each, like `make run`). For each setting and seed it reports: the mean
training reward over the first and the last 10 steps, greedy validation accuracy at step 0 and at the end (with the
count and value question types), the sampled correct-label share of tool calls over the first and last 10 steps, and
the sampler/trainer log-prob mismatch on the first update (actor/ppo_kl: with one PPO epoch the policy has not moved
yet when the loss is computed, so anything but ~0 means the old log-probs or the masks are wrong).
Curves go to <out>.json beside the table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO  # noqa: E402

# name -> train overrides (everything else is the embedded default's train section)
SETTINGS: dict[str, dict] = {
    "lr2e-4": {"lr": 2e-4},
    "lr2e-4_warm10": {"lr": 2e-4, "lr_warmup_steps": 10},
    "lr1e-4_warm10": {"lr": 1e-4, "lr_warmup_steps": 10},
    "lr1e-4_warm10_kl0.05": {"lr": 1e-4, "lr_warmup_steps": 10, "kl_coef": 0.05},
    "lr5e-5_warm10": {"lr": 5e-5, "lr_warmup_steps": 10},
    "lr1e-4_warm10_16x4": {"lr": 1e-4, "lr_warmup_steps": 10, "prompts_per_step": 16},
    "lr1e-4_warm10_cos": {"lr": 1e-4, "lr_warmup_steps": 10, "lr_scheduler": "cosine", "min_lr_ratio": 0.1},
    "lr5e-5": {"lr": 5e-5},
    "lr1e-4_warm10_kl0.05_16x4": {"lr": 1e-4, "lr_warmup_steps": 10, "kl_coef": 0.05, "prompts_per_step": 16},
}


def job_spec(config, series: str, train: dict) -> dict:
    from chartrl.config import to_plain

    sections = {name: to_plain(config.resolved[name]) for name in ("train", "rollout", "prompts", "tools", "judge")}
    sections["train"] = {**sections["train"], **train, "threads": 1}
    return {"series": {"id": series, **to_plain(config.resolved["series"][series])}, **sections}


def run_one(config, series: str, name: str, seed: int, workdir: Path) -> dict:
    out = workdir / f"{name}_seed{seed}"
    metrics = out / "metrics.jsonl"
    if not metrics.exists():
        spec = job_spec(config, series, {**SETTINGS[name], "seed": seed})
        data = REPO / "results/data" / config.train.dataset
        command = [
            str(Path(sys.executable).parent / "chartrl"),
            "train",
            "--spec",
            json.dumps(spec),
            "--model",
            str(REPO / "results/models/base"),
            "--train",
            str(data / "train.parquet"),
            "--val",
            str(data / "val.parquet"),
            "--out",
            str(out),
            "--tracking-uri",
            f"sqlite:///{workdir}/mlflow.db",
            "--experiment",
            "rl_sweep",
        ]
        started = time.perf_counter()
        log = out.parent / f"{out.name}.log"
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "w") as handle:
            result = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, env=dict(os.environ))
        if result.returncode != 0:
            raise RuntimeError(f"{name} seed {seed} failed; see {log}")
        print(f"{name} seed {seed}: {time.perf_counter() - started:.0f} s", flush=True)
    return summarise([json.loads(line) for line in metrics.read_text().splitlines()])


def summarise(records: list[dict]) -> dict:
    steps = [r for r in records if r["step"] > 0]
    val = [r for r in records if "val/accuracy" in r]

    def mean(rows, key):
        values = [r[key] for r in rows if key in r]
        return statistics.fmean(values) if values else float("nan")

    first, last = steps[:10], steps[-10:]
    return {
        "reward_first10": mean(first, "reward/overall"),
        "reward_last10": mean(last, "reward/overall"),
        "label_first10": mean(first, "rollout/correct_label_ratio"),
        "label_last10": mean(last, "rollout/correct_label_ratio"),
        "val_start": val[0]["val/accuracy"],
        "val_end": val[-1]["val/accuracy"],
        "val_min": min(r["val/accuracy"] for r in val),
        "count_start": val[0].get("val/accuracy_count", float("nan")),
        "count_end": val[-1].get("val/accuracy_count", float("nan")),
        "value_start": val[0].get("val/accuracy_value", float("nan")),
        "value_end": val[-1].get("val/accuracy_value", float("nan")),
        "first_ppo_kl": next((r["actor/ppo_kl"] for r in steps if "actor/ppo_kl" in r), float("nan")),
        "curve_reward": [r["reward/overall"] for r in steps],
        "curve_val": {r["step"]: r["val/accuracy"] for r in val},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "bench/rl_sweep.md")
    parser.add_argument("--series", default="e1")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", nargs="+", choices=sorted(SETTINGS), default=None)
    parser.add_argument("--workdir", type=Path, default=REPO / "results/rl_sweep")
    parser.add_argument("--reuse-only", action="store_true", help="tabulate the runs already in --workdir, run none")
    args = parser.parse_args()
    if not (REPO / "results/models/base").exists():
        sys.exit("results/models/base is missing: run `make run` (or its warmstart rule) first")

    from chartrl.config import load_config

    config = load_config(root=REPO)
    names = args.only or list(SETTINGS)
    tasks = [(name, seed) for name in names for seed in args.seeds]
    if args.reuse_only:
        tasks = [(n, s) for n, s in tasks if (args.workdir / f"{n}_seed{s}" / "metrics.jsonl").exists()]
    with ThreadPoolExecutor(args.jobs) as pool:
        results = dict(
            zip(tasks, pool.map(lambda t: run_one(config, args.series, *t, args.workdir), tasks), strict=True)
        )
    lines = [
        f"## RL settings sweep: {args.series} from the warm start, {config.train.steps} steps",
        "",
        "| setting | seed | reward 1-10 | reward last 10 | label share 1-10 | last 10 | val step 0 | val end (min) "
        "| count 0 -> end | value 0 -> end | first ppo_kl |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (name, seed), r in results.items():
        lines.append(
            f"| {name} | {seed} | {r['reward_first10']:.3f} | {r['reward_last10']:.3f} | {r['label_first10']:.2f} "
            f"| {r['label_last10']:.2f} | {r['val_start']:.3f} | {r['val_end']:.3f} ({r['val_min']:.3f}) "
            f"| {r['count_start']:.2f} -> {r['count_end']:.2f} | {r['value_start']:.2f} -> {r['value_end']:.2f} "
            f"| {r['first_ppo_kl']:.1e} |"
        )
    args.out.write_text("\n".join(lines) + "\n")
    args.out.with_suffix(".json").write_text(
        json.dumps({f"{n}/seed{s}": {"train": SETTINGS[n], **r} for (n, s), r in results.items()}, indent=1)
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
