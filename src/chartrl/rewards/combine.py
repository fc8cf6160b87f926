"""The rewards: how each turns (accuracy, one response's shaping inputs, params) into ``{"overall", <parts>}``.
Pure per-item functions, so every reward definition (README, "Rewards and the judge") reads in a few lines and
the property tests call them directly. Each is registered by its decorator (``chartrl.rewards.registry``) with
its parts, what grades its answers, its worked example and its bounds. A new reward is a module of its own in
``chartrl.rewards.extra`` plus its entry in the config schema (``$defs/reward``): docs/rewards.md, "Add a
reward".

Part names are stable per reward (the decorator's ``parts``); the trainer logs each as ``reward/<part>``. In the
shaped rewards the parts are the *contributions* to ``overall`` (a term times its delta, after gating), so
``overall`` is their sum plus the accuracy, and a switched-off term reads 0. ``judge_failure`` is a flag (1 when
the judge gave no verdict and the rule accuracy stood in), not a contribution; so is r1v's ``grade_timeout`` (1
when mathruler overran its time limit and the answer was graded incorrect, ``chartrl.rewards.symbolic``).

Bounds (``d_*`` the deltas, ``b`` the tool bonus; property-tested):

| reward | overall in |
|---|---|
| v1_rule, v1_judge, multiple_choice | [0, 1 + b] |
| r1v | [0, 1 + b] |
| v2_shaped, v3_gra | [-(d_format + d_length + d_tool), 1 + d_format + d_tool + b] |
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from chartrl.answers import ANSWER_CLOSE, ANSWER_OPEN, extract_answer, extract_choice
from chartrl.rewards.inputs import RewardInput
from chartrl.rewards.registry import Example, register_reward
from chartrl.rewards.symbolic import grade_answer_within
from chartrl.rewards.terms import conditional_tool_bonus, format_term, length_term, tool_term

Parts = dict[str, float]


@register_reward(
    "v1_rule",
    description="relaxed accuracy of the final answer",
    parts=("overall", "accuracy", "tool_bonus"),
    accuracy="rule",
    example=Example("<answer>42</answer>", "42", 1.0),
)
@register_reward(
    "v1_judge",
    description="judge verdict on the final answer (1 correct, 0 not)",
    parts=("overall", "accuracy", "tool_bonus", "judge_failure"),
    accuracy="judge",
    example=Example("<answer>45%</answer>", "45", 1.0, metadata={"question": "Share of A?"}),  # the judge reads %
)
def accuracy_only(accuracy: float, item: RewardInput, params: Mapping[str, Any], judge_failure: float = 0.0) -> Parts:
    """v1_rule and v1_judge: overall = accuracy (+ the conditional tool bonus, off by default)."""
    bonus = conditional_tool_bonus(accuracy, item.tool_outcome, params["tool_bonus"])
    return {"overall": accuracy + bonus, "accuracy": accuracy, "tool_bonus": bonus, "judge_failure": judge_failure}


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


SHAPED_PARTS = ("overall", "accuracy", "format", "length", "tool", "tool_bonus", "judge_failure")


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
)
def v2_shaped(accuracy: float, item: RewardInput, params: Mapping[str, Any], judge_failure: float = 0.0) -> Parts:
    """overall = accuracy + d_format * format_term + d_length * length_term + d_tool * tool_term (+ tool bonus)."""
    parts = shaping_contributions(item, params)
    bonus = conditional_tool_bonus(accuracy, item.tool_outcome, params["tool_bonus"])
    overall = accuracy + sum(parts.values()) + bonus
    return {"overall": overall, "accuracy": accuracy, **parts, "tool_bonus": bonus, "judge_failure": judge_failure}


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


# --- DeepEyes (verl's recipe, recipe/deepeyes/deepeyes.py, compute_score) ------------------------------------------

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
