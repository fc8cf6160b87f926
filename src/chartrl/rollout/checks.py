"""Protocol and perception checks on a set of episodes: is the model calling tools well, answering in the
format, reading the chart? Used after the warm start and in the rollout CLI.

The shuffled-image control pairs each question with another row's chart (and its boxes): an accuracy that
survives the shuffle comes from the question text, not from the image.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from typing import Any

from chartrl.data.contract import Row


def shuffled_rows(rows: Sequence[Row], seed: int) -> list[Row]:
    """Each row with the chart (image and boxes) of another row: a derangement, so no row keeps its own."""
    rng = random.Random(f"shuffled-control:{seed}")
    if len(rows) < 2:
        raise ValueError("the shuffled-image control needs at least two rows")
    order = list(range(len(rows)))
    while any(i == j for i, j in enumerate(order)):
        rng.shuffle(order)
    return [
        dataclasses.replace(row, images=rows[j].images, bboxes=rows[j].bboxes, chart_type=rows[j].chart_type)
        for row, j in zip(rows, order, strict=True)
    ]


def masked_rows(rows: Sequence[Row]) -> list[Row]:
    """Each row with its chart as the mask tool shows it when it keeps the labels the question names (rows that
    name none, or whose chart has no boxes for them, keep their chart): can the model read an edited chart?"""
    import io

    from chartrl.tools.focus import focus

    out = []
    for row in rows:
        about = list(row.extra.get("about") or [])
        axis = next((a for a in ("x_values", "y_values") if about and set(about) <= set(row.bboxes.get(a, {}))), None)
        edited = focus(row.images[0], row.bboxes, axis, about, "mask") if axis else None
        if edited is None or not edited.ok:
            out.append(row)
            continue
        buffer = io.BytesIO()
        edited.image.save(buffer, format="PNG")
        out.append(dataclasses.replace(row, images=[buffer.getvalue()]))
    return out


def kept_labels(episode) -> list[str]:
    """The labels the episode's first executed call kept (empty when none ran)."""
    from chartrl.tools import parse_tool_calls

    for text, outcome in zip(episode.tool_call_texts, episode.tool_outcomes, strict=False):
        if outcome != "executed":
            continue
        parsed = parse_tool_calls(text)
        for call in parsed.calls:
            for key in ("x_values", "y_values"):
                if key in call.arguments:
                    return [str(v) for v in call.arguments[key]]
    return []


def protocol_metrics(episodes: Sequence[Any]) -> dict[str, float]:
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
