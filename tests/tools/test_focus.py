"""The six ReFocus tools on synthetic bar charts (exact boxes) and on the 30 real ChartQA bar charts (ReFocus
boxes): pixels change only where each tool promises, and refused calls leave the chart as it was."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from chartrl.tools import TOOLS, ToolCall, apply_tool_call
from chartrl.tools.focus import (
    focus_on_x_values_with_draw,
    focus_on_x_values_with_highlight,
    focus_on_x_values_with_mask,
    focus_on_y_values_with_mask,
)
from chartrl.tools.pixels import INSET, outline_width

from tool_charts import Chart, band_pixels, changed, real_bar_charts, region, synthetic_bar_charts

EDITS = ("highlight", "mask", "draw")


def all_charts() -> list[Chart]:
    return [*synthetic_bar_charts(), *real_bar_charts()]


def selection(labels: list[str]) -> list[str]:
    """Every other label, so mask always keeps some and masks some (when the chart has two or more)."""
    return labels[::2]


def test_the_fixtures_cover_both_axes_and_all_30_real_bar_charts():
    assert len(real_bar_charts()) == 30
    axes = {chart.axis for chart in all_charts()}
    assert axes == {"x_values", "y_values"}
    assert all(len(chart.labels) >= 2 for chart in all_charts())


def run(chart: Chart, edit: str, labels: list[str]):
    call = ToolCall(f"focus_on_{chart.axis}_with_{edit}", {chart.axis: labels})
    return apply_tool_call(chart.image, chart.bboxes, call)


@pytest.mark.parametrize("edit", EDITS)
def test_pixels_change_only_where_the_tool_promises(edit):
    for chart in all_charts():
        chosen = selection(chart.labels)
        result = run(chart, edit, chosen)
        assert result.ok and result.error is None, (chart.name, result.observation)
        assert result.applied == tuple(chosen)
        assert result.image.size == chart.image.size and result.image.mode == "RGB"
        diff = changed(chart.image, result.image)
        size = chart.image.size
        bands = {label: band_pixels(box, size) for label, box in chart.bboxes[chart.axis].items()}
        selected = region(size, [bands[label] for label in chosen])
        others = region(size, [band for label, band in bands.items() if label not in chosen])
        before, after = np.asarray(chart.image).astype(int), np.asarray(result.image).astype(int)
        if edit == "mask":
            # only non-selected bands change, never a pixel of a selected band, and what changes turns white
            assert not (diff & ~others).any(), chart.name
            assert not (diff & selected).any(), chart.name
            assert (after[diff] == 255).all(), chart.name
            for label, (left, top, right, bottom) in bands.items():
                if label in chosen:
                    continue
                inner = region(size, [(left + INSET, top + INSET, right - INSET, bottom - INSET)]) & ~selected
                assert (after[inner] == 255).all(), (chart.name, label)  # the band's inside is white
        else:
            assert not (diff & ~selected).any(), chart.name  # nothing outside the selected bands
            for label in chosen:
                left, top, right, bottom = bands[label]
                band = region(size, [bands[label]])
                assert (diff & band).any(), (chart.name, label)
                rim = band & ~region(size, [(left + INSET, top + INSET, right - INSET, bottom - INSET)])
                assert not (diff & rim).any(), (chart.name, label)  # drawn 2 px inside the band, as ReFocus
                if edit == "draw":
                    depth = INSET + outline_width(size) + 1
                    core = region(size, [(left + depth, top + depth, right - depth, bottom - depth)])
                    assert (diff & band & ~core).any(), (chart.name, label)  # the outline is drawn
                    assert not (diff & core).any(), (chart.name, label)  # and the band is not filled
                    assert (after[diff] == (255, 0, 0)).all(), chart.name
            if edit == "highlight":
                # a red tint: red never decreases, green and blue never increase
                assert (after[diff][:, 0] >= before[diff][:, 0]).all(), chart.name
                assert (after[diff][:, 1:] <= before[diff][:, 1:]).all(), chart.name


@pytest.mark.parametrize("edit", EDITS)
def test_labels_match_ignoring_case_and_whitespace(edit):
    for chart in [*synthetic_bar_charts()[:2], *real_bar_charts()[:6]]:
        chosen = selection(chart.labels)
        loose = [f"  {label.upper()}\t" for label in chosen]
        exact, fuzzy = run(chart, edit, chosen), run(chart, edit, loose)
        assert fuzzy.ok and fuzzy.applied == exact.applied
        assert np.array_equal(np.asarray(exact.image), np.asarray(fuzzy.image))


def test_tools_are_deterministic_and_never_modify_their_input():
    chart = real_bar_charts()[0]
    before = np.asarray(chart.image).copy()
    for name in TOOLS:
        axis = TOOLS[name].axis
        if axis is None:
            call = ToolCall(name, {"bbox_2d": [0.2, 0.2, 0.6, 0.5]})
        else:  # on the chart's own axis it edits, on the other it refuses (no boxes)
            call = ToolCall(name, {axis: selection(chart.labels)})
        first, second = (
            apply_tool_call(chart.image, chart.bboxes, call),
            apply_tool_call(chart.image, chart.bboxes, call),
        )
        assert np.array_equal(np.asarray(first.image), np.asarray(second.image)), name
        assert first.observation == second.observation
    assert np.array_equal(np.asarray(chart.image), before)


BOXES = {"x_values": {"2019": [0.0, 0.0, 0.5, 1.0], "2020": [0.5, 0.0, 1.0, 1.0]}, "y_values": {}}


@pytest.mark.parametrize(
    "function,labels,kind,observation",
    [
        # a label the chart does not have: the error lists the valid ones
        (
            focus_on_x_values_with_mask,
            ["Foo"],
            "unknown_label",
            "Error: unknown x value 'Foo'; valid x values: 2019, 2020.",
        ),
        # several unknown labels are all named
        (focus_on_x_values_with_draw, ["2019", "a", "b"], "unknown_label", "Error: unknown x values 'a', 'b';"),
        # masking nothing: keeping every label
        (focus_on_x_values_with_mask, ["2019", "2020"], "selects_everything", "Error: keeping every x value"),
        # masking everything: keeping no label
        (focus_on_x_values_with_mask, [], "empty_selection", "Error: x_values is empty"),
        # highlighting nothing
        (focus_on_x_values_with_highlight, [], "empty_selection", "Error: x_values is empty"),
        # one label as a string, called directly (apply_tool_call's schema check catches this first)
        (focus_on_x_values_with_highlight, "2019", "bad_arguments", "Error: x_values must be a list of x values"),
        # a y tool on a chart with x boxes only: the error says which tools fit
        (
            focus_on_y_values_with_mask,
            ["2019"],
            "no_boxes",
            "Error: this chart has no y values to focus on; it has x values, use an x value tool.",
        ),
    ],
)
def test_refused_calls_leave_the_chart_unchanged(function, labels, kind, observation):
    chart = Image.new("RGB", (80, 40), (10, 20, 30))
    result = function(chart, BOXES, labels)
    assert not result.ok and result.error.kind == kind and result.applied == ()
    assert result.observation.startswith(observation)
    assert "\n" not in result.observation
    assert np.array_equal(np.asarray(result.image), np.asarray(chart))


def test_highlighting_every_label_is_allowed_and_a_repeated_label_counts_once():
    chart = Image.new("RGB", (80, 40), "white")
    result = focus_on_x_values_with_highlight(chart, BOXES, ["2020", "2019", "2020 "])
    assert result.ok and result.applied == ("2020", "2019")
    assert result.observation == "Highlighted x values 2020, 2019."


@pytest.mark.parametrize(
    "edit,labels,observation",
    [
        ("highlight", ["2019"], "Highlighted x value 2019."),  # one label: singular
        ("mask", ["2019"], "Masked all x values except 2019."),
        ("draw", ["2019"], "Drew a box around x value 2019."),
        ("draw", ["2019", "2020"], "Drew boxes around x values 2019, 2020."),  # several: plural
    ],
)
def test_observations(edit, labels, observation):
    chart = Image.new("RGB", (80, 40), "white")
    result = apply_tool_call(chart, BOXES, ToolCall(f"focus_on_x_values_with_{edit}", {"x_values": labels}))
    assert result.observation == observation


def test_transparent_and_encoded_charts_are_edited_on_white():
    rgba = Image.new("RGBA", (80, 40), (0, 0, 0, 0))
    result = focus_on_x_values_with_mask(rgba, BOXES, ["2019"])
    assert result.ok and result.image.mode == "RGB"
    assert np.asarray(result.image).min() == 255  # transparent -> white, as the data stage stores charts


def test_tiny_bands_still_get_at_least_one_pixel():
    chart = Image.new("RGB", (30, 10), (0, 0, 0))
    boxes = {"x_values": {"a": [0.0, 0.0, 0.1, 1.0], "b": [0.1, 0.0, 0.2, 1.0], "c": [0.2, 0.0, 1.0, 1.0]}}
    for edit in EDITS:
        result = apply_tool_call(chart, boxes, ToolCall(f"focus_on_x_values_with_{edit}", {"x_values": ["a"]}))
        assert result.ok, edit
        band = region((30, 10), [band_pixels(boxes["x_values"]["a"], (30, 10))])
        diff = changed(chart, result.image)
        assert (diff & band).any() if edit != "mask" else (diff & ~band).any()
