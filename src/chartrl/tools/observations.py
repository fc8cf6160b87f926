"""How tools word what they did: one line of text the model reads after its call.

Model-chosen strings (labels, tool names) are shown shortened and on one line, so a huge or multi-line argument
cannot blow up the conversation; chart labels are shown as the chart writes them. Every observation line is
storable text: a lone surrogate (what the JSON escape ``"\\ud800"`` in a tool call decodes to) is written back as
its escape, since no tokenizer, parquet file or UTF-8 stream takes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from chartrl.files import storable

MAX_SHOWN = 60
"""Characters of one model-chosen value shown back to the model."""
MAX_LISTED = 40
"""Labels listed in one observation (a ChartQA bar chart has at most a few dozen)."""
MAX_OBSERVATION = 1200
"""Characters of one observation line (verl truncates tool responses too: max_tool_response_length)."""

AXIS_WORDS = {"x_values": "x value", "y_values": "y value"}


def one_line(text: str, limit: int = MAX_OBSERVATION) -> str:
    """``text`` with all whitespace runs (newlines included) folded to one space, cut to ``limit`` characters,
    lone surrogates escaped (:func:`storable`)."""
    folded = " ".join(storable(text).split())
    return folded if len(folded) <= limit else folded[: limit - 3] + "..."


def shown(value: Any) -> str:
    """A model-chosen value as the model wrote it (JSON for non-strings), quoted, on one line, shortened."""
    try:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    except (RecursionError, ValueError):  # a value nested past the recursion limit, or a circular one
        text = f"<{type(value).__name__} nested too deeply>"
    return f"'{one_line(text, MAX_SHOWN)}'"


def listed(labels: Iterable[str]) -> str:
    labels = [one_line(label, MAX_SHOWN) for label in labels]
    if len(labels) > MAX_LISTED:
        return ", ".join(labels[:MAX_LISTED]) + f", ... ({len(labels) - MAX_LISTED} more)"
    return ", ".join(labels)


def axis_noun(axis: str, labels: Sequence[str]) -> str:
    """'x value 2019' or 'x values 2019, 2020'."""
    word = AXIS_WORDS[axis]
    return f"{word} {listed(labels)}" if len(labels) == 1 else f"{word}s {listed(labels)}"
