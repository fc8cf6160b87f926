"""The order the report shows reward generations in, one rule for every table and figure: the study's numbered
generations by number (v1, v2, v3, ..., v10), then any other generation (a control) in natural order.

Ordering by the config's series mapping, or as plain strings, would put v3 before v2 where an overlay lists series
out of order, and v10 before v2."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TypeVar

from chartrl.config import Config, EvalSeries, TrainSeries

S = TypeVar("S", TrainSeries, EvalSeries)

NUMBERED = re.compile(r"^v(\d+)$")
"""A reward generation of the study (``v1``, ``v2``, ...); anything else (``control``) comes after them."""


def natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    """``text`` split into digit and non-digit runs, digits compared as numbers (``h2`` < ``h10``)."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text) if part)


def generation_key(name: str) -> tuple[int, int, tuple[tuple[int, int | str], ...]]:
    """Sort key of a generation name: numbered generations first, by number; the others after, naturally."""
    match = NUMBERED.match(name)
    if match:
        return (0, int(match.group(1)), ())
    return (1, 0, natural_key(name))


def is_numbered(name: str) -> bool:
    """Is ``name`` one of the study's numbered reward generations (not a control)?"""
    return NUMBERED.match(name) is not None


def in_generation_order(names: Iterable[str]) -> list[str]:
    """The distinct ``names``, in generation order."""
    return sorted(set(names), key=generation_key)


def generations_in_order(config: Config) -> list[str]:
    """The generations of the config's train series, in generation order."""
    return in_generation_order(s.generation for s in config.train_series)


def in_order(series: Iterable[S]) -> list[S]:
    """``series`` (train or eval series) by generation, in config order within one generation."""
    return sorted(series, key=lambda s: generation_key(s.generation))
