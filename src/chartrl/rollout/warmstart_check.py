"""The after-warm-start check: greedy rollouts on validation rows, with and without tools, each next to its
shuffled-image control."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from chartrl.config import PromptConfig, RolloutConfig, ToolsConfig, WarmstartConfig
from chartrl.data.contract import Row
from chartrl.rollout.checks import protocol_metrics, shuffled_rows
from chartrl.rollout.episodes import run_episodes
from chartrl.rollout.sampling import SamplingParams

log = logging.getLogger(__name__)


def accuracy_by_question_type(episodes: Sequence[Any]) -> dict[str, float]:
    from chartrl.rewards import extract_answer, relaxed_accuracy

    scores: dict[str, list[float]] = defaultdict(list)
    for episode in episodes:
        answer = extract_answer(episode.final_response)
        score = relaxed_accuracy(answer, episode.row.answer) if answer is not None else 0.0
        scores[episode.row.extra.get("question_type", "unknown")].append(score)
    return {qtype: sum(s) / len(s) for qtype, s in sorted(scores.items())}


def check_after_warmstart(
    policy,
    rows: Sequence[Row],
    cfg: WarmstartConfig,
    prompt_config: PromptConfig,
    tools: ToolsConfig,
    rollout: RolloutConfig,
) -> tuple[dict[str, Any], list[Any]]:
    """The report, and the with-tools episodes (for a gallery)."""
    import torch

    torch.manual_seed(cfg.seed)
    rows = list(rows[: cfg.eval_rows])
    params = SamplingParams(max_new_tokens=rollout.max_new_tokens, greedy=True)
    report: dict[str, Any] = {"rows": len(rows), "decoding": "greedy"}
    shown: list[Any] = []
    for with_tools in (True, False):
        name = "with_tools" if with_tools else "no_tool"
        for control, subset in (("", rows), ("_shuffled_images", shuffled_rows(rows, cfg.seed))):
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
            report[name + control] = {
                **protocol_metrics(episodes),
                "accuracy_by_question_type": accuracy_by_question_type(episodes),
            }
            log.info("%s%s: %s", name, control, {k: round(v, 3) for k, v in protocol_metrics(episodes).items()})
            if with_tools and not control:
                shown = episodes
    return report, shown
