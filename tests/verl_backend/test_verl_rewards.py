"""Every reward loads through verl's own ``get_custom_reward_fn`` (verl 0.9.1) and scores a sample, with the tool
statistics and the question arriving through ``extra_info`` as verl passes them; the names verl loads are generated
from the reward registry."""

from __future__ import annotations

import numpy as np
import pytest
from omegaconf import OmegaConf

from chartrl.rewards import PARTS, REWARDS, get_reward
from chartrl.verl_backend import rewards as verl_rewards

from conftest import REPO

ADAPTER_FILE = REPO / "src" / "chartrl" / "verl_backend" / "rewards.py"
VERL_EXTRA_INFO = {"num_turns": 4, "rollout_reward_scores": {}}
"""Keys verl adds to a sample's extra_info that are not reward inputs (ignored by the adapter)."""


def sample(name):
    """A registered reward's worked example (chartrl.rewards.Example) as verl hands it over: the params, the
    solution string, the ground truth, extra_info with numpy integers and verl's own keys, the expected score."""
    example = REWARDS[name].example
    extra_info = {k: np.int64(v) if isinstance(v, int) else v for k, v in example.metadata.items()}
    return dict(example.params), example.response, example.truth, {**extra_info, **VERL_EXTRA_INFO}, example.overall


def verl_config(name: str, params: dict, path: str = "pkg://chartrl.verl_backend.rewards"):
    return OmegaConf.create(
        {
            "reward": {
                "custom_reward_function": {
                    "path": path,
                    "name": name,
                    "reward_kwargs": {"params": params, "judge": {"backend": "reference"}},
                }
            }
        }
    )


def test_every_reward_has_an_adapter():
    assert all(callable(getattr(verl_rewards, name)) for name in REWARDS)


@pytest.mark.parametrize("name", sorted(REWARDS))
def test_get_custom_reward_fn_loads_and_scores_each_rewards_example(name):
    """Each registered reward's own example (registered with it: a new reward needs no edit here)."""
    from verl.trainer.ppo.reward import get_custom_reward_fn

    params, solution, truth, extra_info, expected = sample(name)
    fn = get_custom_reward_fn(verl_config(name, params))
    result = fn(data_source="chartqa_human", solution_str=solution, ground_truth=truth, extra_info=extra_info)
    assert result["score"] == pytest.approx(expected) == pytest.approx(result["overall"])
    assert set(result) == {"score", *PARTS[name], *verl_rewards.PROTOCOL_PARTS}


def test_loads_from_the_file_path_too():
    from verl.trainer.ppo.reward import get_custom_reward_fn

    fn = get_custom_reward_fn(verl_config("v1_rule", {}, path=str(ADAPTER_FILE)))
    assert fn(data_source="x", solution_str="<answer>42</answer>", ground_truth="42")["score"] == 1.0


def test_a_new_reward_is_its_decorated_function_and_its_schema_entry(monkeypatch):
    """What adding a reward takes: its function, decorated with register_reward, and its name in the config
    schema; verl's loader then finds it under its name in chartrl.verl_backend.rewards, with nothing added there."""
    from verl.trainer.ppo.reward import get_custom_reward_fn

    from chartrl.config import config_schema
    from chartrl.rewards import Example, register_reward

    names = config_schema()["$defs"]["reward"]["properties"]["name"]
    monkeypatch.setitem(names, "enum", [*names["enum"], "half_accuracy"])
    try:
        example = Example("<answer>42</answer>", "42", 0.5)

        @register_reward("half_accuracy", description="half", parts=("overall",), accuracy="rule", example=example)
        def half_accuracy(accuracy, item, params, judge_failure=0.0):
            return {"overall": accuracy / 2}

        fn = get_custom_reward_fn(verl_config("half_accuracy", {}, path=str(ADAPTER_FILE)))
        assert fn(data_source="x", solution_str="<answer>42</answer>", ground_truth="42")["score"] == 0.5
        with pytest.raises(ValueError, match="already registered"):
            register_reward("half_accuracy", description="again", parts=("overall",), accuracy="rule", example=example)(
                half_accuracy
            )
    finally:
        REWARDS.pop("half_accuracy", None)
        verl_rewards.reward_function.cache_clear()


def test_the_adapter_scores_as_the_reward_does():
    from chartrl.verl_backend.rewards import reward_input

    params, solution, truth, extra_info, _ = sample("v2_shaped")
    direct = get_reward("v2_shaped", params)([reward_input(solution, truth, "chartqa_human", extra_info)])[0]
    via_verl = verl_rewards.v2_shaped("chartqa_human", solution, truth, extra_info, params=params)
    protocol = {k: via_verl.pop(k) for k in verl_rewards.PROTOCOL_PARTS}
    assert via_verl == {"score": direct["overall"], **direct}
    assert protocol["protocol_well_formed"] == 1.0 and protocol["protocol_tool_call"] == 0.0  # no call in the text


@pytest.mark.parametrize("name", ["v1_rule", "v3_gra"])
def test_the_year_rule_reaches_the_reward_verl_loads(name):
    """reward_kwargs.params carries the series' year_rule to verl's reward as to the local trainer's."""
    from verl.trainer.ppo.reward import get_custom_reward_fn

    scores = {}
    for rule in ("standard", "strict"):
        fn = get_custom_reward_fn(
            verl_config(name, {"year_rule": rule, **({"d_length": 0} if name == "v3_gra" else {})})
        )
        scores[rule] = fn(data_source="chartqa_human", solution_str="<answer>2019</answer>", ground_truth="2018")
    assert scores["standard"]["accuracy"] == 1.0 and scores["strict"]["accuracy"] == 0.0


BBOXES = '{"x_values": {"2019": [0.1, 0.1, 0.4, 0.9], "2020": [0.5, 0.1, 0.9, 0.9]}, "y_values": {}}'
CALL = '<tool_call>\n{{"name": "focus_on_x_values_with_mask", "arguments": {{"x_values": {labels}}}}}\n</tool_call>'
TOOL_TURN = "\nuser\n<tool_response>\nMasked.\n</tool_response>\nassistant\n"


@pytest.mark.parametrize(
    "response, about, expected",
    [
        # a call keeping the asked label, then a well-formed answer
        (CALL.format(labels='["2019"]') + TOOL_TURN + "<answer>4</answer>", ["2019"], (1, 1, 1, 1, 1)),
        # the call keeps the other label: labelled, not correct
        (CALL.format(labels='["2020"]') + TOOL_TURN + "<answer>4</answer>", ["2019"], (1, 1, 1, 1, 0)),
        # a label the chart does not have: the call fails
        (CALL.format(labels='["1999"]') + TOOL_TURN + "<answer>4</answer>", ["2019"], (1, 0, 1, 1, 0)),
        # a question naming no label: the call is not a labelled one
        (CALL.format(labels='["2019"]') + TOOL_TURN + "<answer>4</answer>", [], (1, 1, 1, 0, 0)),
        # no call and no answer tag
        ("4", ["2019"], (0, 0, 0, 0, 0)),
    ],
    ids=["asked-label", "other-label", "failed", "unlabelled", "no-call"],
)
def test_protocol_indicators_count_as_the_local_trainer_does(response, about, expected):
    import json

    extra = {"bboxes": BBOXES, "about": json.dumps(about)}
    tools = ["focus_on_x_values_with_mask"]
    result = verl_rewards.v1_rule("synthchart", response, "4", extra, tools=tools)
    assert tuple(result[k] for k in verl_rewards.PROTOCOL_PARTS) == expected
    assert result["score"] == result["overall"]  # the indicators are not part of the reward


def test_unknown_names_and_bad_metadata_fail_loudly():
    with pytest.raises(KeyError, match="multiple_choice, r1v"):
        verl_rewards.compute_score("x", "<answer>1</answer>", "1", reward="v9")
    with pytest.raises(ValueError, match="tool_outcome"):
        verl_rewards.v1_rule("x", "<answer>1</answer>", "1", {"tool_outcome": "maybe"})
