"""Synthetic charts: answers re-derived from the chart data, boxes checked against the rendered pixels,
determinism, and no chart shared across splits."""

from __future__ import annotations

import io
from decimal import Decimal

import numpy as np
import pytest
from PIL import Image

from chartrl.data import synthchart
from chartrl.data.contract import check_box, check_row
from chartrl.data.stage import collect_split

from conftest import dataset_from
from synth_answers import expected_answer

SECTION = {
    "source": "synthchart",
    "seed": 7,
    "splits": {"train": 24, "val": 6, "test": 12},
    "questions_per_chart": 3,
    # every style and question type shows up in a couple of dozen charts
    "styles": {"vbar": 2, "hbar": 2, "grouped": 1, "line": 1, "pie": 1},
}


@pytest.fixture(scope="module")
def dataset():
    return dataset_from(SECTION, name="synth")


@pytest.fixture(scope="module")
def test_rows(dataset):
    rows, rejects = collect_split(dataset, "test", root=".", threads=1)
    assert rejects == []
    return rows


def test_every_answer_follows_from_the_chart_data(test_rows):
    assert {r.extra["question_type"] for r in test_rows} == set(synthchart.QUESTION_TYPES)
    for row in test_rows:
        assert row.answer == expected_answer(row), (row.id, row.problem)
        # the labels a question names appear in its text
        for label in row.extra["about"]:
            assert label in row.problem


def test_rows_meet_the_contract_and_boxes_lie_in_the_unit_square(test_rows):
    for row in test_rows:
        check_row(row)
        assert row.problem.startswith("<image>\n")
        for axis in ("x_values", "y_values"):
            for box in row.bboxes[axis].values():
                assert check_box(box) is None
        style = row.extra["style"]
        if style in ("vbar", "grouped"):
            assert list(row.bboxes["x_values"]) == row.extra["chart"]["labels"] and not row.bboxes["y_values"]
        elif style == "hbar":
            assert list(row.bboxes["y_values"]) == row.extra["chart"]["labels"] and not row.bboxes["x_values"]
        else:
            assert not row.bboxes["x_values"] and not row.bboxes["y_values"]


def _colour_mask(image: np.ndarray, hex_colour: str, tolerance: int = 12) -> np.ndarray:
    rgb = np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)])
    return (np.abs(image.astype(int) - rgb) <= tolerance).all(axis=-1)


def test_bands_sit_on_their_bars_and_bar_lengths_encode_the_values(test_rows):
    """Re-read each bar from the pixels: the bar's colour lies inside its label's band, and the bar lengths are
    proportional to the values in the chart data."""
    checked = 0
    for row in {r.extra["chart_index"]: r for r in test_rows}.values():
        style = row.extra["style"]
        if style not in ("vbar", "hbar"):
            continue
        chart = row.extra["chart"]
        image = np.asarray(Image.open(io.BytesIO(row.images[0])).convert("RGB"))
        height, width, _ = image.shape
        mask = _colour_mask(image, chart["colors"][0])
        axis = "x_values" if style == "vbar" else "y_values"
        lengths = []
        for label in chart["labels"]:
            x1, y1, x2, y2 = row.bboxes[axis][label]
            band = np.zeros_like(mask)
            band[int(y1 * height) : int(np.ceil(y2 * height)), int(x1 * width) : int(np.ceil(x2 * width))] = True
            inside = mask & band
            assert inside.sum() > 0, f"{row.id}: no bar pixels in the band of {label}"
            # the bar is the run of its colour along the band's centre line
            if style == "vbar":
                centre = int((x1 + x2) / 2 * width)
                lengths.append(mask[:, centre].sum())
            else:
                centre = int((y1 + y2) / 2 * height)
                lengths.append(mask[centre, :].sum())
        values = np.array(chart["values"][0], dtype=float)
        lengths = np.array(lengths, dtype=float)
        scale = (lengths @ values) / (values @ values)  # least squares through the origin
        assert np.abs(lengths - scale * values).max() <= 2.0, (row.id, lengths, values)
        checked += 1
    assert checked >= 3


def test_deterministic_by_seed(dataset):
    first = synthchart.plan_split(dataset.options, "val")
    again = synthchart.plan_split(dataset.options, "val")
    assert first == again
    options = synthchart.to_plain(dataset.options)
    a = synthchart.rows_for_chart((dataset.name, "val", 0, first[0], options))
    b = synthchart.rows_for_chart((dataset.name, "val", 0, first[0], options))
    assert [r.to_record() for r in a] == [r.to_record() for r in b]  # same PNG bytes, boxes, questions
    other = dict(options, seed=8)
    assert synthchart.plan_split(other, "val") != first


def test_no_chart_is_shared_across_splits(dataset):
    keys = {
        split: {c.key() for c in synthchart.plan_split(dataset.options, split)} for split in ("train", "val", "test")
    }
    assert not keys["train"] & keys["val"] and not keys["train"] & keys["test"] and not keys["val"] & keys["test"]
    assert len(keys["train"]) == SECTION["splits"]["train"]


def test_a_later_split_redraws_a_chart_an_earlier_split_holds(dataset, monkeypatch):
    """Force collisions: with a planner that always draws the same chart first, train must still be disjoint."""
    real_plan = synthchart.plan_chart
    fixed = real_plan(__import__("random").Random(0), dataset.options)

    def colliding(rng, options):
        chart = real_plan(rng, options)
        return fixed if rng.random() < 0.5 else chart

    monkeypatch.setattr(synthchart, "plan_chart", colliding)
    test = {c.key() for c in synthchart.plan_split(dataset.options, "test")}
    train = [c.key() for c in synthchart.plan_split(dataset.options, "train")]
    assert len(set(train)) == len(train) and not test & set(train)


def test_the_test_split_does_not_depend_on_the_train_size(dataset):
    options = synthchart.to_plain(dataset.options)
    bigger = dict(options, splits=dict(options["splits"], train=500))
    assert synthchart.plan_split(bigger, "test") == synthchart.plan_split(options, "test")
    assert synthchart.narrow_options(options, "test")["splits"] == {"test": 12}
    assert synthchart.narrow_options(options, "val")["splits"] == {"val": 6, "test": 12}
    assert synthchart.narrow_options(options, "train")["splits"] == options["splits"]


def test_parallel_rendering_gives_the_same_rows_as_serial(dataset):
    serial, _ = collect_split(dataset, "val", root=".", threads=1)
    parallel, _ = collect_split(dataset, "val", root=".", threads=2)
    assert [r.to_record() for r in serial] == [r.to_record() for r in parallel]


@pytest.mark.parametrize(
    "value,decimals,text",
    [(3.0, 0, "3"), (12.5, 1, "12.5"), (Decimal("0.1") + Decimal("0.2"), 1, "0.3"), (7, 1, "7.0")],
)
def test_format_number(value, decimals, text):
    assert synthchart.format_number(value, decimals) == text


# --------------------------------------------------------------------------------------------------------------
# The mini style (a miniature chart task where the mask tool matters, measured on this CPU)
# --------------------------------------------------------------------------------------------------------------

MINI_SECTION = {
    "source": "synthchart",
    "seed": 3,
    "splits": {"train": 8, "val": 4, "test": 24},
    "questions_per_chart": 3,
    "styles": {"mini": 1},
    "image_size": [168, 56],
    "question_types": {"value": 2, "count": 1, "compare": 1},
}


@pytest.fixture(scope="module")
def mini_rows():
    rows, rejects = collect_split(dataset_from(MINI_SECTION, name="mini"), "test", root=".", threads=1)
    assert rejects == []
    return rows


def _pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def _pixel_box(row, label) -> list[int]:
    return [round(v * s) for v, s in zip(row.bboxes["x_values"][label], (168, 56, 168, 56), strict=True)]


def _ink(image: np.ndarray) -> np.ndarray:
    """(H, W) True where a pixel is not white."""
    return (image < 250).any(axis=-1)


def test_mini_charts_follow_the_layout(mini_rows):
    """168 x 56, 3-6 distinct letters A-H, distinct values in tens from 10 to 100, questions of the three types."""
    assert {r.extra["question_type"] for r in mini_rows} == {"value", "count", "compare"}
    for row in mini_rows:
        check_row(row)
        assert row.answer == expected_answer(row), (row.id, row.problem)
        chart = row.extra["chart"]
        labels, values = chart["labels"], chart["values"][0]
        assert 3 <= len(labels) <= 6 and len(set(labels)) == len(labels) and set(labels) <= set("ABCDEFGH")
        assert len(set(values)) == len(values) and all(v in range(10, 101, 10) for v in values)
        assert _pixels(row.images[0]).shape == (56, 168, 3)
        assert row.chart_type == "v_bar" and list(row.bboxes["x_values"]) == labels and not row.bboxes["y_values"]


def test_mini_boxes_are_whole_merged_patches_around_their_bars_and_letters(mini_rows):
    """Each label's box is one 28-px column slot, full height, on the 28 x 28 grid; the bar (20 px wide, in the top
    row, height proportional to the value) and the letter (in the bottom row) lie inside it, and nothing is drawn
    outside the slots."""
    for row in {r.extra["chart_index"]: r for r in mini_rows}.values():
        image = _pixels(row.images[0])
        ink = _ink(image)
        chart = row.extra["chart"]
        covered = np.zeros_like(ink)
        for slot, (label, value) in enumerate(zip(chart["labels"], chart["values"][0], strict=True)):
            x1, y1, x2, y2 = _pixel_box(row, label)
            assert (x1, y1, x2, y2) == (28 * slot, 0, 28 * slot + 28, 56), (row.id, label)
            covered[:, x1:x2] = True
            bar = ink[:28, x1:x2]
            columns = np.flatnonzero(bar.any(axis=0))
            assert columns.max() - columns.min() + 1 == synthchart.MINI_BAR_WIDTH
            assert bar[:, columns[len(columns) // 2]].sum() == round(value * synthchart.MINI_PX_PER_UNIT)
            assert ink[28:, x1:x2].sum() > 20, f"{row.id}: no letter under {label}"
        assert not (ink & ~covered).any(), f"{row.id}: ink outside the label slots"


@pytest.mark.parametrize("keep_index", [0, 1, -1])
def test_the_mask_tool_leaves_only_the_asked_bar_readable(mini_rows, keep_index):
    """The real mask tool, on the row's boxes: the kept slot is untouched, every other slot is blank."""
    from chartrl.tools import focus

    for row in {r.extra["chart_index"]: r for r in mini_rows}.values():
        label = row.extra["chart"]["labels"][keep_index]
        result = focus.focus_on_x_values_with_mask(row.images[0], row.bboxes, [label])
        assert result.ok
        before, after = _pixels(row.images[0]), np.asarray(result.image)
        x1, _, x2, _ = _pixel_box(row, label)
        assert (after[:, x1:x2] == before[:, x1:x2]).all()
        outside = np.ones(after.shape[:2], dtype=bool)
        outside[:, x1:x2] = False
        assert not (_ink(after) & outside).any(), f"{row.id}: ink left outside the kept slot of {label}"


@pytest.mark.parametrize(
    "qtype,labels,answer",
    [
        ("value", ["B"], "40"),  # the kept bar's value
        ("value", ["D"], "10"),
        ("compare", ["A", "B"], "Yes"),  # 70 > 40
        ("compare", ["D", "A"], "No"),
        ("difference", ["A", "D"], "60"),
        ("sum", ["B", "D"], "50"),
        ("count", [], None),  # not a question about labels
        ("value", ["Z"], None),  # not on the chart
        ("value", ["A", "B"], None),  # a value question keeps one label
    ],
)
def test_answer_about_kept_labels(qtype, labels, answer):
    chart = {"labels": ["A", "B", "D"], "series": [""], "values": [[70.0, 40.0, 10.0]], "decimals": 0}
    assert synthchart.answer_about(chart, qtype, labels) == answer
