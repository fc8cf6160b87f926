"""Every reward on a table of hand-computed cases (one comment per case), the registry contract, and the
properties the design promises: v3_gra never pays a wrong answer more than a right one, every reward stays in
its documented bounds, and a delta of 0 switches its term off exactly."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chartrl.config import ConfigError, config_schema, parse_reward_spec
from chartrl.judge.panel import JudgePanel
from chartrl.judge.reference import ReferenceJudge
from chartrl.rewards import PARTS, REWARDS, RewardInput, bounds, get_reward
from chartrl.rewards.definitions import r1v as r1v_module
from chartrl.rewards.definitions import v3 as v3_module
from chartrl.rewards.registry import accuracy_signal

from conftest import examples
from judge_server import FailingJudge

GOOD = "The bar for 2019 reads 42.\n<answer>42</answer>"
PANEL_MEAN = "panel-mean"  # marker: build a mean panel for this case


def reference_judge() -> ReferenceJudge:
    return ReferenceJudge()


def mean_panel() -> JudgePanel:
    members = [
        ReferenceJudge("exact", numeric_tolerance=0.0),
        ReferenceJudge("tolerant", numeric_tolerance=0.01),
        ReferenceJudge("relaxed", numeric_tolerance=0.05),
    ]
    return JudgePanel(members, combine="mean")


CASES = [
    # (reward, params, judge, input fields, expected parts; defaults d_*=0.1, budget 256, ramp 128)
    # --- v1_rule
    ("v1_rule", {}, None, dict(response=GOOD, ground_truth="42"), dict(overall=1.0, accuracy=1.0)),  # right
    ("v1_rule", {}, None, dict(response="<answer>43.5</answer>", ground_truth="42"), dict(overall=1.0)),  # within 5%
    ("v1_rule", {}, None, dict(response="<answer>17</answer>", ground_truth="42"), dict(overall=0.0)),  # wrong
    ("v1_rule", {}, None, dict(response="42", ground_truth="42"), dict(overall=0.0, accuracy=0.0)),  # no answer tag
    ("v1_rule", {}, None, dict(response="<answer>45%</answer>", ground_truth="45"), dict(overall=0.0)),  # % strict
    (  # tool bonus: right and a tool ran
        "v1_rule",
        {"tool_bonus": 0.5},
        None,
        dict(response=GOOD, ground_truth="42", tool_outcome="executed", tool_calls=1),
        dict(overall=1.5, tool_bonus=0.5),
    ),
    (  # tool bonus: right but the tool failed
        "v1_rule",
        {"tool_bonus": 0.5},
        None,
        dict(response=GOOD, ground_truth="42", tool_outcome="failed", tool_calls=1),
        dict(overall=1.0, tool_bonus=0.0),
    ),
    (  # tool bonus: a tool ran but the answer is wrong
        "v1_rule",
        {"tool_bonus": 0.5},
        None,
        dict(response="<answer>17</answer>", ground_truth="42", tool_outcome="executed", tool_calls=1),
        dict(overall=0.0, tool_bonus=0.0),
    ),
    # --- v1_judge (the offline reference judge)
    (  # the judge reads the percentage as a unit
        "v1_judge",
        {},
        reference_judge,
        dict(response="<answer>45%</answer>", ground_truth="45"),
        dict(overall=1.0, accuracy=1.0, judge_failure=0.0),
    ),
    (
        "v1_judge",
        {},
        reference_judge,
        dict(response="<answer>43</answer>", ground_truth="42"),
        dict(overall=0.0),
    ),  # exact
    (
        "v1_judge",
        {},
        reference_judge,
        dict(response="<answer>twelve</answer>", ground_truth="12"),
        dict(overall=1.0),
    ),  # word
    ("v1_judge", {}, reference_judge, dict(response="no tag: 42", ground_truth="42"), dict(overall=0.0)),  # no tag
    # --- v2_shaped
    (  # right, well-formed, no tool, short: 1 + 0.1
        "v2_shaped",
        {},
        None,
        dict(response=GOOD, ground_truth="42", response_tokens=100),
        dict(overall=1.1, accuracy=1.0, format=0.1, length=0.0, tool=0.0),
    ),
    (  # right, well-formed, tool executed: 1 + 0.1 + 0.1
        "v2_shaped",
        {},
        None,
        dict(response=GOOD, ground_truth="42", tool_outcome="executed", tool_calls=1),
        dict(overall=1.2, tool=0.1),
    ),
    (  # halfway down the ramp: (320 - 256) / 128 = 0.5 -> -0.05
        "v2_shaped",
        {},
        None,
        dict(response=GOOD, ground_truth="42", response_tokens=320),
        dict(overall=1.05, length=-0.05),
    ),
    (  # past the ramp the length term is clipped at -1
        "v2_shaped",
        {},
        None,
        dict(response=GOOD, ground_truth="42", response_tokens=10_000),
        dict(overall=1.0, length=-0.1),
    ),
    (  # wrong, malformed answer turn, malformed tool call, too long: every penalty
        "v2_shaped",
        {},
        None,
        dict(response="<answer>17</answer> ok?", ground_truth="42", tool_outcome="malformed", response_tokens=512),
        dict(overall=-0.3, accuracy=0.0, format=-0.1, length=-0.1, tool=-0.1),
    ),
    (  # a wrong answer still earns the shaping bonuses in v2 (that is what v3 changes)
        "v2_shaped",
        {},
        None,
        dict(response="<answer>17</answer>", ground_truth="42", tool_outcome="executed"),
        dict(overall=0.2, format=0.1, tool=0.1),
    ),
    (  # a malformed tool call leaves the format term alone (one mistake, one penalty)
        "v2_shaped",
        {},
        None,
        dict(response=GOOD, ground_truth="42", tool_outcome="malformed", tool_calls=1),
        dict(overall=1.0, format=0.1, tool=-0.1),
    ),
    (  # d_tool 0 (the no-tool baseline): the tool term is off
        "v2_shaped",
        {"d_tool": 0.0},
        None,
        dict(response=GOOD, ground_truth="42", tool_outcome="failed"),
        dict(overall=1.1, tool=0.0),
    ),
    (  # own deltas per term
        "v2_shaped",
        {"d_format": 0.5, "d_length": 0.2, "d_tool": 0.3},
        None,
        dict(response="<answer>42</answer>", ground_truth="42", tool_outcome="executed", response_tokens=288),
        dict(overall=1.0 + 0.5 - 0.05 + 0.3),
    ),
    (  # judge accuracy inside the shaped reward
        "v2_shaped",
        {"accuracy": "judge"},
        reference_judge,
        dict(response="<answer>45 percent</answer>", ground_truth="45"),
        dict(overall=1.1, accuracy=1.0),
    ),
    # --- v3_gra
    (  # right, well-formed, tool ran, a little long: 1 + 0.1 + 0.1 - 0.05
        "v3_gra",
        {},
        None,
        dict(response=GOOD, ground_truth="42", tool_outcome="executed", response_tokens=320),
        dict(overall=1.15, format=0.1, tool=0.1, length=-0.05),
    ),
    (  # wrong but well-formed with a tool: the bonuses are gated off
        "v3_gra",
        {},
        None,
        dict(response="<answer>17</answer>", ground_truth="42", tool_outcome="executed"),
        dict(overall=0.0, format=0.0, tool=0.0),
    ),
    (  # wrong and every penalty: penalties always count
        "v3_gra",
        {},
        None,
        dict(response="<answer>17</answer>!", ground_truth="42", tool_outcome="failed", response_tokens=512),
        dict(overall=-0.3, format=-0.1, tool=-0.1, length=-0.1),
    ),
    (  # right but malformed with a failed call: 1 - 0.1 - 0.1
        "v3_gra",
        {},
        None,
        dict(response="<answer>42</answer> done", ground_truth="42", tool_outcome="failed"),
        dict(overall=0.8),
    ),
    (  # the conditional tool bonus on top: 1 + 0.1 + 0.1 + 0.5
        "v3_gra",
        {"tool_bonus": 0.5},
        None,
        dict(response=GOOD, ground_truth="42", tool_outcome="executed"),
        dict(overall=1.7, tool_bonus=0.5),
    ),
    (  # panel by mean: 42.3 vs 42 is 0.7% off, so 2 of 3 members agree; bonuses scaled by 2/3
        "v3_gra",
        {"accuracy": "panel"},
        PANEL_MEAN,
        dict(response="<answer>42.3</answer>", ground_truth="42", tool_outcome="executed"),
        dict(overall=2 / 3 * 1.2, accuracy=2 / 3, format=2 / 3 * 0.1, tool=2 / 3 * 0.1),
    ),
    # --- r1v (EasyR1)
    (  # think + answer, right: 0.5 * 1 + 0.5 * 1
        "r1v",
        {},
        None,
        dict(response="<think>30+30</think> <answer>60</answer>", ground_truth="60"),
        dict(overall=1.0, accuracy=1.0, format=1.0),
    ),
    (  # right but no think block
        "r1v",
        {},
        None,
        dict(response="<answer>60</answer>", ground_truth="60"),
        dict(overall=0.5, format=0.0),
    ),
    (  # mathruler reads LaTeX: \frac{1}{2} is 0.5
        "r1v",
        {},
        None,
        dict(response="<think>half</think><answer>\\frac{1}{2}</answer>", ground_truth="0.5"),
        dict(overall=1.0, accuracy=1.0),
    ),
    (  # well-formed but wrong
        "r1v",
        {},
        None,
        dict(response="<think>x</think><answer>61</answer>", ground_truth="60"),
        dict(overall=0.5, accuracy=0.0),
    ),
    (  # no answer tag: accuracy 0 (EasyR1 would grade the whole text)
        "r1v",
        {},
        None,
        dict(response="60", ground_truth="60"),
        dict(overall=0.0, accuracy=0.0),
    ),
    (  # format weight from params
        "r1v",
        {"format_weight": 0.1},
        None,
        dict(response="<answer>60</answer>", ground_truth="60"),
        dict(overall=0.9),
    ),
    # --- multiple_choice
    (  # the boxed letter is the label
        "multiple_choice",
        {},
        None,
        dict(response="angle ABC is 30°, so \\boxed{B}", ground_truth="B"),
        dict(overall=1.0, accuracy=1.0, format=1.0),
    ),
    (  # a different letter
        "multiple_choice",
        {},
        None,
        dict(response="\\boxed{C}", ground_truth="B"),
        dict(overall=0.0, format=1.0),
    ),
    (  # the last box counts
        "multiple_choice",
        {},
        None,
        dict(response="\\boxed{C}... no, \\boxed{B}", ground_truth="B"),
        dict(overall=1.0),
    ),
    (  # no box at all
        "multiple_choice",
        {},
        None,
        dict(response="The answer is B", ground_truth="B"),
        dict(overall=0.0, format=0.0),
    ),
]


def _judge_for(marker):
    if marker is None:
        return None
    return mean_panel() if marker == PANEL_MEAN else marker()


@pytest.mark.parametrize("name,params,judge,fields,expected", CASES)
def test_reward_table(name, params, judge, fields, expected):
    reward = get_reward(name, params, judge=_judge_for(judge))
    [result] = reward([RewardInput(**fields)])
    assert tuple(result) == PARTS[name]  # every part, in the stable order
    for part, value in expected.items():
        assert result[part] == pytest.approx(value), part


def test_schema_reward_enum_is_the_registry():
    assert config_schema()["$defs"]["reward"]["properties"]["name"]["enum"] == sorted(REWARDS)


def test_unknown_reward_lists_the_valid_names_sorted():
    with pytest.raises(KeyError) as err:
        get_reward("v4_magic")
    assert ", ".join(sorted(REWARDS)) in str(err.value)


@pytest.mark.parametrize(
    "name,params,fragments",
    [
        ("v2_shaped", {"d_format": -1}, ["reward.d_format", "-1", "minimum"]),  # negative delta
        ("v3_gra", {"accuracy": "llm"}, ["reward.accuracy", '"llm"', "rule, judge, panel"]),  # unknown signal
        ("v1_rule", {"d_tool": 0.1}, ["reward", "d_tool", "allowed keys", "tool_bonus"]),  # another reward's param
    ],
)
def test_bad_params_name_key_value_and_allowed(name, params, fragments):
    with pytest.raises(ConfigError) as err:
        get_reward(name, params)
    for fragment in fragments:
        assert fragment in str(err.value)


def test_judge_based_rewards_need_the_right_judge():
    with pytest.raises(ValueError, match="judge_for_accuracy"):
        get_reward("v1_judge")
    with pytest.raises(ValueError, match="panel"):
        get_reward("v3_gra", {"accuracy": "panel"}, judge=ReferenceJudge())


def test_no_answer_tag_is_not_sent_to_the_judge():
    judge = ReferenceJudge()
    get_reward("v1_judge", judge=judge)([RewardInput("42", "42"), RewardInput("<answer>42</answer>", "42")])
    assert judge.usage.verdicts == 1


def test_a_judge_failure_is_counted_and_the_rule_stands_in():
    right, wrong = RewardInput("<answer>42</answer>", "42"), RewardInput("<answer>17</answer>", "42")
    results = get_reward("v1_judge", judge=FailingJudge())([right, wrong])
    assert [r["judge_failure"] for r in results] == [1.0, 1.0]
    assert [r["accuracy"] for r in results] == [1.0, 0.0]  # relaxed accuracy, not a blanket 0


# ----------------------------------------------------------------------------------------------------------------
# Properties
# ----------------------------------------------------------------------------------------------------------------

deltas = st.floats(min_value=0, max_value=2, allow_nan=False)
shaped_params = st.fixed_dictionaries(
    {
        "accuracy": st.just("rule"),
        "d_format": deltas,
        "d_length": deltas,
        "d_tool": deltas,
        "length_budget": st.integers(1, 1000),
        "length_ramp": st.integers(1, 1000),
        "tool_bonus": deltas,
    }
)
# A response is a shape with a slot for the answer, so a right and a wrong answer share every shaping input.
shapes = st.sampled_from(
    [
        "<answer>{}</answer>",  # well-formed
        "reasoning...\n<answer>{}</answer>\n",  # well-formed, with reasoning
        "<answer>{}</answer> and more",  # text after the answer
        "<answer>{}</answer><answer>{}</answer>",  # two answers
        "<answer>{}",  # unclosed
        "{}",  # no tags
    ]
)
items = st.fixed_dictionaries(
    {
        "tool_outcome": st.sampled_from(["none", "executed", "malformed", "failed"]),
        "tool_calls": st.integers(0, 3),
        "response_tokens": st.integers(0, 5000),
    }
)


@settings(max_examples=examples(300), deadline=None)
@given(shaped_params, shapes, items)
def test_v3_never_pays_a_wrong_answer_more_than_a_right_one(params, shape, fields):
    reward = get_reward("v3_gra", params)
    right, wrong = (RewardInput(shape.replace("{}", answer), "42", **fields) for answer in ("42", "17"))
    r, w = reward([right, wrong])
    if r["accuracy"] == 1.0:  # the shape lets a right answer be read
        assert w["overall"] < r["overall"]
    assert w["overall"] <= r["overall"]


@settings(max_examples=examples(300), deadline=None)
@given(shaped_params, shapes, items, st.floats(0, 1), st.floats(0, 1))
def test_v3_is_monotone_in_a_fractional_accuracy(params, shape, fields, a, b):
    item = RewardInput(shape.replace("{}", "42"), "42", **fields)
    low, high = sorted([a, b])
    assert (
        v3_module.v3_gra(low, item, params)["overall"]
        <= v3_module.v3_gra(high, item, params)["overall"] + 1e-12
    )


@settings(max_examples=examples(300), deadline=None)
@given(
    st.sampled_from(sorted(REWARDS)),
    shaped_params,
    st.sampled_from([0.0, 0.3, 1.0]),
    st.text(max_size=60),
    shapes,
    items,
    st.sampled_from(["42", "B", "0.5", "[1, 2]"]),
)
def test_every_reward_stays_in_its_documented_bounds(name, shaped, format_weight, noise, shape, fields, truth):
    takes = parse_reward_spec({"name": name}).params  # every param the reward takes, at its default
    params = {key: value for key, value in shaped.items() if key in takes}  # the shaped ones (any new reward's too)
    if name == "r1v":
        params["format_weight"] = format_weight
    judge = ReferenceJudge() if accuracy_signal(name, params) == "judge" else None  # v1_judge, deepeyes
    reward = get_reward(name, params, judge=judge)
    responses = [
        shape.replace("{}", truth),
        shape.replace("{}", noise),
        f"<think>{noise}</think><answer>{truth}</answer>",
    ]
    low, high = reward.bounds
    assert (low, high) == bounds(name, reward.params)
    for result in reward([RewardInput(r, truth, **fields) for r in responses]):
        assert low - 1e-9 <= result["overall"] <= high + 1e-9


@settings(max_examples=examples(200), deadline=None)
@given(
    st.sampled_from(["v2_shaped", "v3_gra"]),
    st.sampled_from(["d_format", "d_length", "d_tool"]),
    shaped_params,
    st.floats(0, 1),
    items,
    items,
)
def test_a_zero_delta_switches_its_term_off_exactly(name, delta, params, accuracy, fields_a, fields_b):
    params = {**params, delta: 0.0}
    combine = REWARDS[name].combine
    # two items that differ only in the input of the switched-off term
    a = RewardInput("<answer>42</answer>", "42", **fields_a)
    varied = {
        "d_format": dict(response="<answer>42</answer> trailing"),
        "d_length": dict(response_tokens=fields_b["response_tokens"]),
        "d_tool": dict(tool_outcome=fields_b["tool_outcome"]),
    }[delta]
    b = RewardInput(**{**a.__dict__, **varied})
    part = {"d_format": "format", "d_length": "length", "d_tool": "tool"}[delta]
    ra, rb = combine(accuracy, a, params), combine(accuracy, b, params)
    assert ra[part] == rb[part] == 0.0
    # everything but the conditional bonus (which reads the tool outcome) is unchanged
    assert ra["overall"] - ra["tool_bonus"] == pytest.approx(rb["overall"] - rb["tool_bonus"], abs=1e-12)
    if delta != "d_tool" or params["tool_bonus"] == 0:
        assert ra["overall"] == rb["overall"]


@settings(max_examples=examples(500), deadline=None)
@given(
    st.lists(
        st.sampled_from(["<think>", "</think>", "<answer>", "</answer>", " ", "\n", "\u2028", "\x1c", "x", "<"]),
        max_size=12,
    ).map("".join)
)
def test_r1v_format_gives_easyr1s_verdict(response):
    # the linear check agrees with EasyR1's regex on every arrangement of its tags, whitespace and text
    assert r1v_module.r1v_format(response) == float(bool(r1v_module.R1V_FORMAT.fullmatch(response)))


def test_r1v_format_is_linear():
    # 20,000 closing think tags each followed by an opening answer tag: 37 s with the regex
    import time

    response = "<think>" + "</think>x<answer>" * 20_000 + "</answer>"
    start = time.perf_counter()
    assert r1v_module.r1v_format(response) == 0.0
    assert time.perf_counter() - start < 0.5


def test_bonus_on_wrong_is_what_v2_pays_a_wrong_answer_and_v3_does_not():
    """v2's shaping pays a wrong, well-formed answer after a call that ran (+0.1 format, +0.1 tool); v3's gate pays
    it nothing, nor v1's conditional tool bonus; a right answer's bonus is not counted; a reward that declares no
    bonuses has no such figure."""
    from chartrl.rewards.registry import bonus_on_wrong

    def items(*cases):
        return [
            RewardInput(response=f"<answer>{answer}</answer>", ground_truth="40", tool_outcome=outcome, tool_calls=1)
            for answer, outcome in cases
        ]

    batch = items(("70", "executed"), ("40", "executed"), ("70", "failed"), ("70", "none"))
    v2 = get_reward("v2_shaped", {"d_format": 0.1, "d_length": 0.1, "d_tool": 0.1})(batch)
    v3 = get_reward("v3_gra", {})(batch)
    # wrong after a call that ran: 0.2; right: not counted; wrong after a failed call: 0.1 (format only); no call: 0.1
    assert bonus_on_wrong(v2, REWARDS["v2_shaped"].bonuses) == pytest.approx((0.2 + 0.0 + 0.1 + 0.1) / 4)
    assert bonus_on_wrong(v3, REWARDS["v3_gra"].bonuses) == 0.0
    v1 = get_reward("v1_rule", {"tool_bonus": 0.5})(batch)  # its tool bonus is paid on a right answer only
    assert bonus_on_wrong(v1, REWARDS["v1_rule"].bonuses) == 0.0
    assert bonus_on_wrong(v1, REWARDS["r1v"].bonuses) is None  # a reward whose parts are signals declares none
