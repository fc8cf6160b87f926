"""Label bands: the interval a category owns along its axis."""

from __future__ import annotations

from collections.abc import Sequence


def half_way_intervals(centres: Sequence[float], low: float, high: float) -> list[tuple[float, float]]:
    """For each centre (in any order), the interval reaching half-way to its neighbours, the outer ones
    symmetric (half the gap to their only neighbour; a lone centre gets half of [low, high] on each side),
    clipped to [low, high]. Returned in the order of ``centres``."""
    order = sorted(range(len(centres)), key=centres.__getitem__)
    c = [centres[i] for i in order]
    out: list[tuple[float, float]] = [(low, high)] * len(c)
    for k, i in enumerate(order):
        left = (c[k] - c[k - 1]) / 2 if k > 0 else None
        right = (c[k + 1] - c[k]) / 2 if k + 1 < len(c) else None
        if left is None and right is None:
            left = right = (high - low) / 2
        left = right if left is None else left
        right = left if right is None else right
        out[i] = (max(low, c[k] - left), min(high, c[k] + right))
    return out
