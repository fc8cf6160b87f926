"""Answers that collapse to one value (chartrl.report.collapse): the check names the question type, the value and
the share of that value among the gold answers, which is all such a policy can score."""

from __future__ import annotations

import pytest

from chartrl.report.collapse import COLLAPSE_SHARE, answer_collapse, collect_collapse, series_collapse

YES_NO = ["Yes", "No"] * 25 + ["Yes"]  # 26 of 51 gold answers are Yes: 0.51


@pytest.mark.parametrize(
    "answers,truths,value,share,collapsed",
    [
        # every compare question answered Yes: collapsed, and it scores the share of Yes among the gold answers
        (["Yes"] * 51, YES_NO, "Yes", 1.0, True),
        # case and spaces do not make another value
        (["yes", " Yes", "YES "] * 17, YES_NO, "yes", 1.0, True),
        # 46 of 51 (0.90) is the threshold itself: collapsed
        (["Yes"] * 46 + ["No"] * 5, YES_NO, "Yes", 46 / 51, True),
        # 45 of 51 (0.88): below it, a policy that mostly says Yes but not always
        (["Yes"] * 45 + ["No"] * 6, YES_NO, "Yes", 45 / 51, False),
        # answers that follow the gold answers
        (YES_NO, YES_NO, "Yes", 26 / 51, False),
        # no answer at all on every question is a collapse too
        ([None] * 10, ["3"] * 10, "(no answer)", 1.0, True),
    ],
)
def test_answer_collapse(answers, truths, value, share, collapsed):
    found = answer_collapse(answers, truths)
    assert (found["value"], found["collapsed"]) == (value, collapsed)
    assert found["share"] == pytest.approx(share) and found["n"] == len(answers)


def test_the_gold_share_of_the_collapsed_value_is_what_it_scores():
    found = answer_collapse(["Yes"] * 51, YES_NO)
    assert found["gold_share"] == pytest.approx(26 / 51) and COLLAPSE_SHARE == 0.9
    assert answer_collapse([], []) is None


def _records(qtype, answers, truths):
    return [
        {"id": f"{qtype}{i}", "question_type": qtype, "answer": a, "truth": t}
        for i, (a, t) in enumerate(zip(answers, truths, strict=True))
    ]


def test_a_series_names_each_collapsed_question_type():
    records = _records("compare", ["Yes"] * 51, YES_NO) + _records("value", ["10", "20", "30"], ["10", "20", "40"])
    found = series_collapse(records)
    assert (
        found["compare"]["sentence"]
        == "compare: every answer is 'Yes' (0.51 is the share of 'Yes' among the gold answers)"
    )
    assert found["value"]["collapsed"] is False and found["value"]["sentence"] is None
    mostly = series_collapse(_records("compare", ["No"] + ["Yes"] * 50, YES_NO))
    assert mostly["compare"]["sentence"].startswith("compare: 98% of the answers are 'Yes'")


def test_records_without_answers_are_listed_not_checked():
    old = [{"id": "a", "question_type": "count", "score": 1.0}]  # a test_accuracy.json that keeps no answers
    summary = collect_collapse({"e1": _records("count", ["3"] * 10, ["3"] * 10), "e3": old})
    assert summary["without_answers"] == ["e3"] and summary["series"]["e1"]["count"]["collapsed"]


def test_each_collapse_is_named_once_with_every_series_it_holds_for():
    compare = _records("compare", ["Yes"] * 51, YES_NO)
    summary = collect_collapse({"e1": compare, "e3": compare, "e6": _records("compare", YES_NO, YES_NO)})
    assert summary["flagged"] == [
        {
            "sentence": "compare: every answer is 'Yes' (0.51 is the share of 'Yes' among the gold answers)",
            "series": ["e1", "e3"],
        }
    ]
