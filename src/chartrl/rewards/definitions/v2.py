"""v2_shaped: soft shaping. overall = accuracy + d_format * format_term + d_length * length_term + d_tool *
tool_term (+ the tool bonus); each delta is a config value, 0 switches its term off."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chartrl.rewards.inputs import RewardInput
from chartrl.rewards.registry import Example, register_reward
from chartrl.rewards.shaping import SHAPED_BONUSES, SHAPED_PARTS, shaped_bounds, shaping_contributions
from chartrl.rewards.terms import conditional_tool_bonus

Parts = dict[str, float]


@register_reward(
    "v2_shaped",
    description="accuracy + format, length and tool terms, each with its own delta",
    parts=SHAPED_PARTS,
    accuracy="configured",
    example=Example(  # right: 1 + 0.1 format + 0.1 tool - 0.05 length (64 tokens past the budget of 256)
        "<answer>42</answer>",
        "42",
        1.15,
        metadata={"tool_outcome": "executed", "tool_calls": 1, "response_tokens": 320},
    ),
    bounds=shaped_bounds,
    bonuses=SHAPED_BONUSES,
)
def v2_shaped(accuracy: float, item: RewardInput, params: Mapping[str, Any], judge_failure: float = 0.0) -> Parts:
    """overall = accuracy + d_format * format_term + d_length * length_term + d_tool * tool_term (+ tool bonus)."""
    parts = shaping_contributions(item, params)
    bonus = conditional_tool_bonus(accuracy, item.tool_outcome, params["tool_bonus"])
    overall = accuracy + sum(parts.values()) + bonus
    return {"overall": overall, "accuracy": accuracy, **parts, "tool_bonus": bonus, "judge_failure": judge_failure}
