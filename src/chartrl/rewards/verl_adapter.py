"""The chartrl rewards as verl custom reward functions (verl 0.9.1: ``reward.custom_reward_function``).

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs)`` once per response
and reads ``score`` from the returned dict (every other key becomes reward extra info, logged per part). This
module has one such function per reward, named after it, plus a generic :func:`compute_score` taking the name::

    reward:
      custom_reward_function:
        path: pkg://chartrl.rewards.verl_adapter      # or the file path of this module
        name: v3_gra                                   # any name in chartrl.rewards.REWARDS
        reward_kwargs:
          params: {accuracy: rule, d_format: 0.1}      # the series' reward params (validated, defaults filled)
          judge: {...}                                 # the resolved judge: section (judge-based rewards)

``extra_info`` carries the episode's metadata under the :class:`RewardInput` field names (``question``,
``subset``, ``tool_outcome``, ``tool_calls``, ``response_tokens``, ``id``, ``data_source``); other keys verl adds
(``num_turns``, ``rollout_reward_scores``, ...) are ignored, missing ones take the RewardInput defaults.

Rewards (and their judges) are built once per worker process and parameter set. A judge-based reward judges each
response as verl hands it over (one ``asyncio.run`` per call, on verl's reward threads).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from chartrl.config import JudgeConfig
from chartrl.rewards.inputs import METADATA_FIELDS, RewardInput
from chartrl.rewards.registry import REWARDS, Reward, build_reward

_INTEGER_FIELDS = ("tool_calls", "response_tokens")


def _plain(value: Any) -> Any:
    """OmegaConf containers (what verl passes as reward_kwargs) and numpy scalars to plain Python."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # a numpy scalar
        return value.item()
    return value


def reward_input(
    solution_str: str, ground_truth: Any, data_source: Any = "", extra_info: Mapping[str, Any] | None = None
) -> RewardInput:
    """The RewardInput for one verl sample; ``extra_info`` fields override ``data_source`` when both are given."""
    extra = _plain(dict(extra_info or {}))
    fields: dict[str, Any] = {"data_source": str(data_source or "")}
    for name in METADATA_FIELDS:
        if extra.get(name) is not None:
            fields[name] = int(extra[name]) if name in _INTEGER_FIELDS else str(extra[name])
    return RewardInput(response=str(solution_str), ground_truth=str(ground_truth), **fields)


@lru_cache(maxsize=32)
def _built(name: str, params_json: str, judge_json: str) -> Reward:
    return build_reward(name, json.loads(params_json), JudgeConfig.from_dict(json.loads(judge_json)))


def compute_score(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    *,
    reward: str = "v1_rule",
    params: Mapping[str, Any] | None = None,
    judge: Mapping[str, Any] | None = None,
    **_verl_kwargs: Any,
) -> dict[str, float]:
    """Score one response with reward ``reward`` (``params`` and ``judge`` as in the config); returns
    ``{"score": overall, "overall": ..., <parts>}``."""
    built = _built(
        reward, json.dumps(_plain(params or {}), sort_keys=True), json.dumps(_plain(judge or {}), sort_keys=True)
    )
    [parts] = built([reward_input(solution_str, ground_truth, data_source, extra_info)])
    return {"score": parts["overall"], **parts}


def reward_function(name: str) -> Callable[..., dict[str, float]]:
    """verl's ``compute_score`` for reward ``name``."""
    if name not in REWARDS:
        raise KeyError(f"unknown reward {name!r}; valid rewards: {', '.join(sorted(REWARDS))}")

    def score(
        data_source: Any, solution_str: str, ground_truth: Any, extra_info: Mapping[str, Any] | None = None, **kwargs
    ) -> dict[str, float]:
        return compute_score(data_source, solution_str, ground_truth, extra_info, reward=name, **kwargs)

    score.__name__ = score.__qualname__ = name
    score.__doc__ = f"verl compute_score for the {name} reward: {REWARDS[name].description}."
    return score


multiple_choice = reward_function("multiple_choice")
r1v = reward_function("r1v")
v1_judge = reward_function("v1_judge")
v1_rule = reward_function("v1_rule")
v2_shaped = reward_function("v2_shaped")
v3_gra = reward_function("v3_gra")
