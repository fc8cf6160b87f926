"""The after-warm-start check: greedy rollouts on validation rows, with and without tools, each next to its
shuffled-image control. A job of its own (``chartrl warmstart-check``, rule ``warmstart_check``) on the saved
warm-started model: the rollout settings it samples with are not the warm start's, so changing them reruns the
check and not the training."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from chartrl.config import PromptConfig, RolloutConfig, ToolsConfig
from chartrl.data.contract import Row
from chartrl.rollout.checks import masked_rows, shuffled_rows
from chartrl.rollout.episodes import run_episodes
from chartrl.rollout.sampling import SamplingParams
from chartrl.rollout.statistics import accuracy_by_question_type, rollout_statistics

log = logging.getLogger(__name__)


def check_after_warmstart(
    policy,
    rows: Sequence[Row],
    *,
    seed: int,
    prompt_config: PromptConfig,
    tools: ToolsConfig,
    rollout: RolloutConfig,
) -> tuple[dict[str, Any], list[Any]]:
    """The report and the sampled with-tools episodes (for a gallery). Each condition is rolled out both ways:
    ``sampled`` at the rollout temperature (what RL starts from: how often it calls tools, how well) and
    ``greedy`` (the accuracy a deterministic reader gets); each next to its shuffled-image control. Last,
    ``greedy/masked_chart``: the no-tool prompt on the chart as a mask keeping the asked labels shows it, i.e.
    what the model reads once a tool call has chosen well. ``seed`` seeds the sampling and the shuffled-image
    control's permutation."""
    import torch

    rows = list(rows)
    report: dict[str, Any] = {"rows": len(rows)}
    shown: list[Any] = []
    decodings = {
        "sampled": SamplingParams(
            temperature=rollout.temperature,
            top_p=rollout.top_p,
            max_new_tokens=rollout.max_new_tokens,
            kv_reuse=rollout.kv_reuse,
        ),
        "greedy": SamplingParams(max_new_tokens=rollout.max_new_tokens, greedy=True, kv_reuse=rollout.kv_reuse),
    }
    for decoding, params in decodings.items():
        for with_tools in (True, False):
            name = f"{decoding}/{'with_tools' if with_tools else 'no_tool'}"
            for control, subset in (("", rows), ("_shuffled_images", shuffled_rows(rows, seed))):
                torch.manual_seed(seed)
                episodes = run_episodes(
                    policy,
                    subset,
                    with_tools=with_tools,
                    n=1,
                    params=params,
                    prompt_config=prompt_config,
                    tools=tools,
                    batch_size=rollout.batch_size,
                )
                metrics = rollout_statistics(episodes)
                report[name + control] = {**metrics, "accuracy_by_question_type": accuracy_by_question_type(episodes)}
                log.info("%s%s: %s", name, control, {k: round(v, 3) for k, v in metrics.items()})
                if with_tools and decoding == "sampled" and not control:
                    shown = episodes
    masked = masked_rows(rows)
    for control, subset in (("", masked), ("_shuffled_images", shuffled_rows(masked, seed))):
        torch.manual_seed(seed)
        episodes = run_episodes(
            policy,
            subset,
            with_tools=False,
            n=1,
            params=decodings["greedy"],
            prompt_config=prompt_config,
            tools=tools,
            batch_size=rollout.batch_size,
        )
        metrics = rollout_statistics(episodes)
        report["greedy/masked_chart" + control] = {
            **metrics,
            "accuracy_by_question_type": accuracy_by_question_type(episodes),
        }
        log.info("greedy/masked_chart%s: %s", control, {k: round(v, 3) for k, v in metrics.items()})
    return report, shown
