"""The evaluation scorers: the same rewards, aggregated overall, per human/augmented split, with tool statistics and
judge failures counted apart."""

from __future__ import annotations

import pytest

from chartrl.config import load_config
from chartrl.judge import build_panel
from chartrl.judge.reference import ReferenceJudge
from chartrl.rewards import SCORERS, RewardInput, get_scorer

from conftest import REPO
from judge_server import FailingJudge

ITEMS = [
    # id, response, truth, subset, tool outcome, tool calls
    RewardInput("<answer>42</answer>", "42", subset="human", tool_outcome="executed", tool_calls=1, id="h1"),
    RewardInput("<answer>45%</answer>", "45", subset="human", tool_outcome="failed", tool_calls=1, id="h2"),
    RewardInput("no tag", "7", subset="human", id="h3"),
    RewardInput("<answer>Italy</answer>", "italy", subset="augmented", tool_outcome="executed", tool_calls=2, id="a1"),
]


def test_rule_scorer_aggregates_overall_per_subset_and_tools():
    result = get_scorer("rule")(ITEMS)
    aggregate = result["aggregate"]
    assert aggregate["scorer"] == "rule" and aggregate["n"] == 4 and aggregate["judge_failures"] == 0
    assert aggregate["accuracy"] == pytest.approx(2 / 4)  # 45% vs 45 is wrong for the rule
    assert aggregate["by_subset"] == {"augmented": {"accuracy": 1.0, "n": 1}, "human": {"accuracy": 1 / 3, "n": 3}}
    assert aggregate["tool_call_ratio"] == pytest.approx(3 / 4)
    assert aggregate["tool_success"] == pytest.approx(2 / 3)  # of the three tool-calling items, two executed
    assert [i["verdict"] for i in result["items"]] == ["correct", "incorrect", "incorrect", "correct"]
    assert [i["id"] for i in result["items"]] == ["h1", "h2", "h3", "a1"] and "judge" not in aggregate
    assert "not_sent" not in aggregate  # the rule scorer sends nothing anywhere


def test_rule_scorer_records_its_year_rule_and_grades_years_by_it():
    """The standard rule (ChartQA's own evaluation) accepts a neighbouring year, the strict one refuses it; each
    scores file says which rule it used, and each reward takes the rule as its year_rule param."""
    from chartrl.rewards import get_reward

    years = [RewardInput("<answer>2019</answer>", "2018", id="y1"), RewardInput("<answer>42</answer>", "42", id="y2")]
    standard, strict = get_scorer("rule")(years), get_scorer("rule")(years, None, "strict")
    assert standard["aggregate"]["year_rule"] == "standard" and standard["aggregate"]["accuracy"] == 1.0
    assert strict["aggregate"]["year_rule"] == "strict" and strict["aggregate"]["accuracy"] == 0.5
    judged = get_scorer("judge")(years, judge=ReferenceJudge(), year_rule="strict")
    assert judged["aggregate"]["year_rule"] == "strict"
    for name in ("v1_rule", "v2_shaped", "v3_gra"):
        assert get_reward(name).params["year_rule"] == "standard"
        assert [r["accuracy"] for r in get_reward(name, {"year_rule": "strict"})(years)] == [0.0, 1.0]
        assert [r["accuracy"] for r in get_reward(name)(years)] == [1.0, 1.0]
    with pytest.raises(Exception, match="year_rule"):
        get_reward("v1_rule", {"year_rule": "lenient"})


def test_judge_scorer_says_which_judge_and_that_it_is_not_an_llm():
    result = get_scorer("judge")(ITEMS, judge=ReferenceJudge())
    assert result["aggregate"]["accuracy"] == pytest.approx(3 / 4)  # the judge accepts 45% for 45
    assert result["aggregate"]["judge"]["kind"] == "reference (not an LLM)"
    assert result["items"][2]["judge_detail"] == "no answer tag: not judged"


def test_panel_scorer_shows_each_vote():
    panel = build_panel(load_config(root=REPO).judge)
    result = get_scorer("panel")([RewardInput("<answer>42.3</answer>", "42", id="x")], judge=panel)
    [item] = result["items"]
    assert item["votes"] == {"exact": "incorrect", "tolerant": "correct", "relaxed": "correct"}
    assert item["verdict"] == "correct"  # majority of 3
    assert "reference (not an LLM)" in result["aggregate"]["judge"]["kind"]


def test_judge_failures_are_counted_not_scored_incorrect():
    result = get_scorer("judge")(ITEMS, judge=FailingJudge())
    aggregate = result["aggregate"]
    assert aggregate["judge_failures"] == 3 and aggregate["judged"] == 0  # the untagged item: incorrect, unjudged
    # failures and items never sent (no answer tag) are reported apart
    assert (aggregate["sent_to_judge"], aggregate["not_sent"], aggregate["judge_failure_fraction"]) == (3, 1, 1.0)
    assert aggregate["accuracy"] == 0.0 and aggregate["n"] == 4
    assert [i["verdict"] for i in result["items"]].count("judge_failure") == 3


@pytest.mark.parametrize(
    "scorer, judge, judged",
    [
        ("rule", None, 4),  # the rule grades every item itself
        ("judge", ReferenceJudge(), 3),  # the untagged item h3 is scored incorrect without being sent
        ("judge", FailingJudge(), 0),  # three sent, none came back readable; h3 never sent
    ],
    ids=["rule", "judge", "judge-failing"],
)
def test_judged_counts_only_the_items_that_got_a_verdict_from_the_judge(scorer, judge, judged):
    aggregate = get_scorer(scorer)(ITEMS, judge=judge)["aggregate"]
    assert aggregate["judged"] == judged and aggregate["n"] == 4


def test_empty_and_unknown():
    assert get_scorer("rule")([])["aggregate"]["accuracy"] is None
    with pytest.raises(KeyError, match="judge, multiple_choice, panel, r1v, rule"):
        get_scorer("vibes")
    assert sorted(SCORERS) == ["judge", "multiple_choice", "panel", "r1v", "rule"]
    with pytest.raises(ValueError, match="panel"):
        get_scorer("panel")(ITEMS, judge=ReferenceJudge())
