"""v3_gra: gated reward aggregation. The shaping bonuses count only when the answer is correct; penalties always
count, so a wrong answer never earns more than a right one in the same group (a tested invariant)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chartrl.rewards.inputs import RewardInput
from chartrl.rewards.registry import Example, register_reward
from chartrl.rewards.shaping import SHAPED_BONUSES, SHAPED_PARTS, shaped_bounds, shaping_contributions
from chartrl.rewards.terms import conditional_tool_bonus

Parts = dict[str, float]


@register_reward(
    "v3_gra",
    description="gated reward aggregation: bonuses only for correct answers, penalties always",
    parts=SHAPED_PARTS,
    accuracy="configured",
    example=Example(  # wrong after a failed call: the format bonus gated to 0, the call's -0.1 penalty stays
        "<answer>17</answer>",
        "42",
        -0.1,
        params={"accuracy": "panel"},
        metadata={"tool_outcome": "failed", "tool_calls": 1, "response_tokens": 100},
    ),
    bounds=shaped_bounds,
    bonuses=SHAPED_BONUSES,
)
def v3_gra(accuracy: float, item: RewardInput, params: Mapping[str, Any], judge_failure: float = 0.0) -> Parts:
    """Gated reward aggregation: a positive contribution (a bonus) is multiplied by the accuracy, so it counts only
    when the answer is correct (and in proportion for a panel's mean accuracy); a negative one (a penalty) always
    counts. Hence, with the same shaping inputs, overall is non-decreasing in accuracy: a wrong answer never earns
    more than a right one."""
    parts = {
        name: value * accuracy if value > 0 else value for name, value in shaping_contributions(item, params).items()
    }
    bonus = conditional_tool_bonus(accuracy, item.tool_outcome, params["tool_bonus"])
    overall = accuracy + sum(parts.values()) + bonus
    return {"overall": overall, "accuracy": accuracy, **parts, "tool_bonus": bonus, "judge_failure": judge_failure}
