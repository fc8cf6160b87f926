"""Timing helpers shared by the benchmark modules."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the benchmarks reuse the tests' fixture helpers


def timed(fn, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def summary(values: list[float], unit: str = "s") -> str:
    return f"{min(values):.3g} / {statistics.median(values):.3g} / {max(values):.3g} {unit}"


def config_rollout(policy, rows, config, params, *, with_tools: bool, stats: list[dict]):
    """``run_episodes`` with the config's group size, prompts, tools and batch size (what a training step samples)."""
    from chartrl.rollout.episodes import run_episodes

    return run_episodes(
        policy,
        rows,
        with_tools=with_tools,
        n=config.rollout.n,
        params=params,
        prompt_config=config.prompts,
        tools=config.tools,
        batch_size=config.rollout.batch_size,
        stats=stats,
    )
