"""Generations of one checkpoint on the test split, in the generations contract (chartrl.rollout.generations)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chartrl.config import EvaluateConfig, PromptConfig, RolloutConfig, ToolsConfig
from chartrl.data.contract import Row
from chartrl.rollout.episodes import run_episodes
from chartrl.rollout.generations import draw_gallery, write_generations
from chartrl.rollout.sampling import SamplingParams
from chartrl.rollout.statistics import rollout_statistics

log = logging.getLogger(__name__)


def generate(
    policy,
    rows: Sequence[Row],
    *,
    with_tools: bool,
    evaluate: EvaluateConfig,
    rollout: RolloutConfig,
    prompts: PromptConfig,
    tools: ToolsConfig,
    out: Path,
    gallery: Path,
    model_label: str,
) -> dict[str, Any]:
    import torch

    torch.manual_seed(evaluate.seed)
    rows = list(rows[: evaluate.limit] if evaluate.limit else rows)
    params = SamplingParams(
        temperature=rollout.temperature,
        top_p=rollout.top_p,
        max_new_tokens=rollout.max_new_tokens,
        greedy=evaluate.greedy,
        kv_reuse=rollout.kv_reuse,
    )
    episodes = run_episodes(
        policy,
        rows,
        with_tools=with_tools,
        n=evaluate.n,
        params=params,
        prompt_config=prompts,
        tools=tools,
        batch_size=rollout.batch_size,
    )
    write_generations(episodes, out, out.parent / "images", model_label)
    draw_gallery(episodes, gallery, limit=evaluate.gallery_size)
    summary = rollout_statistics(episodes)
    log.info("%d generations of %s written to %s: %s", len(episodes), model_label, out, summary)
    return summary
