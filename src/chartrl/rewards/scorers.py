"""Evaluation scorers, built on the training rewards (there is no second implementation): ``rule`` is v1_rule,
``judge`` is v1_judge with the judge, ``panel`` is v1_judge with the judge panel.

A scorer takes the scored items (one :class:`RewardInput` per generation) and returns::

    {"aggregate": {"scorer", "year_rule", "accuracy", "n", "judged", "judge_failures", "tool_call_ratio",
                   "tool_success",
                   "by_subset": {"human": {"accuracy", "n"}, "augmented": {...}, ...},
                   "judge": {...}, "sent_to_judge", "not_sent", "judge_failure_fraction"},
     "items": [{"id", "verdict", "accuracy", "answer", "subset", "data_source", "tool_calls", "tool_outcome",
                "judge_detail", "sent_to_judge", "votes"}, ...]}

- ``accuracy`` is the mean over items with a verdict; judge failures are counted (``judge_failures``) and left
  out of it, never scored as incorrect. ``n`` counts every item.
- ``judged``: the items the scorer's judge gave a verdict: for a judge or panel, those sent to it that came back
  readable (``sent_to_judge - judge_failures``; an item with no answer tag is scored incorrect unjudged); for the
  rule and the recipes' scorers, which grade every item themselves, ``n``.
- Judge scorers report apart the two ways an item gets no judge verdict: ``not_sent`` (no answer tag, so nothing
  was asked: scored incorrect, as the rule does) and ``judge_failures`` (asked, no readable verdict after every
  retry); ``judge_failure_fraction`` is the failures' share of ``sent_to_judge`` (None when nothing was sent),
  which the score stage bounds by ``judge.max_judge_failure_fraction``.
- ``year_rule``: relaxed accuracy's rule for year targets (``chartrl.answers``; ``standard`` is ChartQA's own
  evaluation, ``strict`` wants the year itself), the ``evaluate.year_rule`` the score stage passes.
- ``tool_call_ratio``: the share of items with at least one tool call; ``tool_success``: the share of those whose
  tool outcome is ``executed`` (None when no item called a tool).
- ``judge`` describes the judge (``kind`` says "reference (not an LLM)" for the offline judge), so every place
  that shows these verdicts can say which judge gave them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chartrl.answers import DEFAULT_YEAR_RULE, extract_answer, extract_choice
from chartrl.judge.base import Judge
from chartrl.rewards.inputs import RewardInput
from chartrl.rewards.registry import Reward, get_reward

def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def aggregate(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    scored = [i for i in items if i["verdict"] != "judge_failure"]  # what the accuracy is the mean of
    failures = len(items) - len(scored)
    callers = [i for i in items if i["tool_calls"] > 0]
    subsets: dict[str, list[dict[str, Any]]] = {}
    for item in scored:
        subsets.setdefault(item["subset"] or "unspecified", []).append(item)
    judged = len(scored)
    judge_counts: dict[str, Any] = {}
    if any("sent_to_judge" in i for i in items):
        sent = sum(1 for i in items if i.get("sent_to_judge"))
        judged = sent - failures  # an item never sent got no verdict from the judge, though it is scored
        judge_counts = {
            "sent_to_judge": sent,
            "not_sent": len(items) - sent,
            "judge_failure_fraction": failures / sent if sent else None,
        }
    formats: dict[str, Any] = {}
    if any("format" in i for i in items):  # the recipes' own figures: format rate, accuracy among well-formed answers
        formed = [i for i in scored if i.get("format") == 1.0]
        formats = {
            "format_rate": _mean([float(i.get("format") == 1.0) for i in items]),
            "well_formed": len(formed),
            "accuracy_well_formed": _mean([i["accuracy"] for i in formed]),
        }
    return {
        **judge_counts,
        **formats,
        "accuracy": _mean([i["accuracy"] for i in scored]),
        "n": len(items),
        "judged": judged,
        "judge_failures": failures,
        "tool_call_ratio": _mean([float(i["tool_calls"] > 0) for i in items]),
        "tool_success": _mean([float(i["tool_outcome"] == "executed") for i in callers]),
        "by_subset": {
            name: {"accuracy": _mean([i["accuracy"] for i in group]), "n": len(group)}
            for name, group in sorted(subsets.items())
        },
    }


def _score(scorer: str, reward: Reward, items: Sequence[RewardInput]) -> dict[str, Any]:
    evaluation = reward.evaluate(items)
    scored = []
    for item, parts, verdict in zip(items, evaluation.rewards, evaluation.verdicts, strict=True):
        failed = verdict is not None and verdict.failed
        accuracy = None if failed else parts["accuracy"]
        label = (
            "judge_failure"
            if failed
            else "correct"
            if accuracy == 1.0
            else "incorrect"
            if accuracy == 0.0
            else "partial"
        )
        record: dict[str, Any] = {
            "id": item.id,
            "verdict": label,
            "accuracy": accuracy,
            "answer": extract_choice(item.response)
            if reward.name == "multiple_choice"
            else extract_answer(item.response),
            "subset": item.subset,
            "data_source": item.data_source,
            "tool_calls": item.tool_calls,
            "tool_outcome": item.tool_outcome,
        }
        if (
            "format" in reward.parts and reward.accuracy_signal == "own"
        ):  # r1v, multiple_choice: the format is their own part
            record["format"] = parts["format"]
        if reward.judge is not None:
            record["judge_detail"] = verdict.detail if verdict is not None else "no answer tag: not judged"
            record["sent_to_judge"] = verdict is not None
            if verdict is not None and verdict.votes:
                record["votes"] = {name: vote.label for name, vote in verdict.votes.items()}
        scored.append(record)
    summary = {"scorer": scorer, "year_rule": reward.params.get("year_rule"), **aggregate(scored)}
    if reward.judge is not None:
        summary["judge"] = reward.judge.describe()
    return {"aggregate": summary, "items": scored}


@dataclass(frozen=True)
class Scorer:
    """A scorer: the reward whose accuracy it reports, and what grades with it."""

    name: str
    reward: str
    """The reward it is (its module is the scorer's code beside this one: ``chartrl.rewards.reward_module``)."""
    judge: str
    """``rule`` (no judge: the reward grades), ``judge`` (the judge) or ``panel`` (the judge panel)."""
    description: str
    year_rule: bool = True
    """Whether ``year_rule`` reaches the reward (the recipes' scorers grade answers their own way)."""

    def __call__(
        self, items: Sequence[RewardInput], judge: Judge | None = None, year_rule: str = DEFAULT_YEAR_RULE
    ) -> dict[str, Any]:
        if self.judge == "panel" and judge is not None and not hasattr(judge, "members"):
            raise ValueError(f"the panel scorer needs a judge panel (chartrl.judge.build_panel), not {judge.name!r}")
        params = {"year_rule": year_rule} if self.year_rule else {}
        return _score(self.name, get_reward(self.reward, params, judge=None if self.judge == "rule" else judge), items)


SCORERS: dict[str, Scorer] = {
    scorer.name: scorer
    for scorer in (
        Scorer("rule", "v1_rule", "rule", "relaxed accuracy under year_rule (standard: ChartQA's own evaluation)"),
        Scorer("judge", "v1_judge", "judge", "the judge's verdicts; year_rule grades the items it gives none"),
        Scorer("panel", "v1_judge", "panel", "the panel's combined verdicts (the judge must be a panel)"),
        Scorer(
            "r1v",
            "r1v",
            "rule",
            "EasyR1's r1v (GeoQA-8K): mathruler on the <answer> content, with the think/answer format rate and the "
            "accuracy among well-formed answers beside it",
            year_rule=False,
        ),
        Scorer(
            "multiple_choice",
            "multiple_choice",
            "rule",
            "the letter of the last \\boxed{} against the label, with the format rate and the accuracy among "
            "well-formed answers beside it",
            year_rule=False,
        ),
    )
}
"""Scorer name -> what it is. ``rule`` is v1_rule, ``judge`` v1_judge with the judge, ``panel`` v1_judge with the
panel: there is no second implementation."""


def get_scorer(name: str) -> Scorer:
    if name not in SCORERS:
        raise KeyError(f"unknown scorer {name!r}; valid scorers: {', '.join(sorted(SCORERS))}")
    return SCORERS[name]
