"""Scoring generations with one scorer (rule, judge or panel): chartrl.rewards' own functions. The rule scorer's
items carry, beside chartrl's relaxed accuracy, the same answer's score under the published ChartQA rule
(``chartrl.evaluate.published_metric``), and its aggregate their mean: the figure to hold against the literature."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from chartrl.answers import DEFAULT_YEAR_RULE
from chartrl.config import JudgeConfig
from chartrl.errors import ChartrlError
from chartrl.evaluate.published_metric import published_relaxed_accuracy
from chartrl.judge import judge_for_accuracy
from chartrl.rewards import SCORERS, RewardInput, get_scorer
from chartrl.rollout.conversation import question_of


class TooManyJudgeFailures(ChartrlError):
    """More of the items sent to the judge ended without a verdict than ``judge.max_judge_failure_fraction``
    allows; the message names the endpoint."""


SCORER_JUDGES = {name: scorer.judge for name, scorer in SCORERS.items()}
"""Which judge a scorer needs: none (``rule``) for the rule and the recipes' scorers, which grade their own."""

PUBLISHED_SCORERS = ("rule",)
"""The scorers whose items carry ``published_score``: the rule is chartrl's relaxed accuracy, whose reference is the
published ChartQA rule. A judge's verdict is no rule over the answer's text, and a recipe's scorer reads its own
answer form (a boxed letter, GeoQA's think/answer tags), which ChartQA's rule was not written for."""


def why_no_published(scorer: str) -> str | None:
    """Why ``scorer``'s figures have no published-rule accuracy beside them; None for a scorer they have it for."""
    if scorer in PUBLISHED_SCORERS:
        return None
    if SCORER_JUDGES[scorer] != "rule":
        return (
            f"the {scorer} scorer counts verdicts, not a rule over the answer text: the published rule's figure of "
            "the same generations is the rule scorer's"
        )
    return f"the {scorer} scorer grades its recipe's own answer form, which ChartQA's published rule does not read"


def reward_inputs(generations: Path) -> list[RewardInput]:
    """One RewardInput per generation row, with the episode's tool statistics and length."""
    inputs = []
    for row in pq.read_table(generations).to_pylist():
        inputs.append(
            RewardInput(
                response=row["final_response"],
                ground_truth=row["ground_truth"],
                question=row["question"],
                data_source=row["data_source"],
                subset=row["subset"],
                tool_outcome=row["tool_outcome"],
                tool_calls=len(json.loads(row["tool_calls"])),
                response_tokens=row["response_tokens"],
                id=f"{row['id']}#{row['sample']}",
            )
        )
    return inputs


def score_generations(
    generations: Path, scorer: str, judge_config: JudgeConfig, year_rule: str = DEFAULT_YEAR_RULE
) -> tuple[dict[str, Any], Any]:
    """The scorer's output (aggregate + per-item verdicts; the aggregate records ``year_rule``) and the judge it
    used (None for rule)."""
    return score_inputs(reward_inputs(generations), str(generations), scorer, judge_config, year_rule)


def score_inputs(
    inputs: list[RewardInput], source: str, scorer: str, judge_config: JudgeConfig, year_rule: str = DEFAULT_YEAR_RULE
) -> tuple[dict[str, Any], Any]:
    """:func:`score_generations` on answers already read (``source``: where they come from, recorded as the
    aggregate's ``generations``)."""
    judge = judge_for_accuracy(SCORER_JUDGES[scorer], judge_config)
    result = get_scorer(scorer)(inputs, judge, year_rule)
    add_published_scores(result, inputs, scorer)
    result["aggregate"]["generations"] = source
    check_judge_failures(result["aggregate"], judge_config.max_judge_failure_fraction)
    return result, judge


def add_published_scores(result: dict[str, Any], inputs: list[RewardInput], scorer: str) -> None:
    """Beside a scorer's output (``chartrl.rewards.scorers``, items in the order of ``inputs``), the published ChartQA
    rule on the same answers: for a scorer of :data:`PUBLISHED_SCORERS`, each item's ``published_score`` (its
    extracted ``answer`` against the input's ground truth; no answer tag scores 0) and the aggregate's
    ``published_accuracy``, overall and per subset; for any other, ``published_accuracy`` None and
    ``why_no_published``."""
    aggregate = result["aggregate"]
    reason = why_no_published(scorer)
    if reason is not None:
        aggregate["published_accuracy"], aggregate["why_no_published"] = None, reason
        return
    subsets: dict[str, list[float]] = {}
    for item, scored in zip(inputs, result["items"], strict=True):
        scored["published_score"] = published_relaxed_accuracy(scored["answer"], item.ground_truth)
        subsets.setdefault(scored["subset"] or "unspecified", []).append(scored["published_score"])
    scores = [scored["published_score"] for scored in result["items"]]
    aggregate["published_accuracy"] = sum(scores) / len(scores) if scores else None
    for name, values in subsets.items():
        aggregate["by_subset"][name]["published_accuracy"] = sum(values) / len(values)


def test_answer_inputs(records: list[dict[str, Any]], rows: dict[str, Any], source: str) -> list[RewardInput]:
    """One RewardInput per greedy test record of a ``test_accuracy.json`` (``chartrl.evaluate.accuracy``), with its
    question from the test split's ``rows`` (by id): the answers of a policy that no eval series generated for (an
    extra train seed's). A record written without its response (an older run) is an error naming the file."""
    inputs = []
    for record in records:
        if "response" not in record:
            raise ChartrlError(
                f"{source}: the test record {record['id']} has no response (written by an older chartrl); "
                "rerun its test-accuracy job"
            )
        row = rows[record["id"]]
        inputs.append(
            RewardInput(
                response=record["response"],
                ground_truth=record["truth"],
                question=question_of(row),
                data_source=row.data_source,
                subset=row.extra.get("subset", ""),
                tool_outcome=record.get("tool_outcome") or "none",
                tool_calls=int(record["tool_call"]),
                response_tokens=record.get("sampled_tokens") or 0,
                id=f"{record['id']}#0",
            )
        )
    return inputs


def check_judge_failures(aggregate: dict[str, Any], limit: float) -> None:
    """Refuse a judge score whose failures exceed ``limit`` of the items sent (``judge.max_judge_failure_fraction``):
    the accuracy over the items left would be silently wrong."""
    fraction = aggregate.get("judge_failure_fraction")
    if fraction is None or fraction <= limit:
        return
    raise TooManyJudgeFailures(
        f"{aggregate['judge_failures']} of {aggregate['sent_to_judge']} items sent to the judge ({fraction:.1%}) "
        f"got no readable verdict, above judge.max_judge_failure_fraction {limit:.1%}; judge: "
        f"{judge_endpoints(aggregate.get('judge') or {})}. Check the endpoint's replies (the judge prompt's "
        "verdict format, max_tokens, the model), or raise judge.max_judge_failure_fraction to accept them; "
        f"({aggregate['not_sent']} items had no answer tag and were not sent)"
    )


def judge_endpoints(description: dict[str, Any]) -> str:
    """Where a judge's verdicts come from, for a message: each endpoint and model, or the offline judge."""
    if description.get("members"):
        return "; ".join(judge_endpoints(member) for member in description["members"])
    if description.get("base_url"):
        return f"'{description.get('name')}' at {description['base_url']} (model {description.get('model')})"
    return f"'{description.get('name')}' ({description.get('kind', 'offline')})"
