"""Matching the labels a model names against the chart's own labels.

Exact first; then ignoring case and whitespace (``"united states "`` finds ``"United States"``), but only when
that finds exactly one label. Anything else is an ``unknown_label`` error that lists the valid labels, so the
model sees what it could have written.
"""

from __future__ import annotations

from collections.abc import Sequence

from chartrl.tools.calls import ToolError
from chartrl.tools.observations import AXIS_WORDS, listed, shown


def loose_form(label: str) -> str:
    return " ".join(label.split()).casefold()


def match_labels(requested: Sequence[str], valid: Sequence[str], axis: str) -> tuple[tuple[str, ...], ToolError | None]:
    """The chart labels ``requested`` names, in request order without repeats, or an error naming the misses."""
    exact = set(valid)
    loose: dict[str, list[str]] = {}
    for label in valid:
        loose.setdefault(loose_form(label), []).append(label)
    resolved: list[str] = []
    missing: list[str] = []
    for name in requested:
        if name in exact:
            found = name
        else:
            candidates = loose.get(loose_form(name), [])
            if len(candidates) != 1:
                missing.append(name)
                continue
            found = candidates[0]
        if found not in resolved:
            resolved.append(found)
    if missing:
        word = AXIS_WORDS[axis]
        names = ", ".join(shown(name) for name in missing[:5]) + (", ..." if len(missing) > 5 else "")
        plural = "s" if len(missing) > 1 else ""
        return (), ToolError("unknown_label", f"unknown {word}{plural} {names}; valid {word}s: {listed(valid)}")
    return tuple(resolved), None
