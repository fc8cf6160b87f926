"""Rewards and scorers: one registry, pure functions of (response, truth, metadata) returning
``{"overall": ..., <parts>}``; the evaluation scorers are the same functions (every definition is in
docs/rewards.md).

- :class:`RewardInput`: what a reward sees of one response.
- :data:`REWARDS`, :func:`get_reward` (judge passed in), :func:`build_reward` (judge built from config):
  ``v1_rule``, ``v1_judge``, ``v2_shaped``, ``v3_gra``, ``r1v``, ``multiple_choice``, ``deepeyes``.
- :data:`SCORERS`, :func:`get_scorer`: ``rule``, ``judge``, ``panel``, ``r1v``, ``multiple_choice``.
- The answer rules (extraction, relaxed accuracy) are ``chartrl.answers``, a floor below the rewards.
- :data:`PARTS`: reward name -> its parts; :func:`bounds`: the range of a reward's ``overall``.
- :func:`reward_module`: the module that defines a reward, what the jobs using it depend on beyond the registry.

A reward is a function decorated with ``register_reward`` in a module of its own in
``chartrl.rewards.definitions`` (every module there is imported here, by name) plus its entry in the config
schema; ``chartrl.verl_backend.rewards`` serves every registered reward to verl under its name.

Bounds (``d_*`` the deltas, ``b`` the tool bonus; property-tested):

| reward | overall in |
|---|---|
| v1_rule, v1_judge, multiple_choice, r1v | [0, 1 + b] |
| v2_shaped, v3_gra | [-(d_format + d_length + d_tool), 1 + d_format + d_tool + b] |
| deepeyes | [-format_weight, accuracy_weight + b] |
"""

import importlib
import pkgutil

from chartrl.rewards import definitions
from chartrl.rewards.inputs import METADATA_FIELDS, TOOL_OUTCOMES, RewardInput
from chartrl.rewards.registry import (
    REWARDS,
    Evaluation,
    Example,
    Reward,
    RewardDefinition,
    accuracy_signal,
    bounds,
    build_reward,
    get_reward,
    register_reward,
    reward_module,
    reward_names,
)
from chartrl.rewards.scorers import SCORERS, aggregate, get_scorer

for _module in pkgutil.iter_modules(definitions.__path__):  # each registers its reward
    importlib.import_module(f"{definitions.__name__}.{_module.name}")

PARTS: dict[str, tuple[str, ...]] = {name: definition.parts for name, definition in REWARDS.items()}
"""Reward name -> the keys of its dict, in order."""

__all__ = [
    "METADATA_FIELDS",
    "PARTS",
    "REWARDS",
    "SCORERS",
    "TOOL_OUTCOMES",
    "Evaluation",
    "Example",
    "Reward",
    "RewardDefinition",
    "RewardInput",
    "accuracy_signal",
    "aggregate",
    "bounds",
    "build_reward",
    "get_reward",
    "get_scorer",
    "register_reward",
    "reward_module",
    "reward_names",
]
