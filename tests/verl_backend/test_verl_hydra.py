"""Python values written as Hydra override values come back unchanged when verl's config is composed."""

from __future__ import annotations

import pytest
from composed import compose_verl
from omegaconf import OmegaConf

from chartrl.verl_backend.hydra import OverrideValueError, hydra_value, override, override_key

VALUES = [
    "pkg://chartrl.verl_backend.rewards",  # ':' and '/' stay unquoted: Hydra's grammar allows them
    "/abs/results/runs/e1/verl/train.parquet",
    "/tmp/a b/c.parquet",  # a space: quoted
    "e10/train",
    "Qwen/Qwen2.5-VL-3B-Instruct",
    "https://openrouter.ai/api/v1",
    "true",  # words Hydra would read as another type are quoted
    "null",
    "nan",
    "42",
    "1e-3",
    "it's",  # a quote inside
    "a\\",  # a backslash before the closing quote
    "q\\'x",
    "a\\b",
    "a,b",
    "x=y",
    "[1]",
    "{x}",
    "",
    "ünï",
    True,
    False,
    None,
    3,
    0.1,
    1e-06,
    [1, "a", True, None],
    {"params": {"accuracy": "panel", "d_length": 0.1}, "tools": [], "base_url": "http://h:8000/v1"},
]


def test_every_value_round_trips_through_verl_config():
    overrides = [override(f"chk.v{i}", value, add=True) for i, value in enumerate(VALUES)]
    composed = OmegaConf.to_container(compose_verl(overrides).chk)
    for i, value in enumerate(VALUES):
        got = composed[f"v{i}"]
        assert got == value and type(got) is type(value), (value, got, overrides[i])


@pytest.mark.parametrize(
    "value, written",
    [
        (False, "False"),  # as verl's docs write booleans
        ("seq-mean-token-sum-norm", "seq-mean-token-sum-norm"),
        (["console", "mlflow"], "[console,mlflow]"),
    ],
)
def test_plain_values_stay_readable(value, written):
    assert hydra_value(value) == written


@pytest.mark.parametrize("bad", ["${oc.env:HOME}", float("inf"), {"not an id": 1}, object()])
def test_values_hydra_cannot_carry_raise(bad):
    with pytest.raises(OverrideValueError):
        hydra_value(bad)


def test_override_key():
    assert (
        override_key("+reward.custom_reward_function.reward_kwargs={a:1}")
        == "reward.custom_reward_function.reward_kwargs"
    )
