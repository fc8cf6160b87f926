"""Rewards and scorers: one registry, pure functions of (response, truth, metadata) returning
``{"overall": ..., <parts>}``; the evaluation scorers are the same functions (every definition is in the README,
"Rewards and the judge").

- :class:`RewardInput`: what a reward sees of one response.
- :data:`REWARDS`, :func:`get_reward` (judge passed in), :func:`build_reward` (judge built from config):
  ``v1_rule``, ``v1_judge``, ``v2_shaped``, ``v3_gra``, ``r1v``, ``multiple_choice``.
- :data:`SCORERS`, :func:`get_scorer`: ``rule``, ``judge``, ``panel``.
- The answer rules (extraction, relaxed accuracy) are ``chartrl.answers``, a floor below the rewards.
- :data:`PARTS`: reward name -> its parts; :func:`bounds`: the range of a reward's ``overall``.
- :func:`reward_sources`: the files a train job with a given reward depends on beyond the shared reward code.

A reward is a function decorated with ``register_reward`` (the built-in ones in ``chartrl.rewards.combine``, a new
one in a module of its own in ``chartrl.rewards.extra``, imported here) plus its entry in the config schema;
``chartrl.verl_backend.rewards`` serves every registered reward to verl under its name.
"""

import importlib
import pkgutil

from chartrl.rewards import combine, extra  # noqa: F401  (combine registers the built-in rewards)
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
    reward_names,
    reward_sources,
)
from chartrl.rewards.scorers import SCORERS, aggregate, get_scorer

for _module in pkgutil.iter_modules(extra.__path__):  # each registers its reward
    importlib.import_module(f"{extra.__name__}.{_module.name}")

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
    "reward_names",
    "reward_sources",
]
