"""The sample's label boxes as the tools read them: the ``bboxes`` column of the data contract.

``{"x_values": {label: [x1, y1, x2, y2]}, "y_values": {...}}``, normalised to [0, 1] of the image
(chartrl.data.contract). The boxes come from the data stage, not from the model, so a broken value here is an
infrastructure failure (:class:`ChartBoxesError`), never a tool error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from chartrl.data.contract import BOX_AXES, check_box
from chartrl.errors import ChartrlError

ChartBoxes = dict[str, dict[str, list[float]]]
BoxesInput = Mapping[str, Any] | str | bytes | None


class ChartBoxesError(ChartrlError):
    """The bboxes given to a tool are not in the data contract; the message says what is wrong."""


def read_bboxes(value: BoxesInput) -> ChartBoxes:
    """The bboxes contract from a dict or its JSON text (as stored in the parquet column); a missing axis is an
    axis without boxes, None is a chart without boxes."""
    if value is None:
        return {axis: {} for axis in BOX_AXES}
    if isinstance(value, str | bytes):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as err:
            raise ChartBoxesError(f"bboxes are not valid JSON: {err}") from err
    if not isinstance(value, Mapping):
        raise ChartBoxesError(
            f"bboxes must be a JSON object with keys {', '.join(BOX_AXES)}, got {type(value).__name__}"
        )
    unknown = sorted(set(value) - set(BOX_AXES))
    if unknown:
        raise ChartBoxesError(f"bboxes has unknown keys {', '.join(map(str, unknown))}; known: {', '.join(BOX_AXES)}")
    boxes: ChartBoxes = {}
    for axis in BOX_AXES:
        entries = value.get(axis) or {}
        if not isinstance(entries, Mapping):
            raise ChartBoxesError(f"bboxes.{axis} must map labels to boxes, got {type(entries).__name__}")
        for label, box in entries.items():
            problem = check_box(list(box) if isinstance(box, list | tuple) else box)
            if not isinstance(label, str) or problem:
                raise ChartBoxesError(f"bboxes.{axis}[{label!r}]: {problem or 'the label is not a string'}")
        boxes[axis] = {label: [float(v) for v in box] for label, box in entries.items()}
    return boxes
