"""deepeyes: verl's DeepEyes recipe (recipe/deepeyes/deepeyes.py, compute_score): weighted judge accuracy, a
format penalty and a tool bonus paid only on right answers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chartrl.answers import ANSWER_CLOSE, ANSWER_OPEN, extract_answer
from chartrl.rewards.inputs import RewardInput
from chartrl.rewards.registry import Example, register_reward
from chartrl.rewards.terms import conditional_tool_bonus

Parts = dict[str, float]

DEEPEYES_MAX_ANSWER_CHARS = 1000
"""The recipe's guard against judge hacking: an answer of 1,000 characters or more scores accuracy 0 and is a
format error."""


def deepeyes_format_error(response: str) -> bool:
    """The recipe's format check: unbalanced ``<think>`` tags, or, after the last ``</think>``, unbalanced
    ``<answer>`` tags or no ``<answer>...</answer>`` at all, or an over-long answer."""
    if response.count("<think>") != response.count("</think>"):
        return True
    tail = response.rsplit("</think>", 1)[-1]
    if tail.count(ANSWER_OPEN) != tail.count(ANSWER_CLOSE):
        return True
    answer = extract_answer(tail)
    return answer is None or len(answer) >= DEEPEYES_MAX_ANSWER_CHARS


def deepeyes_bounds(params: Mapping[str, Any]) -> tuple[float, float]:
    """overall in [-format_weight, accuracy_weight + tool_bonus]."""
    return -params["format_weight"], params["accuracy_weight"] + params["tool_bonus"]


@register_reward(
    "deepeyes",
    description="DeepEyes: weighted judge accuracy + format penalty + tool bonus paid only on right answers",
    parts=("overall", "accuracy", "format", "tool_bonus", "judge_failure"),
    accuracy="judge",
    example=Example(  # right after a call that ran: 0.8 x 1 + 0.2 x 0 (no format error) + the 1.2 tool bonus
        "<answer>42</answer>",
        "42",
        2.0,
        metadata={"question": "Value of A?", "tool_outcome": "executed", "tool_calls": 1},
    ),
    bounds=deepeyes_bounds,
)
def deepeyes(accuracy: float, item: RewardInput, params: Mapping[str, Any], judge_failure: float = 0.0) -> Parts:
    """verl's DeepEyes reward: overall = accuracy_weight * accuracy + format_weight * (-1 on a format error, else 0)
    + tool_bonus when the answer is right and a tool ran (0.8, 0.2, 1.2 in the recipe). ``accuracy`` and
    ``format`` are the unweighted signals; ``tool_bonus`` is the bonus paid. Differences from the recipe, kept on
    purpose: the answer judged is the last ``<answer>`` (the recipe takes the first, and without a tag judges the
    text after the tool response); the bonus needs a call that executed (the recipe pays for any
    ``<tool_call>`` text, a failed or malformed call included)."""
    error = deepeyes_format_error(item.response)
    answer = extract_answer(item.response)
    if answer is not None and len(answer) >= DEEPEYES_MAX_ANSWER_CHARS:
        accuracy = 0.0
    bonus = conditional_tool_bonus(accuracy, item.tool_outcome, params["tool_bonus"])
    form = -1.0 if error else 0.0
    overall = params["accuracy_weight"] * accuracy + params["format_weight"] * form + bonus
    return {
        "overall": overall,
        "accuracy": accuracy,
        "format": form,
        "tool_bonus": bonus,
        "judge_failure": judge_failure,
    }
