"""The shaping terms of the v2 and v3 rewards (the README's "Rewards and the judge"), one small pure function
each. Each term is unweighted; the rewards multiply it by its delta.

Decision on the format term and tool calls: the format term judges the final (answer) turn only. A malformed
tool call is the tool term's business (-1), so one mistake is penalised once, and switching the tool term off
(``d_tool: 0``, the no-tool baselines) switches off everything tool-related.
"""

from __future__ import annotations

from chartrl.answers import is_well_formed

TOOL_TERM = {"none": 0.0, "executed": 1.0, "malformed": -1.0, "failed": -1.0}
"""+1 for a tool call that executed, -1 for a malformed or failed call, 0 for no call."""


def format_term(response: str) -> float:
    """+1 when the final turn is well-formed (:func:`chartrl.answers.is_well_formed`), -1 otherwise."""
    return 1.0 if is_well_formed(response) else -1.0


def length_term(response_tokens: int, budget: int, ramp: int) -> float:
    """0 up to ``budget`` sampled tokens, then linear down to -1 at ``budget + ramp``, and -1 beyond: a soft
    penalty in [-1, 0]."""
    if response_tokens <= budget:
        return 0.0
    return max(-1.0, -(response_tokens - budget) / ramp)


def tool_term(tool_outcome: str) -> float:
    """+1 executed, -1 malformed or failed, 0 none (see :data:`TOOL_TERM`)."""
    return TOOL_TERM[tool_outcome]


def conditional_tool_bonus(accuracy: float, tool_outcome: str, bonus: float) -> float:
    """The DeepEyes conditional tool bonus (Zheng et al., 2025, "DeepEyes", arXiv 2505.14362, whose reward is
    R_acc + R_format + 1[R_acc > 0] * R_tool): paid only when the answer is correct and a tool ran. With a
    fractional accuracy (a judge panel combined by mean) it is scaled by the accuracy, the same gate v3_gra
    applies to every bonus."""
    return bonus * accuracy if tool_outcome == "executed" else 0.0
