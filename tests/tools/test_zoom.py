"""zoom_in: which pixels are cropped (the 28-px minimum, grown around the centre) and the size they are shown at
(the original's pixel budget, at least 56 px per side, aspect kept)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from PIL import Image

from chartrl.tools import ToolCall, apply_tool_call, zoom_in
from chartrl.tools.pixels import zoom_crop_box, zoom_output_size

from tool_charts import real_bar_charts, synthetic_bar_charts


def gradient(width: int, height: int) -> Image.Image:
    """Every pixel different, so a crop can be located exactly."""
    x, y = np.meshgrid(np.arange(width), np.arange(height))
    pixels = np.stack([x % 256, y % 256, (x // 256) * 16 + (y // 256)], axis=-1).astype(np.uint8)
    return Image.fromarray(pixels, "RGB")


@pytest.mark.parametrize(
    "box,size,crop",
    [
        # a box well above 28 px: exactly the pixels it touches
        ([0.1, 0.2, 0.5, 0.6], (800, 600), (80, 120, 400, 360)),
        # fractional edges: every pixel the box touches (floor of the start, ceil of the end)
        ([0.1001, 0.2001, 0.4999, 0.5999], (800, 600), (80, 120, 400, 360)),
        # 8 x 6 px: each side grown to 28 around its centre
        ([0.5, 0.5, 0.51, 0.51], (800, 600), (390, 289, 418, 317)),
        # only the short side is grown; the long side stays
        ([0.1, 0.5, 0.9, 0.505], (800, 600), (80, 287, 720, 315)),
        # at the top left corner: grown, then shifted back inside the image
        ([0.0, 0.0, 0.01, 0.01], (800, 600), (0, 0, 28, 28)),
        # at the bottom right corner
        ([0.99, 0.99, 1.0, 1.0], (800, 600), (772, 572, 800, 600)),
        # an image narrower than 28 px: the crop is the whole width
        ([0.2, 0.2, 0.4, 0.4], (20, 100), (0, 16, 20, 44)),
        # the whole image
        ([0.0, 0.0, 1.0, 1.0], (640, 480), (0, 0, 640, 480)),
    ],
)
def test_crop_box(box, size, crop):
    assert zoom_crop_box(box, size) == crop


@pytest.mark.parametrize(
    "crop,original,shown",
    [
        # the whole chart: shown at its own size
        ((800, 600), (800, 600), (800, 600)),
        # a quarter of the chart: scaled to the chart's pixel count, aspect kept
        ((400, 300), (800, 600), (800, 600)),
        # a 28 x 28 crop of an 800 x 600 chart: a square of 800 * 600 pixels at most
        ((28, 28), (800, 600), (692, 692)),
        # a thin strip: budget-filling still leaves both sides over 56
        ((640, 28), (800, 600), (3312, 144)),
        # a 168 x 56 chart (the embedded task's size), a 168 x 28 strip: the 56-px minimum wins over the budget
        ((168, 28), (168, 56), (336, 56)),
        # a 20 x 100 image, 20 x 28 crop: 56-px minimum on the short side
        ((20, 28), (20, 100), (56, 79)),
    ],
)
def test_output_size(crop, original, shown):
    assert zoom_output_size(crop, original) == shown


@pytest.mark.parametrize(
    "box,size",
    [
        ([0.1, 0.2, 0.5, 0.6], (800, 600)),
        ([0.5, 0.5, 0.51, 0.51], (800, 600)),
        ([0.0, 0.4, 1.0, 0.45], (640, 480)),
        ([0.3, 0.0, 0.31, 1.0], (640, 480)),
        ([0.25, 0.25, 0.75, 0.75], (168, 56)),
        ([0.0, 0.0, 1.0, 1.0], (850, 600)),
    ],
)
def test_zoom_shows_the_crop_enlarged(box, size):
    chart = gradient(*size)
    result = zoom_in(chart, box)
    assert result.ok and result.error is None
    left, top, right, bottom = zoom_crop_box(box, size)
    assert result.applied == (f"{left},{top},{right},{bottom}",)
    crop_w, crop_h = right - left, bottom - top
    width, height = result.image.size
    assert min(width, height) >= 56  # Qwen2-VL's processor minimum
    if min(size) >= 112:
        assert width * height <= size[0] * size[1]  # never more pixels (visual tokens) than the chart
        assert width >= crop_w and height >= crop_h  # a zoom never shrinks
    assert abs(width / height - crop_w / crop_h) <= 2 / min(width, height) * (width / height)  # aspect kept
    # the pixels are the crop's: the enlarged image shrunk back is the crop
    expected = chart.crop((left, top, right, bottom)).resize(result.image.size, Image.Resampling.BICUBIC)
    assert np.array_equal(np.asarray(result.image), np.asarray(expected))


def test_zoom_rules_hold_on_every_fixture_chart():
    for chart in [*synthetic_bar_charts(), *real_bar_charts()]:
        width, height = chart.image.size
        for box in ([0.0, 0.0, 0.3, 0.3], [0.4, 0.45, 0.41, 0.5], list(chart.bboxes[chart.axis].values())[0]):
            result = zoom_in(chart.image, box)
            assert result.ok, (chart.name, result.observation)
            w, h = result.image.size
            assert min(w, h) >= 56 and w * h <= width * height, chart.name
            assert max(w, h) / min(w, h) < 200


@pytest.mark.parametrize(
    "box,message",
    [
        # three numbers
        ([0.1, 0.2, 0.3], "bbox_2d must be 4 numbers [x1, y1, x2, y2], got '[0.1, 0.2, 0.3]'"),
        # strings are not numbers
        (["0.1", "0.2", "0.3", "0.4"], "bbox_2d must be 4 finite numbers"),
        # neither are booleans
        ([True, 0, 1, 1], "bbox_2d must be 4 finite numbers"),
        # NaN
        ([0.1, math.nan, 0.3, 0.4], "bbox_2d must be 4 finite numbers"),
        # pixels instead of fractions
        ([100, 50, 400, 300], "bbox_2d [100, 50, 400, 300] lies outside [0, 1]"),
        # negative
        ([-0.1, 0.0, 0.5, 0.5], "lies outside [0, 1]"),
        # empty: x1 == x2
        ([0.3, 0.1, 0.3, 0.5], "is empty or inverted; need x1 < x2 and y1 < y2"),
        # inverted: y1 > y2
        ([0.1, 0.6, 0.3, 0.5], "is empty or inverted"),
        # not a list at all
        ("0.1, 0.2, 0.3, 0.4", "bbox_2d must be 4 numbers"),
        # an integer of 400 digits: past what a float holds, shown shortened (it raised OverflowError)
        ([int("9" * 400), 0, 1, 1], "bbox_2d ['" + "9" * 20),
        ([0, 0, -(10**400), 1], "lies outside [0, 1]"),
    ],
)
def test_bad_boxes_are_errors_and_leave_the_chart_unchanged(box, message):
    chart = gradient(80, 60)
    result = zoom_in(chart, box)
    assert not result.ok and result.error.kind == "bad_box"
    assert message in result.observation and result.observation.startswith("Error: ")
    assert result.image.size == chart.size and np.array_equal(np.asarray(result.image), np.asarray(chart))


def test_an_aspect_the_image_processor_refuses_is_a_bad_box():
    # a 6100 x 30 image zoomed as a whole: 203:1, over smart_resize's 200:1 limit
    result = zoom_in(Image.new("RGB", (6100, 30)), [0.0, 0.0, 1.0, 1.0])
    assert result.error.kind == "bad_box" and "at most 200" in result.observation


def test_zoom_in_through_apply_tool_call_ignores_the_label_boxes():
    chart = gradient(200, 100)
    result = apply_tool_call(chart, None, ToolCall("zoom_in", {"bbox_2d": [0.25, 0.25, 0.75, 0.75]}))
    assert result.ok and result.observation == "Zoomed in on [0.25, 0.25, 0.75, 0.75]."
