"""``zoom_in``: crop a region of the chart and show it enlarged (DeepEyes, Zheng et al. 2025, arXiv 2505.14362).

DeepEyes' ``image_zoom_in_tool`` takes ``bbox_2d`` in pixels; here the box is normalised to [0, 1] of the image,
like every box in the data contract, so a call means the same on a chart of any size (and on the resized copy
verl's processor hands the tool). The crop and resize rules are in chartrl.tools.pixels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from chartrl.tools import pixels
from chartrl.tools.calls import ToolError, ToolResult
from chartrl.tools.observations import shown
from chartrl.tools.pixels import ChartImage


def box_problem(bbox: Any) -> str | None:
    """None when ``bbox`` is a usable zoom box, else what is wrong with it (one line)."""
    if not isinstance(bbox, list | tuple) or len(bbox) != 4:
        return f"bbox_2d must be 4 numbers [x1, y1, x2, y2], got {shown(bbox)}"
    if not all(_finite_number(v) for v in bbox):
        return f"bbox_2d must be 4 finite numbers, got {shown(list(bbox))}"
    x1, y1, x2, y2 = bbox
    if not all(0.0 <= v <= 1.0 for v in bbox):
        return f"bbox_2d {_written(bbox)} lies outside [0, 1]; give fractions of the image width and height"
    if not (x1 < x2 and y1 < y2):
        return f"bbox_2d {_written(bbox)} is empty or inverted; need x1 < x2 and y1 < y2"
    return None


def _finite_number(value: Any) -> bool:
    """A JSON number that is finite. An integer is always finite, and is compared exactly: ``math.isfinite``
    would convert it to a float, which raises OverflowError past about 309 digits (a model can write 400)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _written(bbox: Sequence[float]) -> str:
    """The box as the observation shows it; a huge integer is shown shortened, never converted to a float."""
    return "[" + ", ".join(f"{v:.4g}" if isinstance(v, float) or abs(v) < 10**15 else shown(v) for v in bbox) + "]"


def zoom_in(image: ChartImage, bbox_2d: Sequence[float]) -> ToolResult:
    """Crop ``bbox_2d`` (normalised [x1, y1, x2, y2]) and enlarge it; never raises on the model's box."""
    image = pixels.as_rgb(image)
    problem = box_problem(bbox_2d)
    if problem:
        return ToolResult.failed(image, ToolError("bad_box", problem))
    crop = pixels.zoom_crop_box(bbox_2d, image.size)
    left, top, right, bottom = crop
    long_side, short_side = max(right - left, bottom - top), min(right - left, bottom - top)
    if long_side / short_side > pixels.PROCESSOR_MAX_ASPECT:
        return ToolResult.failed(
            image,
            ToolError(
                "bad_box",
                f"bbox_2d {_written(bbox_2d)} is {long_side / short_side:.0f} times longer than wide; "
                f"the image processor takes at most {pixels.PROCESSOR_MAX_ASPECT}",
            ),
        )
    zoomed = pixels.zoom(image, crop)
    return ToolResult(
        ok=True,
        image=zoomed,
        applied=(f"{left},{top},{right},{bottom}",),
        error=None,
        observation=f"Zoomed in on {_written(bbox_2d)}.",
    )
