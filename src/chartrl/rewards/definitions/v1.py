"""v1_rule and v1_judge: overall = the accuracy (relaxed accuracy, or the judge's verdict), plus the conditional
tool bonus (off by default). ``judge_failure`` is a flag (1 when the judge gave no verdict and the rule accuracy
stood in), not a contribution."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chartrl.rewards.inputs import RewardInput
from chartrl.rewards.registry import Example, register_reward
from chartrl.rewards.terms import conditional_tool_bonus

Parts = dict[str, float]


@register_reward(
    "v1_rule",
    description="relaxed accuracy of the final answer",
    parts=("overall", "accuracy", "tool_bonus"),
    accuracy="rule",
    example=Example("<answer>42</answer>", "42", 1.0),
    bonuses=("tool_bonus",),
)
@register_reward(
    "v1_judge",
    description="judge verdict on the final answer (1 correct, 0 not)",
    parts=("overall", "accuracy", "tool_bonus", "judge_failure"),
    accuracy="judge",
    example=Example("<answer>45%</answer>", "45", 1.0, metadata={"question": "Share of A?"}),  # the judge reads %
    bonuses=("tool_bonus",),
)
def accuracy_only(accuracy: float, item: RewardInput, params: Mapping[str, Any], judge_failure: float = 0.0) -> Parts:
    """v1_rule and v1_judge: overall = accuracy (+ the conditional tool bonus, off by default)."""
    bonus = conditional_tool_bonus(accuracy, item.tool_outcome, params["tool_bonus"])
    return {"overall": accuracy + bonus, "accuracy": accuracy, "tool_bonus": bonus, "judge_failure": judge_failure}
