"""The chartrl rewards as verl custom reward functions (verl 0.9.1: ``reward.custom_reward_function``).

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs)`` once per response
and reads ``score`` from the returned dict (every other key becomes reward extra info, logged per part). This
module serves one such function per registered reward, named after it (generated from the registry, so a new
reward needs nothing here), plus a generic :func:`compute_score` taking the name::

    reward:
      custom_reward_function:
        path: pkg://chartrl.verl_backend.rewards      # or the file path of this module
        name: v3_gra                                   # any name in chartrl.rewards.REWARDS
        reward_kwargs:
          params: {accuracy: rule, d_format: 0.1}      # the series' reward params (validated, defaults filled)
          judge: {...}                                 # the resolved judge: section (judge-based rewards)

``extra_info`` carries the episode's metadata under the :class:`RewardInput` field names (``question``,
``subset``, ``tool_outcome``, ``tool_calls``, ``response_tokens``, ``id``, ``data_source``); other keys verl adds
(``num_turns``, ``rollout_reward_scores``, ...) are ignored, missing ones take the RewardInput defaults.

verl passes the whole decoded response (every turn) and none of the episode's tool statistics, so for what
``extra_info`` lacks the adapter reads the response itself (``chartrl.verl_backend.trajectory``): the final
turn is what the answer and format are judged on; the tool outcome and the number of calling turns come from
parsing each turn with our parser (verl's hermes parser drops malformed calls silently), label choices checked
against the sample's ``bboxes``; and, when ``tokenizer`` names one, the response tokens are counted by
re-encoding the model's turns. The series' ``reward_kwargs`` add ``tools`` (the tools offered: none for a
no-tool series, whose response is one turn) and ``tokenizer`` (when the length term is on). A length term
with neither ``response_tokens`` in ``extra_info`` nor a tokenizer is a configuration error, not a silent 0.

Besides the reward's ``overall`` and parts, every call returns the protocol indicators of the response
(:data:`PROTOCOL_PARTS`, 0 or 1 each, the same keys for every sample as verl requires): a tool was called, the call
executed, the final turn is well-formed, the call was on a question naming labels, and it kept every label the
question names (``about`` in ``extra_info``). verl 0.9.1 averages each key of a validation's reward extra info
per data source (``val-aux/<source>/protocol_tool_call/mean@N``), which is where the report's tool-call ratio,
tool success, format rate and correct-label ratio of a verl run come from (``chartrl.verl_backend.metrics``).
They are not part of the reward: the score is the reward's ``overall``.

Rewards (and their judges) are built once per worker process and parameter set. A judge-based reward judges each
response as verl hands it over (one ``asyncio.run`` per call, on verl's reward threads).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from functools import cache, lru_cache
from typing import Any

from chartrl.answers import answer_accuracy, is_well_formed
from chartrl.config import JudgeConfig
from chartrl.rewards.inputs import METADATA_FIELDS, RewardInput
from chartrl.rewards.registry import REWARDS, Reward, build_reward
from chartrl.tools import labels_kept
from chartrl.verl_backend.trajectory import read_trajectory, response_tokens, split_response

_INTEGER_FIELDS = ("tool_calls", "response_tokens")
PROTOCOL_PARTS = (
    "protocol_tool_call",
    "protocol_tool_executed",
    "protocol_well_formed",
    "protocol_labelled_call",
    "protocol_correct_label",
)


def _plain(value: Any) -> Any:
    """OmegaConf containers (what verl passes as reward_kwargs) and numpy scalars to plain Python."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # a numpy scalar
        return value.item()
    return value


def protocol_indicators(trajectory, about: Sequence[str]) -> dict[str, float]:
    """The response's protocol, as the local trainer counts it (``chartrl.rollout.statistics``): 0/1
    for a tool call, an executed call, a well-formed final turn, a call on a question naming labels, and such a
    call keeping every named label (the labels of the first executed call, as ``chartrl.rollout.statistics``)."""
    called = bool(trajectory.calling_turns)
    executed = [turn for turn in trajectory.calling_turns if turn.outcome == "executed"]
    kept = labels_kept(turn.text for turn in executed)
    labelled = called and bool(about)
    return {
        "protocol_tool_call": float(called),
        "protocol_tool_executed": float(trajectory.tool_outcome == "executed"),
        "protocol_well_formed": float(bool(is_well_formed(trajectory.final_response))),
        "protocol_labelled_call": float(labelled),
        "protocol_correct_label": float(labelled and set(about) <= set(kept)),
    }


def _about(extra: Mapping[str, Any]) -> list[str]:
    """The labels the question names (``about``: a JSON list, as ``chartrl.verl_backend.data`` writes it)."""
    value = extra.get("about")
    if isinstance(value, str):
        value = json.loads(value) if value.strip() else []
    return [str(v) for v in value or []]


def reward_input(
    solution_str: str,
    ground_truth: Any,
    data_source: Any = "",
    extra_info: Mapping[str, Any] | None = None,
    *,
    tools: Sequence[str] | None = None,
    max_calls: int = 1,
    tokenizer: str | None = None,
    trajectory=None,
) -> RewardInput:
    """The RewardInput for one verl sample: ``extra_info`` fields where given (they override ``data_source``),
    the rest read from the response (the module doc says how; ``trajectory``: the response already read)."""
    extra = _plain(dict(extra_info or {}))
    if trajectory is None:
        trajectory = read_trajectory(str(solution_str), tools=tools, bboxes=extra.get("bboxes"), max_calls=max_calls)
    derived: dict[str, Any] = {"tool_outcome": trajectory.tool_outcome, "tool_calls": trajectory.tool_calls}
    if tokenizer and extra.get("response_tokens") is None:
        derived["response_tokens"] = response_tokens(trajectory, _tokenizer(tokenizer))
    fields: dict[str, Any] = {"data_source": str(data_source or "")}
    for name in METADATA_FIELDS:
        value = extra.get(name) if extra.get(name) is not None else derived.get(name)
        if value is not None:
            fields[name] = int(value) if name in _INTEGER_FIELDS else str(value)
    return RewardInput(response=trajectory.final_response, ground_truth=str(ground_truth), **fields)


@lru_cache(maxsize=4)
def _tokenizer(path: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


@lru_cache(maxsize=32)
def _built(name: str, params_json: str, judge_json: str) -> Reward:
    return build_reward(name, json.loads(params_json), JudgeConfig.from_dict(json.loads(judge_json)))


def _needs_length(reward: Reward) -> bool:
    return float(reward.params.get("d_length", 0) or 0) > 0


def compute_score(
    data_source: Any,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    *,
    reward: str = "v1_rule",
    params: Mapping[str, Any] | None = None,
    judge: Mapping[str, Any] | None = None,
    tools: Sequence[str] | None = None,
    max_calls: int = 1,
    tokenizer: str | None = None,
    **_verl_kwargs: Any,
) -> dict[str, float]:
    """Score one response with reward ``reward`` (``params`` and ``judge`` as in the config; ``tools``,
    ``max_calls`` and ``tokenizer`` as the module doc says); returns ``{"score": overall, "overall": ..., <parts>,
    <protocol indicators>}``."""
    built = _built(
        reward, json.dumps(_plain(params or {}), sort_keys=True), json.dumps(_plain(judge or {}), sort_keys=True)
    )

    tool_names = _plain(tools) if tools else None
    extra = _plain(dict(extra_info or {}))
    trajectory = read_trajectory(str(solution_str), tools=tool_names, bboxes=extra.get("bboxes"), max_calls=max_calls)
    item = reward_input(
        solution_str,
        ground_truth,
        data_source,
        extra_info,
        tools=tool_names,
        max_calls=max_calls,
        tokenizer=tokenizer,
        trajectory=trajectory,
    )
    if _needs_length(built) and not tokenizer and (extra_info or {}).get("response_tokens") is None:
        raise ValueError(
            f"reward {reward!r} has a length term (d_length={built.params['d_length']}) but verl passed no "
            "response_tokens in extra_info and reward_kwargs names no tokenizer to count them; add "
            "reward_kwargs.tokenizer=<model path> (chartrl verl overrides does) or set d_length: 0"
        )
    [parts] = built([item])
    return {"score": parts["overall"], **parts, **protocol_indicators(trajectory, _about(extra))}


def generation_record(
    data_source: Any, solution_str: str, ground_truth: Any, extra_info: Mapping[str, Any] | None = None, **_: Any
) -> dict[str, Any]:
    """The reward of a verl generation job (``trainer.val_only``): the relaxed accuracy of the final answer as
    verl's score (``acc``, so verl's own validation metrics mean something) and the row id (``row_id``), which
    verl writes into each line of its generation dump, so the dump can be turned into the generations contract
    (``chartrl.verl_backend.generations``). Scoring proper is done afterwards by our scorers."""
    extra = _plain(dict(extra_info or {}))
    if "id" not in extra:
        raise ValueError("extra_info has no 'id'; convert the data with chartrl.verl_backend.data")
    accuracy = answer_accuracy(read_final_turn(str(solution_str)), str(ground_truth))
    return {"score": accuracy, "acc": accuracy, "row_id": str(extra["id"])}


def read_final_turn(solution_str: str) -> str:
    return split_response(solution_str)[0][-1]


@cache
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


def __getattr__(name: str) -> Callable[..., dict[str, float]]:
    """``<module>.<reward name>``: what verl's loader reads (``getattr(module, reward.custom_reward_function.name)``),
    for every reward in the registry."""
    if name in REWARDS:
        return reward_function(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *REWARDS})
