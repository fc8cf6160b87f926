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


def seeded_rollout(policy, config, rows, *, greedy: bool, seed: int):
    """The two-pass rollout of a tool series on ``rows`` from ``seed`` (sampled with the config's n, or greedy):
    ``(CPU s, wall s, sampled tokens, [(response ids, log-probs)] per episode)``."""
    import torch

    from chartrl.rollout.episodes import run_episodes
    from chartrl.rollout.sampling import SamplingParams

    params = SamplingParams(
        temperature=config.rollout.temperature,
        top_p=config.rollout.top_p,
        max_new_tokens=config.rollout.max_new_tokens,
        greedy=greedy,
    )
    torch.manual_seed(seed)
    started, cpu_started = time.perf_counter(), time.process_time()
    episodes = run_episodes(
        policy,
        rows,
        with_tools=True,
        n=1 if greedy else config.rollout.n,
        params=params,
        prompt_config=config.prompts,
        tools=config.tools,
        batch_size=config.rollout.batch_size,
    )
    tokens = sum(e.sampled_tokens for e in episodes)
    outcome = [(e.response_ids, e.response_logprobs) for e in episodes]
    return time.process_time() - cpu_started, time.perf_counter() - started, tokens, outcome


def paired_rollouts(policy, config, rows, kinds, use, repeats: int) -> dict[tuple[str, bool], list]:
    """:func:`seeded_rollout` results per ``(kind, greedy)``: each repeat runs every kind of ``kinds`` back to back
    from the same seed, sampled then greedy, after ``use(kind)`` switched to it (so load on the machine falls on
    all kinds alike). The caller puts its own setting back afterwards."""
    runs: dict[tuple[str, bool], list] = {(kind, greedy): [] for kind in kinds for greedy in (False, True)}
    for repeat in range(repeats):
        for greedy in (False, True):
            for kind in kinds:
                use(kind)
                runs[kind, greedy].append(seeded_rollout(policy, config, rows, greedy=greedy, seed=repeat))
    return runs


def same_outcomes(runs: dict[tuple[str, bool], list], first: str, second: str) -> bool:
    """Whether kinds ``first`` and ``second`` of :func:`paired_rollouts` gave the same tokens and log-probs, bit for
    bit, in every run."""
    return all(
        a[3] == b[3] for greedy in (False, True) for a, b in zip(runs[first, greedy], runs[second, greedy], strict=True)
    )
