"""The DeepEyes reward (verl's recipe: 0.8 judge accuracy + 0.2 format penalty + 1.2 tool bonus on right answers),
judged by an LLM judge over the OpenAI protocol (the loopback test server, which answers with the offline reference
judge's verdicts): the tool bonus is paid only when the judge finds the answer right and a tool call executed."""

from __future__ import annotations

import pytest

from chartrl.config import JudgeConfig
from chartrl.rewards import RewardInput, build_reward
from chartrl.rewards.definitions.deepeyes import deepeyes_format_error
from chartrl.rewards.registry import bounds

from judge_server import FakeJudgeServer

KEY_ENV = "CHARTRL_TEST_DEEPEYES_KEY"


@pytest.fixture
def judged_reward(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "EMPTY")  # the recipe's key for a judge server without auth
    with FakeJudgeServer() as server:
        judge = JudgeConfig.from_dict(
            {
                "backend": "openai",
                "base_url": server.base_url,
                "model": "qwen-72b-stand-in",
                "api_key_env": KEY_ENV,
                "cache_path": None,
                "max_retries": 1,
                "timeout_s": 5.0,
            }
        )
        yield build_reward("deepeyes", {}, judge), server


def _item(answer: str, outcome: str, truth: str = "43", calls: int = 1) -> RewardInput:
    response = f"<think>The box is small; after the zoom it reads clearly.</think><answer>{answer}</answer>"
    return RewardInput(
        response=response,
        ground_truth=truth,
        question="What number is written in the small box in the top left of the image?",
        tool_outcome=outcome,
        tool_calls=calls if outcome != "none" else 0,
        id=f"{answer}-{outcome}",
    )


def test_the_tool_bonus_is_paid_only_on_right_answers_with_a_tool_that_ran(judged_reward):
    reward, server = judged_reward
    items = [
        _item("43", "executed"),  # right, zoomed: 0.8 + 1.2
        _item("34", "executed"),  # wrong, zoomed: no bonus
        _item("43", "none"),  # right, no tool: no bonus
        _item("43", "failed"),  # right, the zoom's box was refused: no bonus (the recipe pays any call text)
        _item("forty-three", "executed"),  # right in words: the judge decides, not the rule
    ]
    evaluation = reward.evaluate(items)
    got = [(r["overall"], r["accuracy"], r["tool_bonus"], r["format"]) for r in evaluation.rewards]
    assert got == [
        (pytest.approx(2.0), 1.0, 1.2, 0.0),
        (0.0, 0.0, 0.0, 0.0),
        (pytest.approx(0.8), 1.0, 0.0, 0.0),
        (pytest.approx(0.8), 1.0, 0.0, 0.0),
        (pytest.approx(2.0), 1.0, 1.2, 0.0),
    ]
    assert server.requests == 3  # each distinct answer (43, 34, forty-three) went to the judge over HTTP, once
    assert all(v is not None and not v.failed for v in evaluation.verdicts)
    # the bonus never makes a wrong answer worth more than a right one without tools
    assert max(r["overall"] for r, i in zip(evaluation.rewards, items, strict=True) if i.ground_truth != "34") > 0


def test_format_errors_cost_the_format_weight_whatever_the_verdict(judged_reward):
    reward, _ = judged_reward
    unbalanced = RewardInput(
        response="<think>zoom<answer>43</answer>",
        ground_truth="43",
        question="q?",
        tool_outcome="executed",
        tool_calls=1,
    )
    no_tag = RewardInput(response="43", ground_truth="43", question="q?")
    first, second = reward([unbalanced, no_tag])
    assert first["format"] == -1.0 and first["overall"] == pytest.approx(0.8 * 1.0 - 0.2 + 1.2)
    assert second == {
        "overall": pytest.approx(-0.2),
        "accuracy": 0.0,
        "format": -1.0,
        "tool_bonus": 0.0,
        "judge_failure": 0.0,
    }  # no answer tag: nothing to judge, accuracy 0


def test_the_recipe_format_check_and_bounds():
    assert not deepeyes_format_error("<think>a</think> <answer>b</answer>")
    assert not deepeyes_format_error("<answer>b</answer>")
    assert deepeyes_format_error("<think>a</think><think>b<answer>c</answer>")
    assert deepeyes_format_error("<think>a</think><answer>b</answer><answer>c")
    assert deepeyes_format_error("<answer>" + "x" * 1000 + "</answer>")  # the recipe's judge-hacking guard
    assert bounds("deepeyes", {"accuracy_weight": 0.8, "format_weight": 0.2, "tool_bonus": 1.2}) == (-0.2, 2.0)
