"""Answers that collapse to one value: a policy that gives the same answer to (almost) every question of a type
scores that answer's share among the gold answers, whatever it reads from the chart. On the synthetic compare
questions every series answering "Yes" scores 0.49, the share of "Yes" gold answers, and no accuracy table shows
why: this check names it.

Read from the per-question test records (``chartrl.evaluate.accuracy``: each keeps its extracted answer and
the gold answer). Answers are compared after trimming and case-folding; a missing answer counts as one value.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

COLLAPSE_SHARE = 0.9
"""A question type collapses when one answer value is at least this share of a series' answers to it: 90% leaves
room for a few answers that break the pattern (a malformed reply, a rare case) while excluding any policy whose
answers follow the charts on questions with two or more balanced gold values."""

NO_ANSWER = "(no answer)"


def _normalised(answer: str | None) -> str:
    return NO_ANSWER if answer is None else answer.strip().casefold()


def answer_collapse(
    answers: Sequence[str | None], truths: Sequence[str], share: float = COLLAPSE_SHARE
) -> dict[str, Any] | None:
    """The most frequent answer (normalised), its share of ``answers``, the share of that value among the gold
    answers ``truths``, and whether the answers collapse (top share >= ``share``); None without answers."""
    if not answers:
        return None
    counts = Counter(_normalised(a) for a in answers)
    value, count = counts.most_common(1)[0]
    shown = (
        next(a.strip() for a in answers if a is not None and _normalised(a) == value) if value != NO_ANSWER else value
    )
    gold = sum(_normalised(t) == value for t in truths) / len(truths) if truths else None
    return {
        "value": shown,
        "share": count / len(answers),
        "gold_share": gold,
        "n": len(answers),
        "distinct": len(counts),
        "collapsed": count / len(answers) >= share,
    }


def collapse_sentence(qtype: str, found: Mapping[str, Any]) -> str:
    """How the report names a collapse, e.g. "compare: every answer is 'Yes' (0.49 is the share of 'Yes' among the
    gold answers)"."""
    how = "every answer is" if found["share"] == 1 else f"{found['share']:.0%} of the answers are"
    gold = found["gold_share"]
    tail = f" ({gold:.2f} is the share of '{found['value']}' among the gold answers)" if gold is not None else ""
    return f"{qtype}: {how} '{found['value']}'{tail}"


def series_collapse(records: Sequence[Mapping[str, Any]], share: float = COLLAPSE_SHARE) -> dict[str, Any] | None:
    """Per question type of one series' test records, :func:`answer_collapse` and, where collapsed, its sentence;
    None when the records keep no answers."""
    if not records or "answer" not in records[0]:
        return None
    by_type: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        by_type.setdefault(record["question_type"], []).append(record)
    out = {}
    for qtype, group in sorted(by_type.items()):
        found = answer_collapse([r["answer"] for r in group], [r["truth"] for r in group], share)
        if found is not None:
            found["sentence"] = collapse_sentence(qtype, found) if found["collapsed"] else None
            out[qtype] = found
    return out


def collect_collapse(records: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """Every test series' collapse check (series name -> question type -> finding); each collapse sentence once with
    the series it holds for (``flagged``); the series whose records keep no answers; and the threshold."""
    series = {name: found for name, rows in records.items() if (found := series_collapse(rows)) is not None}
    flagged: dict[str, list[str]] = {}
    for name, types in series.items():
        for found in types.values():
            if found["collapsed"]:
                flagged.setdefault(found["sentence"], []).append(name)
    return {
        "share": COLLAPSE_SHARE,
        "series": series,
        "flagged": [{"sentence": sentence, "series": names} for sentence, names in flagged.items()],
        "without_answers": [name for name in records if name not in series],
    }
