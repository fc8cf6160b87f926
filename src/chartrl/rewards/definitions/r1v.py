"""r1v: EasyR1's GeoQA reward, overall = (1 - w) * accuracy + w * format, accuracy by mathruler
(``chartrl.rewards.symbolic``; ``grade_timeout`` is 1 when mathruler overran its time limit and the answer was
graded incorrect)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from chartrl.answers import ANSWER_CLOSE, ANSWER_OPEN, extract_answer
from chartrl.rewards.inputs import RewardInput
from chartrl.rewards.registry import Example, register_reward
from chartrl.rewards.symbolic import grade_answer_within
from chartrl.rewards.terms import conditional_tool_bonus

Parts = dict[str, float]

R1V_FORMAT = re.compile(r"<think>.*?</think>\s*<answer>.*?</answer>", re.DOTALL)
"""EasyR1's r1v format pattern (examples/reward_function/r1v.py), matched in full. Kept as the reference the tests
compare :func:`r1v_format` with; matching it directly is quadratic (37 s on "<think>" + 20,000 times
"</think><answer>", no closing tag: every ``</think>`` is tried and each try scans the rest)."""

_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"


def r1v_format(response: str) -> float:
    """EasyR1's r1v format check: the whole response is ``<think>...</think>`` then ``<answer>...</answer>``;
    1 or 0. The same verdict as ``R1V_FORMAT.fullmatch``, in linear time: the response starts with ``<think>``
    and ends with ``</answer>``, and some ``</think>`` is followed, after whitespace only, by an ``<answer>``
    that closes no later than the final ``</answer>`` opens."""
    if not (response.startswith(_THINK_OPEN) and response.endswith(ANSWER_CLOSE)):
        return 0.0
    last_open = len(response) - len(ANSWER_CLOSE) - len(ANSWER_OPEN)  # the latest an <answer> may start
    position = len(_THINK_OPEN)
    while (close := response.find(_THINK_CLOSE, position)) >= 0:
        after = close + len(_THINK_CLOSE)
        while after < len(response) and response[after].isspace():  # what \s matches in a str pattern
            after += 1
        if after > last_open:
            return 0.0
        if response.startswith(ANSWER_OPEN, after):
            return 1.0
        position = close + 1
    return 0.0


@register_reward(
    "r1v",
    description="EasyR1 r1v: think/answer format + mathruler accuracy (GeoQA)",
    parts=("overall", "accuracy", "format", "tool_bonus", "grade_timeout"),
    accuracy="own",
    example=Example("<think>x</think><answer>\\frac{1}{2}</answer>", "0.5", 1.0),  # mathruler: 1/2 is 0.5
)
def r1v(item: RewardInput, params: Mapping[str, Any]) -> Parts:
    """EasyR1's r1v reward for GeoQA: overall = (1 - w) * accuracy + w * format, accuracy by mathruler's
    ``grade_answer`` (what EasyR1 uses), run under a hard time limit (``grade_timeout`` flags an overrun, graded
    incorrect). One deliberate difference: without an answer tag the accuracy is 0 (the design's extraction
    rule), where EasyR1 grades the whole response."""
    answer = extract_answer(item.response)
    grade = grade_answer_within(answer, item.ground_truth.strip()) if answer is not None else None
    accuracy = 1.0 if grade is not None and grade.correct else 0.0
    form = r1v_format(item.response)
    bonus = conditional_tool_bonus(accuracy, item.tool_outcome, params["tool_bonus"])
    weight = params["format_weight"]
    return {
        "overall": (1 - weight) * accuracy + weight * form + bonus,
        "accuracy": accuracy,
        "format": form,
        "tool_bonus": bonus,
        "grade_timeout": float(grade is not None and grade.timed_out),
    }
