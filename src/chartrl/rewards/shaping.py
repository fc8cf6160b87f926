"""What v2_shaped and v3_gra share: the shaping terms times their deltas, their parts and their bounds.

In the shaped rewards the parts are the *contributions* to ``overall`` (a term times its delta, after gating), so
``overall`` is their sum plus the accuracy, and a switched-off term reads 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chartrl.rewards.inputs import RewardInput
from chartrl.rewards.terms import format_term, length_term, tool_term

SHAPED_PARTS = ("overall", "accuracy", "format", "length", "tool", "tool_bonus", "judge_failure")
SHAPED_BONUSES = ("format", "length", "tool", "tool_bonus")
"""The parts that add to ``overall`` beside the accuracy (the registry's ``bonuses``)."""


def shaping_contributions(item: RewardInput, params: Mapping[str, Any]) -> dict[str, float]:
    """Each shaping term times its delta (a delta of 0 gives exactly 0, whatever the term)."""
    return {
        "format": params["d_format"] * format_term(item.response) if params["d_format"] else 0.0,
        "length": (
            params["d_length"] * length_term(item.response_tokens, params["length_budget"], params["length_ramp"])
            if params["d_length"]
            else 0.0
        ),
        "tool": params["d_tool"] * tool_term(item.tool_outcome) if params["d_tool"] else 0.0,
    }


def shaped_bounds(params: Mapping[str, Any]) -> tuple[float, float]:
    """overall in [-(d_format + d_length + d_tool), 1 + d_format + d_tool + tool_bonus]."""
    low = -(params["d_format"] + params["d_length"] + params["d_tool"])
    return low, 1 + params["d_format"] + params["d_tool"] + params.get("tool_bonus", 0.0)
