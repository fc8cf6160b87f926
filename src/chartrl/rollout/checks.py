"""The controls the checks of a policy roll out next to its plain rows: the shuffled-image control and the
masked chart (what the statistics of ``chartrl.rollout.statistics`` are then counted on).

The shuffled-image control pairs each question with another row's chart (and its boxes): an accuracy that
survives the shuffle comes from the question text, not from the image.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence

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
