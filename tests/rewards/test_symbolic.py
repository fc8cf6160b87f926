"""mathruler under a hard time limit: a grade, or a counted timeout, never a hang."""

from __future__ import annotations

import time

import pytest

from chartrl.rewards import get_reward
from chartrl.rewards.inputs import RewardInput
from chartrl.rewards.symbolic import MAX_GRADED_CHARS, grade_answer_within


@pytest.mark.parametrize(
    "answer,truth,correct",
    [
        ("\\frac{1}{2}", "0.5", True),  # mathruler's symbolic equality, through the worker
        ("2\\sqrt{3}", "\\sqrt{12}", True),
        ("3", "4", False),
        ("3", "3", True),  # identical: no worker needed
        ("9**9**9**9", "0.5", False),  # a power tower: refused before sympy sees it
        ("1" * (MAX_GRADED_CHARS + 1), "0.5", False),  # over-long: refused
        ("\ud800", "0.5", False),  # a lone surrogate travels escaped to the worker
    ],
)
def test_grades(answer, truth, correct):
    grade = grade_answer_within(answer, truth)
    assert (grade.correct, grade.timed_out) == (correct, False)


def test_an_overrun_is_killed_counted_and_the_next_call_works():
    start = time.perf_counter()
    grade = grade_answer_within("9**99999999", "0.5", timeout_s=0.5)  # one power, a huge number
    assert (grade.correct, grade.timed_out) == (False, True)
    assert time.perf_counter() - start < 0.5 + 2.0
    assert grade_answer_within("1/2", "0.5").correct  # a fresh worker replaces the killed one


def test_r1v_counts_the_timeout(monkeypatch):
    monkeypatch.setattr("chartrl.rewards.symbolic.GRADE_TIMEOUT_S", 0.5)
    monkeypatch.setattr(grade_answer_within, "__defaults__", (0.5,))
    [parts] = get_reward("r1v")([RewardInput("<think>x</think><answer>9**99999999</answer>", "0.5")])
    assert parts["grade_timeout"] == 1.0 and parts["accuracy"] == 0.0
