"""Test accuracy of one policy, per question type, next to its shuffled-image control, a sampled rerun and, for a
tool policy, the tool-placebo control (the same greedy rollout, but a call that ran shows the unedited chart: an
accuracy that survives it comes from the second look, not from the edit).

Every train series (tool policies and no-tool baselines alike) and the warm-started starting point are read
this way, greedy, on the same test questions, so the report can compare them question by question: the per-row
scores let it bootstrap the gap between two series on paired questions (chartrl.evaluate.intervals).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from typing import Any

from chartrl.answers import DEFAULT_YEAR_RULE, answer_accuracy, extract_answer, is_well_formed
from chartrl.config import PromptConfig, ToolsConfig
from chartrl.data.contract import Row
from chartrl.evaluate.habits import HABITS
from chartrl.evaluate.published_metric import published_relaxed_accuracy
from chartrl.rollout.checks import shuffled_rows
from chartrl.rollout.episodes import run_episodes
from chartrl.rollout.sampling import SamplingParams
from chartrl.rollout.statistics import episode_tool_counts, has_preamble, kept_labels, rollout_statistics
from chartrl.tools import labels_kept

log = logging.getLogger(__name__)
CONDITIONS = ("test", "test_shuffled_images", "test_sampled", "test_placebo")
"""``test_placebo`` only for a tool policy (a no-tool policy has no tool turn to show anything in)."""


def episode_record(episode, year_rule: str = DEFAULT_YEAR_RULE) -> dict[str, Any]:
    """One question's outcome: its relaxed accuracy, whether it answered in format, whether it called a tool (and
    how the call went), whether that call kept every label the question is about, its answer and the gold
    answer, and its sampled tokens."""
    return question_record(
        episode.row,
        episode.final_response,
        bool(episode.tool_outcomes),
        kept_labels(episode),
        year_rule,
        tool_outcome=episode.tool_outcome,
        sampled_tokens=episode.sampled_tokens,
    )


def question_record(
    row: Row,
    final_response: str,
    called: bool,
    kept: Sequence[str],
    year_rule: str = DEFAULT_YEAR_RULE,
    *,
    tool_outcome: str | None = None,
    sampled_tokens: int | None = None,
) -> dict[str, Any]:
    """The record of one question answered with ``final_response``; ``called``: a tool was called, ``kept``: the
    labels its first executed call kept; ``year_rule``: relaxed accuracy's rule for years (chartrl.answers). The
    extracted answer and the gold answer are kept, so a report can tell a policy that gives one answer to every
    question of a type (a collapse) from one that reads the charts. ``preamble``: the final turn holds text before
    its answer tag (a restated question, reasoning), which lengthens the response. ``published_score``: the same
    answer under the published ChartQA rule (``chartrl.evaluate.published_metric``), the number to hold against
    the literature; ``score`` is chartrl's own rule, an upper bound on it."""
    about = [str(v) for v in row.extra.get("about") or []]
    answer = extract_answer(final_response)
    return {
        "id": row.id,
        "question_type": row.extra.get("question_type", "unknown"),
        "score": answer_accuracy(final_response, row.answer, year_rule),
        "published_score": published_relaxed_accuracy(answer, row.answer),
        "well_formed": bool(is_well_formed(final_response)),
        "preamble": has_preamble(final_response),
        "tool_call": called,
        "tool_outcome": tool_outcome,
        "correct_label": (set(about) <= set(kept)) if called and about else None,
        "answer": answer,
        "truth": row.answer,
        "response": final_response,
        "sampled_tokens": sampled_tokens,
    }


def summarise(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy overall and per question type under chartrl's rule and under the published ChartQA rule
    (``published_accuracy``; None when a record was written without its ``published_score``, by a chartrl older
    than the published rule), format rate, tool-call rate and the correct-label share of the calls on questions
    that name labels."""
    labelled = [r["correct_label"] for r in records if r["correct_label"] is not None]
    n = len(records)
    published = n > 0 and all("published_score" in r for r in records)
    return {
        "n": n,
        "accuracy": sum(r["score"] for r in records) / n if n else None,
        "accuracy_by_question_type": _mean_by_type(records, "score"),
        "published_accuracy": sum(r["published_score"] for r in records) / n if published else None,
        "published_accuracy_by_question_type": _mean_by_type(records, "published_score") if published else None,
        "n_by_question_type": dict(sorted(Counter(r["question_type"] for r in records).items())),
        "format_rate": sum(r["well_formed"] for r in records) / n if n else None,
        "tool_call_rate": sum(r["tool_call"] for r in records) / n if n else None,
        "correct_label_share": sum(labelled) / len(labelled) if labelled else None,
        **{name: _mean([value(r) for r in records]) for name, value in HABITS.items()},
    }


def _mean_by_type(records: Sequence[dict[str, Any]], key: str) -> dict[str, float]:
    by_type: dict[str, list[float]] = {}
    for record in records:
        by_type.setdefault(record["question_type"], []).append(record[key])
    return {t: sum(s) / len(s) for t, s in sorted(by_type.items())}


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def test_accuracy(
    policy,
    rows: Sequence[Row],
    *,
    with_tools: bool,
    prompts: PromptConfig,
    tools: ToolsConfig,
    max_new_tokens: int,
    batch_size: int,
    seed: int,
    temperature: float = 1.0,
    kv_reuse: bool = True,
    year_rule: str = DEFAULT_YEAR_RULE,
    conditions: Sequence[str] = CONDITIONS,
) -> dict[str, Any]:
    """Greedy rollouts on ``rows`` and on the same questions with shuffled charts, sampled rollouts (at the
    rollout ``temperature``) on ``rows`` and, with tools, greedy rollouts on ``rows`` whose tool turns show the
    unedited chart (the tool-placebo control); a summary and the per-row records of each of ``conditions``.

    The sampled condition reads the policy's distribution rather than its mode: a warm start that keeps the asked
    label in half of its calls already keeps it in every greedy call (the asked label is the likeliest single
    one), so what RL changes about the choice of label shows in the sampled correct-label share."""
    import torch

    unknown = sorted(set(conditions) - set(CONDITIONS))
    if unknown:
        raise ValueError(f"unknown condition(s) {', '.join(unknown)}; valid conditions: {', '.join(CONDITIONS)}")
    out: dict[str, Any] = {"with_tools": with_tools, "year_rule": year_rule}
    greedy = SamplingParams(max_new_tokens=max_new_tokens, greedy=True, kv_reuse=kv_reuse)
    sampled = SamplingParams(max_new_tokens=max_new_tokens, temperature=temperature, kv_reuse=kv_reuse)
    plan = {
        "test": (lambda: list(rows), greedy, "edited"),
        "test_shuffled_images": (lambda: shuffled_rows(rows, seed), greedy, "edited"),
        "test_sampled": (lambda: list(rows), sampled, "edited"),
        "test_placebo": (lambda: list(rows), greedy, "unedited"),
    }
    for condition in conditions:
        if condition == "test_placebo" and not with_tools:
            continue
        subset, params, observation = plan[condition]
        torch.manual_seed(seed)
        episodes = run_episodes(
            policy,
            subset(),
            with_tools=with_tools,
            n=1,
            params=params,
            prompt_config=prompts,
            tools=tools,
            batch_size=batch_size,
            observation=observation,
        )
        records = [episode_record(e, year_rule) for e in episodes]
        out[condition] = {
            **summarise(records),
            "protocol": rollout_statistics(episodes),
            "tools": episode_tool_counts(episodes),  # calls and executed calls per tool
            "items": records,
        }
        summary = out[condition]
        log.info(
            "%s: accuracy %.3f %s (published rule: %.3f)",
            condition,
            summary["accuracy"],
            summary["accuracy_by_question_type"],
            summary["published_accuracy"],
        )
    return out


def generation_test_records(
    generations: Sequence[dict[str, Any]], rows: Sequence[Row], year_rule: str = DEFAULT_YEAR_RULE
) -> list[dict[str, Any]]:
    """:func:`episode_record`'s record of each question from generations in the contract
    (``chartrl.rollout.generations``: what a verl generation job writes too), read from its first sample (a greedy
    evaluation has one): relaxed accuracy, format, tool call, and whether the first executed call kept every label
    the question names. ``rows``: the split generated on (question types and labels)."""
    import json

    by_id = {row.id: row for row in rows}
    first: dict[str, dict[str, Any]] = {}
    for record in sorted(generations, key=lambda r: (r["id"], r["sample"])):
        first.setdefault(record["id"], record)
    out = []
    for row_id, record in first.items():
        executed = [
            text
            for text, error in zip(
                json.loads(record["tool_calls"]), json.loads(record["tool_error_kinds"]), strict=False
            )
            if not error
        ]
        kept = labels_kept(executed)
        out.append(
            question_record(
                by_id[row_id],
                record["final_response"],
                bool(record["tool_called"]),
                kept,
                year_rule,
                tool_outcome=record.get("tool_outcome"),
                sampled_tokens=record.get("response_tokens"),
            )
        )
    return out
