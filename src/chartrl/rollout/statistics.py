"""The statistics of a set of episodes: is the model calling tools well, answering in the format, reading the
chart? One set, read by the after-warm-start check, the test accuracy, the generation stage, the rollout CLI and
(under the names it logs to MLflow) the local trainer."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from chartrl.answers import ANSWER_OPEN, answer_accuracy, extract_answer, is_well_formed
from chartrl.tools import TOOLS, labels_kept, parse_tool_calls
from chartrl.tools.protocol import tag_bodies


def kept_labels(episode) -> list[str]:
    """The labels the episode's first executed call to a label tool kept (empty when none ran)."""
    executed = (t for t, o in zip(episode.tool_call_texts, episode.tool_outcomes, strict=False) if o == "executed")
    return labels_kept(executed)


def called_tools(text: str) -> list[str]:
    """The tools an assistant turn's calls name: those of its parsed calls or, for a turn whose calls do not parse
    (bad arguments, too many calls), the known tool each tag's JSON object names. A text whose calls name no known
    tool (or are not JSON) names none."""
    parsed = parse_tool_calls(text, max_calls=max(1, text.count("<tool_call>")))
    if parsed.calls:
        return sorted({call.name for call in parsed.calls})
    names = set()
    for body in tag_bodies(text):
        try:
            value = json.loads(body.strip())
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict) and isinstance(value.get("name"), str) and value["name"] in TOOLS:
            names.add(value["name"])
    return sorted(names)


def tool_counts(call_texts: Iterable[str], error_kinds: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Per tool name: its ``calls``, the ``executed`` ones and the ``failed`` ones by error kind (``{kind: n}``),
    over calls given as the assistant texts that held them and their error kinds (empty for a call that ran:
    ``Episode.tool_error_kinds``, the generations' ``tool_error_kinds``; ``turn_limit`` for a call left without a
    turn to run in). A call counts for the tools it names (:func:`called_tools`); one naming no known tool counts
    for none."""
    counts: dict[str, dict[str, Any]] = {}
    for text, error in zip(call_texts, error_kinds, strict=False):
        for name in called_tools(text):
            count = counts.setdefault(name, empty_tool_count())
            count["calls"] += 1
            if error:
                count["failed"][error] = count["failed"].get(error, 0) + 1
            else:
                count["executed"] += 1
    return dict(sorted(counts.items()))


def empty_tool_count() -> dict[str, Any]:
    """One tool's counts before any call: ``{"calls": 0, "executed": 0, "failed": {}}``."""
    return {"calls": 0, "executed": 0, "failed": {}}


def episode_tool_counts(episodes: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """:func:`tool_counts` over every call of ``episodes``."""
    texts = [text for e in episodes for text in e.tool_call_texts]
    return tool_counts(texts, [kind for e in episodes for kind in e.tool_error_kinds])


def add_tool_counts(
    total: Mapping[str, Mapping[str, Any]], more: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """``total`` with ``more``'s counts added, per tool and per error kind (a new dict; a count written before
    failures were counted by kind has no ``failed`` and adds none)."""
    out = {name: _copied(count) for name, count in total.items()}
    for name, count in more.items():
        into = out.setdefault(name, empty_tool_count())
        for key in ("calls", "executed"):
            into[key] += count.get(key, 0)
        for kind, n in (count.get("failed") or {}).items():
            into["failed"][kind] = into["failed"].get(kind, 0) + n
    return dict(sorted(out.items()))


def _copied(count: Mapping[str, Any]) -> dict[str, Any]:
    failed = dict(count.get("failed") or {})
    return {"calls": count.get("calls", 0), "executed": count.get("executed", 0), "failed": failed}


FAILED_CALL = ("failed", "malformed")
"""Tool outcomes of a call that did not run: refused by the tool, or not parsed."""


def has_preamble(final_response: str) -> bool | None:
    """Does the final turn hold text before its answer tag (a restated question, reasoning: a longer response)?
    None when it has no answer tag."""
    opening = final_response.find(ANSWER_OPEN)
    return bool(final_response[:opening].strip()) if opening >= 0 else None


def habit_statistics(episodes: Sequence[Any], accuracy: Sequence[float]) -> dict[str, float]:
    """What the reward generations' shaping acts on, as shares of the episodes: answers not well-formed (v2's format
    term), answers with a preamble (v2's length term), calls that failed or did not parse (v2's tool term), calls
    that ran and still ended in a wrong answer (what v2's ungated tool term pays for and v3's gate does not); and the
    mean sampled tokens of the wrong answers (Dr.GRPO's length bias)."""
    n = len(episodes)
    preambles = [p for p in (has_preamble(e.final_response) for e in episodes) if p is not None]
    malformed = sum(not is_well_formed(e.final_response) for e in episodes)
    wrong = [e.sampled_tokens for e, a in zip(episodes, accuracy, strict=True) if not a]
    return {
        "format_error_rate": malformed / n if n else 0.0,
        "preamble_rate": sum(preambles) / len(preambles) if preambles else 0.0,
        "failed_call_rate": sum(e.tool_outcome in FAILED_CALL for e in episodes) / n if n else 0.0,
        "unhelpful_call_rate": (
            sum(e.tool_outcome == "executed" and not a for e, a in zip(episodes, accuracy, strict=True)) / n
            if n
            else 0.0
        ),
        "wrong_answer_tokens": sum(wrong) / len(wrong) if wrong else 0.0,
    }


def rollout_statistics(episodes: Sequence[Any]) -> dict[str, float]:
    """Shares over episodes: tool calls, well-formed calls (parsed), executed calls, calls keeping the labels the
    question is about, final turns with an <answer>, relaxed accuracy, and the habits (:func:`habit_statistics`)."""
    n = len(episodes)
    called = [e for e in episodes if e.tool_outcomes]
    about = [e for e in called if e.row.extra.get("about")]
    answered = [extract_answer(e.final_response) for e in episodes]
    accuracy = [answer_accuracy(e.final_response, e.row.answer) for e in episodes]
    return {
        **habit_statistics(episodes, accuracy),
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
    scores: dict[str, list[float]] = defaultdict(list)
    for episode in episodes:
        score = answer_accuracy(episode.final_response, episode.row.answer)
        scores[episode.row.extra.get("question_type", "unknown")].append(score)
    return {qtype: sum(s) / len(s) for qtype, s in sorted(scores.items())}
