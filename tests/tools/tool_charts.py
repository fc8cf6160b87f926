"""Charts with known label boxes for the tool tests: synthetic bar charts rendered here (exact boxes) and the 30
bar charts of the real ChartQA sample (ReFocus boxes, through the ChartQA reader)."""

from __future__ import annotations

import io
import math
import random
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
from PIL import Image

from conftest import CHARTQA_REAL, dataset_from


@dataclass(frozen=True)
class Chart:
    name: str
    image: Image.Image
    bboxes: dict[str, dict[str, list[float]]]

    @property
    def axis(self) -> str:
        """The axis that has boxes (bar charts have boxes on exactly one)."""
        return "x_values" if self.bboxes["x_values"] else "y_values"

    @property
    def labels(self) -> list[str]:
        return list(self.bboxes[self.axis])


@cache
def synthetic_bar_charts(size: tuple[int, int] = (320, 240), per_style: int = 2) -> tuple[Chart, ...]:
    """Vertical, horizontal and grouped bar charts from chartrl.data.synthchart (its default options)."""
    from chartrl.data.synthchart import plan_chart, render_chart

    options = dict(dataset_from({"source": "synthchart", "splits": {"test": 1}}, name="tools").options)
    charts = []
    for style in ("vbar", "hbar", "grouped"):
        for index in range(per_style):
            chart = plan_chart(random.Random(f"tools-test:{style}:{index}"), {**options, "styles": {style: 1}})
            rendered = render_chart(chart, size)
            image = Image.open(io.BytesIO(rendered.png)).convert("RGB")
            charts.append(Chart(f"synth-{style}-{index}", image, rendered.bboxes))
    return tuple(charts)


@cache
def real_bar_charts() -> tuple[Chart, ...]:
    """The 30 bar charts of tests/fixtures/chartqa_real, one per image, with the boxes the reader gives them."""
    from chartrl.data.stage import collect_split

    dataset = dataset_from(
        {
            "source": "chartqa_original",
            "path": str(CHARTQA_REAL),
            "splits": ["test"],
            "refocus_boxes": {"test": "test/refocus_chartqa_vcot_test.jsonl"},
        },
        name="cqa",
    )
    rows, _ = collect_split(dataset, "test", root=Path("."))
    charts = {}
    for row in rows:
        if row.chart_type in ("v_bar", "h_bar") and row.extra["imgname"] not in charts:
            image = Image.open(io.BytesIO(row.images[0])).convert("RGB")
            charts[row.extra["imgname"]] = Chart(row.extra["imgname"], image, row.bboxes)
    return tuple(charts.values())


def band_pixels(box: list[float], size: tuple[int, int]) -> tuple[int, int, int, int]:
    """The pixels a normalised box touches (left, top, right, bottom; half-open): the region a tool may edit."""
    width, height = size
    x1, y1, x2, y2 = box
    return math.floor(x1 * width), math.floor(y1 * height), math.ceil(x2 * width), math.ceil(y2 * height)


def region(size: tuple[int, int], boxes: list[tuple[int, int, int, int]]) -> np.ndarray:
    """(H, W) bool: True inside any of the pixel boxes."""
    width, height = size
    inside = np.zeros((height, width), dtype=bool)
    for left, top, right, bottom in boxes:
        inside[max(top, 0) : bottom, max(left, 0) : right] = True
    return inside


def changed(before: Image.Image, after: Image.Image) -> np.ndarray:
    """(H, W) bool: pixels that differ."""
    assert before.size == after.size and after.mode == "RGB"
    return (np.asarray(before.convert("RGB")) != np.asarray(after)).any(axis=-1)
