"""The tool-path check (chartrl.rollout.tool_path): scripted calls of each label tool on every chart it applies to,
run through the rollout's tool turn and second pass, counted per tool; a tool that fails on a chart it applies to
fails the check, naming the chart and the tool."""

from __future__ import annotations

import dataclasses

import pytest

from chartrl.config import load_config
from chartrl.rollout import conversation
from chartrl.rollout.tool_path import (
    ToolPathError,
    check_tool_path,
    distinct_charts,
    raise_on_failures,
    scripted_calls,
)
from chartrl.tools import TOOLS, ToolResult
from chartrl.tools.calls import ToolError

from conftest import REPO

pytestmark = pytest.mark.slow  # the tiny model's second passes
MASK_X = "focus_on_x_values_with_mask"
DRAW_Y = "focus_on_y_values_with_draw"


@pytest.fixture(scope="module")
def study():
    """The rehearsal's prompt (the tool list and the chart's labels) and its six tools."""
    return load_config([REPO / "config" / "gpu.yaml", REPO / "config" / "rehearsal.yaml"], root=REPO)


@pytest.fixture(scope="module")
def splits(synth_rows):
    """Bar charts with boxes on x (vertical) and on y (horizontal), and charts without boxes (line, pie)."""
    return {"train": synth_rows["train"], "val": synth_rows["val"]}


def test_each_label_tool_runs_once_on_every_chart_it_applies_to(tiny_policy, splits, study):
    result = check_tool_path(tiny_policy, splits, prompt_config=study.prompts, tools=study.tools, batch_size=8)
    assert result["failures"] == []
    expected = {name: 0 for name in study.tools.names}
    skipped = 0
    for rows in splits.values():
        for row in distinct_charts(rows):
            labels = conversation.axis_labels(row)
            for name in study.tools.names:
                spec = TOOLS[name]
                applies = bool(labels[spec.axis]) and (spec.edit != "mask" or len(labels[spec.axis]) > 1)
                expected[name] += applies
                skipped += not applies
    assert {name: count["charts"] for name, count in result["tools"].items()} == expected
    assert all(count["executed"] == count["charts"] > 0 for count in result["tools"].values()), result["tools"]
    assert result["not_applicable"] == skipped > 0  # line and pie charts have no boxes
    assert sum(by[MASK_X]["charts"] for by in result["splits"].values()) == expected[MASK_X]
    raise_on_failures(result)  # nothing to raise


def test_the_call_is_the_one_the_prompt_asks_for_with_the_first_listed_label(splits, study):
    calls, _ = scripted_calls("train", splits["train"], study.tools.names)
    call = next(c for c in calls if c.tool == DRAW_Y)
    first = conversation.axis_labels(call.row)["y_values"][0]
    prompt = conversation.prompt_text(
        call.row, with_tools=True, prompt_config=study.prompts, tool_names=study.tools.names
    )
    assert f"The chart's y values: {first}," in prompt  # the label as the prompt lists it
    assert call.text == f'<tool_call>{{"name": "{DRAW_Y}", "arguments": {{"y_values": ["{first}"]}}}}</tool_call>'


def _refusing(image, boxes, arguments):
    return ToolResult.failed(image, ToolError("unknown_label", "refused on purpose"))


def _unchanged(image, boxes, arguments):
    return ToolResult(ok=True, image=image, applied=("x",), error=None, observation="Did nothing.")


@pytest.mark.parametrize(
    ("apply", "problem"),
    [
        (_refusing, "failed (unknown_label): Error: refused on purpose."),  # the tool refuses the chart's own label
        (_unchanged, "the call ran but the edited chart is the chart unchanged"),  # runs and edits nothing
    ],
)
def test_a_tool_failing_on_a_chart_it_applies_to_fails_the_check_naming_chart_and_tool(
    tiny_policy, splits, study, monkeypatch, apply, problem
):
    monkeypatch.setitem(TOOLS, MASK_X, dataclasses.replace(TOOLS[MASK_X], apply=apply))
    one = {"val": splits["val"]}
    result = check_tool_path(tiny_policy, one, prompt_config=study.prompts, tools=study.tools, batch_size=8)
    failed = {(f["tool"], f["chart"]) for f in result["failures"]}
    masked_charts = [c.chart for c in scripted_calls("val", splits["val"], study.tools.names)[0] if c.tool == MASK_X]
    assert failed == {(MASK_X, chart) for chart in masked_charts} and masked_charts
    assert {f["problem"] for f in result["failures"]} == {problem}
    assert result["tools"][MASK_X]["failed"] == len(masked_charts)
    assert all(c["failed"] == 0 for name, c in result["tools"].items() if name != MASK_X)
    with pytest.raises(ToolPathError) as raised:
        raise_on_failures(result)
    assert f"{MASK_X} on chart {masked_charts[0]} (val split)" in str(raised.value)


def test_the_test_charts_sharing_a_train_label_are_counted_per_axis(splits):
    from chartrl.rollout.tool_path import labels_seen_in_train

    train, test = splits["train"], splits["val"]
    counts = labels_seen_in_train({"train": train, "test": test})
    for axis, count in counts.items():
        charts = [row for row in distinct_charts(test) if conversation.axis_labels(row)[axis]]
        seen = {label for row in distinct_charts(train) for label in conversation.axis_labels(row)[axis]}
        shared = [row for row in charts if set(conversation.axis_labels(row)[axis]) & seen]
        assert count == {"charts": len(charts), "sharing_a_train_label": len(shared)}, axis
    assert labels_seen_in_train({"test": test}) == {
        axis: {"charts": c["charts"], "sharing_a_train_label": 0} for axis, c in counts.items()
    }
