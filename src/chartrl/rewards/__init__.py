"""Rewards and scorers: one registry, pure functions of (response, truth, metadata) returning
``{"overall": ..., <parts>}``; the evaluation scorers are the same functions (every definition is in the README,
"Rewards and the judge").

- :class:`RewardInput`: what a reward sees of one response.
- :data:`REWARDS`, :func:`get_reward` (judge passed in), :func:`build_reward` (judge built from config):
  ``v1_rule``, ``v1_judge``, ``v2_shaped``, ``v3_gra``, ``r1v``, ``multiple_choice``.
- :data:`SCORERS`, :func:`get_scorer`: ``rule``, ``judge``, ``panel``.
- The answer rules (extraction, relaxed accuracy) are ``chartrl.answers``, a floor below the rewards.
- ``chartrl.rewards.verl_adapter``: the same rewards as verl custom reward functions.
"""

from chartrl.rewards.combine import PARTS, bounds
from chartrl.rewards.inputs import METADATA_FIELDS, TOOL_OUTCOMES, RewardInput
from chartrl.rewards.registry import (
    REWARDS,
    Evaluation,
    Reward,
    RewardDefinition,
    accuracy_signal,
    build_reward,
    get_reward,
    reward_names,
)
from chartrl.rewards.scorers import SCORERS, aggregate, get_scorer

__all__ = [
    "METADATA_FIELDS",
    "PARTS",
    "REWARDS",
    "SCORERS",
    "TOOL_OUTCOMES",
    "Evaluation",
    "Reward",
    "RewardDefinition",
    "RewardInput",
    "accuracy_signal",
    "aggregate",
    "bounds",
    "build_reward",
    "get_reward",
    "get_scorer",
    "reward_names",
]
