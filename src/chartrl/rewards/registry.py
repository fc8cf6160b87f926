"""The reward registry: one name -> one definition, registered by decorating the reward's function with
:func:`register_reward` (in a module of ``chartrl.rewards.definitions``), and :func:`get_reward` to build a callable
reward from a name and its params (validated, defaults filled, by the config schema's reward definition).

A reward is called on a batch (``reward(list_of_RewardInput) -> list[dict]``): rule rewards score item by
item; judge-based ones (``v1_judge``; ``v2_shaped``/``v3_gra`` with ``accuracy: judge|panel``) first judge the
whole batch concurrently through the judge object they were given, then combine. A response without an answer
tag is not sent to the judge: its accuracy is 0 (answer extraction: the last <answer> tag).

A judge failure (no readable verdict after every retry) is counted in the ``judge_failure`` part and the item's
accuracy falls back to the rule's relaxed accuracy, so one unreadable reply neither rewards nor punishes the
policy as if the judge had spoken; the scorers report such items as ``judge_failure`` and leave them out of
the accuracy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chartrl.answers import DEFAULT_YEAR_RULE, answer_accuracy, extract_answer
from chartrl.config import JudgeConfig, parse_reward_spec
from chartrl.judge import Judge, JudgeItem, Verdict, judge_batch, judge_for_accuracy
from chartrl.rewards.inputs import RewardInput

Bounds = Callable[[Mapping[str, Any]], tuple[float, float]]


def accuracy_bounds(params: Mapping[str, Any]) -> tuple[float, float]:
    """overall in [0, 1 + tool_bonus]: an accuracy plus the conditional tool bonus."""
    return 0.0, 1.0 + params.get("tool_bonus", 0.0)


@dataclass(frozen=True)
class Example:
    """One response and the ``overall`` the reward gives it: each reward's worked case, registered with it and
    scored by the tests through every way a reward is called (``get_reward``, verl's custom reward loader), so a new
    reward needs no test edit to be checked end to end."""

    response: str
    truth: str
    overall: float
    params: Mapping[str, Any] = field(default_factory=dict)
    """The reward's params (the rest take their schema defaults)."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """:class:`RewardInput` fields besides the response and truth (``question``, ``tool_outcome``, ``tool_calls``,
    ``response_tokens``, ...), as a verl sample's ``extra_info`` carries them. A judge-based example is judged by
    the offline reference judge (its panel for ``accuracy: panel``)."""


@dataclass(frozen=True)
class RewardDefinition:
    name: str
    description: str
    parts: tuple[str, ...]
    """The keys of the reward's dict, in a stable order (each logged as ``reward/<part>``)."""
    accuracy: str
    """What grades answers: ``rule``, ``judge``, ``own`` (the reward grades them itself), or ``configured`` (the
    reward's ``accuracy`` param: ``rule``, ``judge`` or ``panel``)."""
    combine: Callable[..., dict[str, float]]
    """``(accuracy, item, params, judge_failure)`` for accuracy-based rewards, ``(item, params)`` for ``own``."""
    bounds: Bounds
    """params -> the documented range of ``overall`` (property-tested)."""
    example: Example
    """The reward's worked case (see :class:`Example`)."""
    bonuses: tuple[str, ...] = ()
    """The parts that add to ``overall`` beside the accuracy and can be positive: what :func:`bonus_on_wrong` counts
    (v2's and v3's shaping terms and the conditional tool bonus; none for a reward whose parts are signals)."""

    @property
    def module(self) -> str:
        """The module that defines the reward (one of ``chartrl.rewards.definitions``)."""
        return self.combine.__module__

    def accuracy_signal(self, params: Mapping[str, Any]) -> str:
        """``rule``, ``judge``, ``panel`` or ``own`` for these params."""
        return params["accuracy"] if self.accuracy == "configured" else self.accuracy


REWARDS: dict[str, RewardDefinition] = {}
"""Reward name -> definition, filled by :func:`register_reward`. A reward also needs its entry in the config
schema (``$defs/reward``: the name in the enum and a branch with its params and their defaults)."""


def register_reward(
    name: str,
    *,
    description: str,
    parts: tuple[str, ...],
    accuracy: str,
    example: Example,
    bounds: Bounds = accuracy_bounds,
    bonuses: tuple[str, ...] = (),
) -> Callable[[Callable[..., dict[str, float]]], Callable[..., dict[str, float]]]:
    """Register the decorated function as reward ``name`` (the function combines one response's accuracy and
    inputs into ``{"overall", <parts>}``; see :class:`RewardDefinition`) with its worked ``example``. A taken name
    raises."""
    if accuracy not in ("rule", "judge", "own", "configured"):
        raise ValueError(f"reward {name!r}: accuracy {accuracy!r} is not one of rule, judge, own, configured")

    def register(combine: Callable[..., dict[str, float]]) -> Callable[..., dict[str, float]]:
        if name in REWARDS:
            raise ValueError(f"reward {name!r} is already registered ({REWARDS[name].combine.__qualname__})")
        REWARDS[name] = RewardDefinition(name, description, parts, accuracy, combine, bounds, example, bonuses)
        return combine

    return register


def bonus_on_wrong(rewards: list[dict[str, float]], bonuses: tuple[str, ...]) -> float | None:
    """The bonus paid per wrong answer: the mean, over a batch's items, of their positive ``bonuses`` parts where
    the accuracy is 0 (0 for a right answer). v2_shaped pays a wrong answer that is well-formed or called a tool that
    ran; v3_gra's gate pays it nothing. None for a reward declaring no bonuses."""
    if not rewards or not bonuses:
        return None
    paid = [sum(max(0.0, r[part]) for part in bonuses) if r["accuracy"] == 0 else 0.0 for r in rewards]
    return sum(paid) / len(paid)


def reward_module(name: str) -> str:
    """The module that defines reward ``name``: the code a job training with it, or scoring with a scorer built
    on it, runs beyond the registry (the registry imports every definition by name, which the import walk of
    ``chartrl.fingerprint`` does not follow). So changing one reward reruns only the jobs that use it."""
    if name not in REWARDS:
        raise KeyError(f"unknown reward {name!r}; valid rewards: {', '.join(reward_names())}")
    return REWARDS[name].module


def bounds(name: str, params: Mapping[str, Any]) -> tuple[float, float]:
    """The documented range of ``overall`` for reward ``name`` with ``params``."""
    return REWARDS[name].bounds(params)


@dataclass(frozen=True)
class Evaluation:
    """A batch's rewards, and the judge's verdict per item (None where no judge was asked)."""

    rewards: list[dict[str, float]]
    verdicts: list[Verdict | None]


class Reward:
    """A reward built by :func:`get_reward`: call it on a list of :class:`RewardInput`."""

    def __init__(self, definition: RewardDefinition, params: Mapping[str, Any], judge: Judge | None):
        self.definition, self.params, self.judge = definition, params, judge
        self.name, self.parts = definition.name, definition.parts
        self.accuracy_signal = definition.accuracy_signal(params)

    def __repr__(self) -> str:
        judge = f", judge={self.judge.name!r}" if self.judge is not None else ""
        return f"Reward({self.name!r}, {dict(self.params)!r}{judge})"

    @property
    def bounds(self) -> tuple[float, float]:
        return self.definition.bounds(self.params)

    @property
    def bonuses(self) -> tuple[str, ...]:
        """The parts that add to ``overall`` beside the accuracy (:func:`bonus_on_wrong`)."""
        return self.definition.bonuses

    def __call__(self, items: Sequence[RewardInput]) -> list[dict[str, float]]:
        return self.evaluate(items).rewards

    def evaluate(self, items: Sequence[RewardInput]) -> Evaluation:
        if self.accuracy_signal == "own":
            rewards = [self.definition.combine(item, self.params) for item in items]
            return Evaluation([self._select(r) for r in rewards], [None] * len(items))
        year_rule = self.params.get("year_rule", DEFAULT_YEAR_RULE)  # a reward whose schema offers no year_rule
        if self.accuracy_signal == "rule":
            accuracies = [(answer_accuracy(item.response, item.ground_truth, year_rule), 0.0) for item in items]
            verdicts: list[Verdict | None] = [None] * len(items)
        else:
            accuracies, verdicts = judged_accuracies(items, self.judge, year_rule)
        rewards = [
            self._select(self.definition.combine(accuracy, item, self.params, failure))
            for item, (accuracy, failure) in zip(items, accuracies, strict=True)
        ]
        return Evaluation(rewards, verdicts)

    def _select(self, parts: dict[str, float]) -> dict[str, float]:
        return {name: float(parts[name]) for name in self.parts}


def judged_accuracies(
    items: Sequence[RewardInput], judge: Judge, year_rule: str = DEFAULT_YEAR_RULE
) -> tuple[list[tuple[float, float]], list[Verdict | None]]:
    """(accuracy, judge_failure) per item and the verdicts, judging the batch's answers concurrently; an item the
    judge gives no verdict gets the rule's relaxed accuracy under ``year_rule``."""
    answers = [extract_answer(item.response) for item in items]
    asked = [i for i, answer in enumerate(answers) if answer is not None]
    batch = [JudgeItem(items[i].question, items[i].ground_truth, answers[i]) for i in asked]  # type: ignore[arg-type]
    verdicts: list[Verdict | None] = [None] * len(items)
    for i, verdict in zip(asked, judge_batch(judge, batch) if batch else [], strict=True):
        verdicts[i] = verdict
    accuracies = []
    for item, verdict in zip(items, verdicts, strict=True):
        if verdict is None:
            accuracies.append((0.0, 0.0))  # no answer tag: accuracy 0, nothing asked
        elif verdict.failed:
            accuracies.append((answer_accuracy(item.response, item.ground_truth, year_rule), 1.0))
        else:
            accuracies.append((float(verdict.score), 0.0))  # type: ignore[arg-type]  # not failed: a number
    return accuracies, verdicts


def reward_names() -> list[str]:
    return sorted(REWARDS)


def get_reward(name: str, params: Mapping[str, Any] | None = None, judge: Judge | None = None) -> Reward:
    """The reward ``name`` with ``params`` (validated against the config schema; missing ones take their
    defaults). Judge-based rewards need ``judge`` (``chartrl.judge.judge_for_accuracy``): a single judge or a
    panel for ``judge``, a panel for ``panel``. Raises KeyError for an unknown name, listing the valid ones."""
    if name not in REWARDS:
        raise KeyError(f"unknown reward {name!r}; valid rewards: {', '.join(reward_names())}")
    spec = parse_reward_spec({"name": name, **dict(params or {})})
    definition = REWARDS[name]
    signal = definition.accuracy_signal(spec.params)
    if signal in ("judge", "panel"):
        if judge is None:
            raise ValueError(
                f"reward {name!r} (accuracy: {signal}) needs a judge: pass "
                f"judge=chartrl.judge.judge_for_accuracy({signal!r}, config.judge)"
            )
        if signal == "panel" and not hasattr(judge, "members"):
            raise ValueError(f"reward {name!r} has accuracy: panel but was given the single judge {judge.name!r}")
        return Reward(definition, spec.params, judge)
    return Reward(definition, spec.params, None)


def accuracy_signal(name: str, params: Mapping[str, Any] | None = None) -> str:
    """What reward ``name`` with ``params`` grades answers with: ``rule``, ``judge``, ``panel`` or ``own``."""
    if name not in REWARDS:
        raise KeyError(f"unknown reward {name!r}; valid rewards: {', '.join(reward_names())}")
    return REWARDS[name].accuracy_signal(parse_reward_spec({"name": name, **dict(params or {})}).params)


def build_reward(name: str, params: Mapping[str, Any] | None, judge_config: JudgeConfig) -> Reward:
    """The reward with the judge it needs built from the ``judge:`` config (the single judge for ``judge``, the
    panel for ``panel``, none otherwise): what the train and score stages, the CLI and verl workers call."""
    signal = accuracy_signal(name, params)
    judge = judge_for_accuracy(signal, judge_config) if signal in ("judge", "panel") else None
    return get_reward(name, params, judge=judge)
