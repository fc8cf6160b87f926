"""The statistics of a set of episodes: is the model calling tools well, answering in the format, reading the
chart? One set, read by the after-warm-start check, the test accuracy, the generation stage, the rollout CLI and
(under the names it logs to MLflow) the local trainer."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any


def kept_labels(episode) -> list[str]:
    """The labels the episode's first executed call to a label tool kept (empty when none ran)."""
    from chartrl.tools import labels_kept

    executed = (t for t, o in zip(episode.tool_call_texts, episode.tool_outcomes, strict=False) if o == "executed")
    return labels_kept(executed)


def rollout_statistics(episodes: Sequence[Any]) -> dict[str, float]:
    """Shares over episodes: tool calls, well-formed calls (parsed), executed calls, calls keeping the labels the
    question is about, final turns with an <answer>, and relaxed accuracy."""
    from chartrl.answers import answer_accuracy, extract_answer

    n = len(episodes)
    called = [e for e in episodes if e.tool_outcomes]
    about = [e for e in called if e.row.extra.get("about")]
    answered = [extract_answer(e.final_response) for e in episodes]
    accuracy = [answer_accuracy(e.final_response, e.row.answer) for e in episodes]
    return {
        "episodes": n,
        "tool_call_rate": len(called) / n if n else 0.0,
        "well_formed_call_rate": sum(e.tool_outcome != "malformed" for e in called) / len(called) if called else 0.0,
        "executed_call_rate": sum(e.tool_outcome == "executed" for e in called) / len(called) if called else 0.0,
        "correct_label_rate": (
            sum(set(e.row.extra["about"]) <= set(kept_labels(e)) for e in about) / len(about) if about else 0.0
        ),
        "answer_rate": sum(a is not None for a in answered) / n if n else 0.0,
        "accuracy": sum(accuracy) / n if n else 0.0,
        "vision_tokens_sampled": sum(e.vision_tokens for e in episodes),
        "truncated_rate": sum(e.truncated for e in episodes) / n if n else 0.0,
        "mean_sampled_tokens": sum(e.sampled_tokens for e in episodes) / n if n else 0.0,
    }


def accuracy_by_question_type(episodes: Sequence[Any]) -> dict[str, float]:
    """Mean answer accuracy per question type (``extra.question_type``, ``unknown`` without one)."""
    from chartrl.answers import answer_accuracy

    scores: dict[str, list[float]] = defaultdict(list)
    for episode in episodes:
        score = answer_accuracy(episode.final_response, episode.row.answer)
        scores[episode.row.extra.get("question_type", "unknown")].append(score)
    return {qtype: sum(s) / len(s) for qtype, s in sorted(scores.items())}
