"""multiple_choice: the letter in the last ``\\boxed{}`` against the labelled option (GeoQA multiple choice)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chartrl.answers import extract_choice
from chartrl.rewards.inputs import RewardInput
from chartrl.rewards.registry import Example, register_reward
from chartrl.rewards.terms import conditional_tool_bonus

Parts = dict[str, float]


@register_reward(
    "multiple_choice",
    description="the letter in the last \\boxed{} against the labelled option (GeoQA multiple choice)",
    parts=("overall", "accuracy", "format", "tool_bonus"),
    accuracy="own",
    example=Example("so \\boxed{C}", "C", 1.0),
)
def multiple_choice(item: RewardInput, params: Mapping[str, Any]) -> Parts:
    """Multiple-choice GeoQA: accuracy 1 when the letter in the last ``\\boxed{}`` is the labelled option.
    ``format`` (1 when the last box holds an option letter) is logged, not added."""
    choice = extract_choice(item.response)
    accuracy = 1.0 if choice is not None and choice == item.ground_truth.strip().upper() else 0.0
    bonus = conditional_tool_bonus(accuracy, item.tool_outcome, params["tool_bonus"])
    return {"overall": accuracy + bonus, "accuracy": accuracy, "format": float(choice is not None), "tool_bonus": bonus}
