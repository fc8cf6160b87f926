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
