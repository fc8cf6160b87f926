"""Every model output is data: any string a model can sample goes through the tool path, answer extraction, every
reward and scorer, and the verl reward adapter to an observation, a verdict or a counted error, within a bounded
time, never an exception or a hang.

The strategy glues the protocol's own pieces (tags, tool names, labels, JSON fragments, escapes, numbers, power
towers, whitespace runs) with arbitrary text, so the generated turns reach deep into the parsers; the explicit
examples are the outputs that once crashed or hung a run.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from PIL import Image
from tokenizers import Tokenizer, models, pre_tokenizers

from chartrl.answers import extract_answer, extract_choice, is_well_formed, parse_number, relaxed_accuracy
from chartrl.judge.reference import ReferenceJudge
from chartrl.rewards import REWARDS, RewardInput, get_reward
from chartrl.rewards.registry import accuracy_signal
from chartrl.rewards.scorers import SCORERS
from chartrl.rewards.symbolic import grade_answer_within
from chartrl.tools import TOOLS, parse_tool_calls, run_tool_text
from chartrl.verl_backend import rewards as verl_rewards

from conftest import examples

CHART = Image.new("RGB", (96, 64), "white")
BBOXES = {
    "x_values": {"2019": [0.1, 0.2, 0.3, 0.9], "2020": [0.4, 0.3, 0.6, 0.9], "United States": [0.7, 0.1, 0.9, 0.9]},
    "y_values": {},
}
LABELS = {axis: list(boxes) for axis, boxes in BBOXES.items()}
TRUTHS = ("42", "45%", "[2019, 2020]", "United States", "C", "\\frac{1}{2}", "2\\sqrt{3}")

CALL_BOUND_S = 2.0
"""Seconds any one call may take (on a loaded two-core machine); linear work on the largest example takes
milliseconds."""
GRADE_TIMEOUT_S = 0.5
"""The time limit of r1v's mathruler worker here (chartrl.rewards.symbolic.GRADE_TIMEOUT_S in a run): the examples
that overrun it (a huge power) wait it out in every r1v path, and the limit's value changes no outcome but the wait."""
SYMBOLIC_BOUND_S = GRADE_TIMEOUT_S + 3.0
"""r1v calls mathruler in a worker killed after GRADE_TIMEOUT_S; a worker's start is not counted in that limit."""

SLOWEST: dict[str, float] = defaultdict(float)
CALLS: dict[str, int] = defaultdict(int)


@pytest.fixture(scope="module", autouse=True)
def short_grading_limit():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(grade_answer_within, "__defaults__", (GRADE_TIMEOUT_S,))
        yield


FRAGMENTS = st.sampled_from(
    [
        "<tool_call>",
        "</tool_call>",
        "<answer>",
        "</answer>",
        "<think>",
        "</think>",
        "\\boxed{",
        "}",
        "\nassistant\n",
        "\nuser\n",
        '{"name": ',
        '"arguments": ',
        *(f'"{name}"' for name in TOOLS),
        '"x_values"',
        '"y_values"',
        '"bbox_2d"',
        '["2019"]',
        '[" united states "]',
        "[0.1, 0.1, 0.5, 0.5]",
        "[" + "9" * 400 + ", 0, 1, 1]",
        '"\\ud800"',
        '"\\udfff\\ud800"',
        "\ud800",
        "NaN",
        "1e999",
        "9**9**9**9",
        "9^9^9",
        "45%",
        "[2019, 2020]",
        "1,234",
        " " * 3000,
        "{" * 50,
        "[" * 50,
        ",",
        ":",
        '"',
    ]
)
MODEL_TEXT = st.lists(st.one_of(FRAGMENTS, st.text(max_size=20)), max_size=25).map("".join)

EXAMPLES = [
    '<tool_call>{"name": "\\ud800", "arguments": {}}</tool_call>',  # a lone surrogate as the tool name
    '<tool_call>{"name": "focus_on_x_values_with_mask", "arguments": {"x_values": ["\\ud800"]}}</tool_call>',
    '<tool_call>{"name": "zoom_in", "arguments": {"bbox_2d": [' + "9" * 400 + ", 0, 1, 1]}}</tool_call>",
    "<answer>1" + " " * 30_000 + "2</answer>",  # quadratic list splitting against a list target
    "<think>" + "</think><answer>" * 16_000,  # 260 KB: the r1v format regex was quadratic
    "<think>x</think><answer>9**9**9**9</answer>",  # sympy evaluates the power tower
    "<answer>9**99999999</answer>",
    "<answer>\ud800</answer>",
]


def timed(component: str, call, *args, **kwargs):
    bound = SYMBOLIC_BOUND_S if component in ("reward r1v", "verl r1v", "scorer r1v") else CALL_BOUND_S
    start = time.perf_counter()
    result = call(*args, **kwargs)
    elapsed = time.perf_counter() - start
    SLOWEST[component] = max(SLOWEST[component], elapsed)
    CALLS[component] += 1
    assert elapsed < bound, f"{component} took {elapsed:.1f} s (bound {bound} s)"
    return result


def encodable(text: str) -> None:
    text.encode("utf-8")  # what a tokenizer, a parquet file or stdout needs
    TOKENIZER.encode(text)


TOKENIZER = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
TOKENIZER.pre_tokenizer = pre_tokenizers.Whitespace()
JUDGE = ReferenceJudge()


def _reward_object(name: str):
    """Reward ``name`` as a run builds it; one that grades answers by a judge (or can) gets the offline judge."""
    params = {"accuracy": "judge"} if REWARDS[name].accuracy == "configured" else {}
    judged = accuracy_signal(name, params) in ("judge", "panel")
    return get_reward(name, params, judge=JUDGE) if judged else get_reward(name, params)


REWARD_OBJECTS = {name: _reward_object(name) for name in REWARDS}


def check_tool_path(text: str) -> str:
    outcome = timed("run_tool_text", run_tool_text, text, CHART, BBOXES, None, max_calls=2)
    encodable(outcome.observation)
    assert outcome.outcome in ("none", "executed", "malformed", "failed")
    parsed = timed("parse_tool_calls", parse_tool_calls, text, None, LABELS, max_calls=2)
    if parsed.error is not None:
        encodable(parsed.error.observation)
    return outcome.outcome


def check_answers(text: str, truth: str) -> None:
    answer = timed("extract_answer", extract_answer, text)
    timed("is_well_formed", is_well_formed, text)
    timed("extract_choice", extract_choice, text)
    for candidate in (text, answer or ""):
        timed("parse_number", parse_number, candidate)
        score = timed("relaxed_accuracy", relaxed_accuracy, candidate, truth)
        assert score in (0.0, 1.0)


def check_rewards(text: str, truth: str, outcome: str) -> None:
    item = RewardInput(
        response=text, ground_truth=truth, question="Which year?", tool_outcome=outcome, response_tokens=len(text)
    )
    for name, reward in REWARD_OBJECTS.items():
        [parts] = timed(f"reward {name}", reward, [item])
        assert set(parts) == set(reward.parts) and all(isinstance(v, float) for v in parts.values())
    for name, scorer in SCORERS.items():
        if name == "panel":
            continue  # a panel is the judge scorer with several judges: the same code path
        result = timed(f"scorer {name}", scorer, [item], JUDGE)
        json.dumps(result, ensure_ascii=False).encode("utf-8", "backslashreplace")
    extra = {"bboxes": json.dumps(BBOXES), "question": "Which year?", "id": "row-1"}
    for name in REWARDS:
        params = {"accuracy": "judge"} if name in ("v2_shaped", "v3_gra") else {}
        result = timed(
            f"verl {name}",
            verl_rewards.compute_score,
            "chartqa_human",
            text,
            truth,
            {**extra, "response_tokens": len(text)},
            reward=name,
            params=params,
            judge={"backend": "reference"},
            tools=list(TOOLS),
            max_calls=2,
        )
        assert isinstance(result["score"], float)
    timed("verl generation_record", verl_rewards.generation_record, "chartqa_human", text, truth, extra)


@settings(
    max_examples=examples(300),
    deadline=None,  # each call is bounded by timed(); hypothesis' deadline would flake on a loaded machine
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(text=MODEL_TEXT, truth=st.sampled_from(TRUTHS))
@example(text=EXAMPLES[0], truth="42")
@example(text=EXAMPLES[1], truth="42")
@example(text=EXAMPLES[2], truth="42")
@example(text=EXAMPLES[3], truth="[1, 2]")
@example(text=EXAMPLES[4], truth="42")
@example(text=EXAMPLES[5], truth="2\\sqrt{3}")
@example(text=EXAMPLES[6], truth="0.5")
@example(text=EXAMPLES[7], truth="42")
def test_any_model_output_is_data(text, truth):
    outcome = check_tool_path(text)
    check_answers(text, truth)
    check_rewards(text, truth, outcome)


@pytest.mark.parametrize("text", EXAMPLES)
def test_a_turn_of_several_assistant_passes_is_data(text):
    """The verl adapter splits a response into turns at the chat boundary: each example as a later turn too."""
    response = '<tool_call>{"name": "zoom_in", "arguments": {"bbox_2d": [0, 0, 0.5, 0.5]}}</tool_call>'
    response += "\nuser\n<tool_response>Zoomed in.</tool_response>\nassistant\n" + text
    result = timed(
        "verl v3_gra",
        verl_rewards.compute_score,
        "chartqa_human",
        response,
        "42",
        {"bboxes": json.dumps(BBOXES), "response_tokens": 10},
        reward="v3_gra",
        tools=list(TOOLS),
        max_calls=2,
    )
    assert isinstance(result["score"], float)


def test_report_slowest_calls(capsys):
    """Not a check: prints the fuzz volume and the slowest call per component (run with -s to read it)."""
    with capsys.disabled():
        for component in sorted(SLOWEST):
            print(f"{component:28s} calls {CALLS[component]:6d}  slowest {SLOWEST[component] * 1000:8.1f} ms")
