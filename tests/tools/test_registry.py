"""The tool registry: one spec per tool, valid JSON schemas, the OpenAI function format, and errors that name
the valid choices."""

from __future__ import annotations

import dataclasses

import jsonschema
import pytest

import chartrl.tools as tools
from chartrl.tools import (
    ERROR_KINDS,
    OUTCOMES,
    PARSE_ERROR_KINDS,
    TOOL_ERROR_KINDS,
    TOOLS,
    ToolError,
    format_tool_call,
    labels_kept,
    tool_schemas,
)

EXPECTED = [
    "focus_on_x_values_with_highlight",
    "focus_on_x_values_with_mask",
    "focus_on_x_values_with_draw",
    "focus_on_y_values_with_highlight",
    "focus_on_y_values_with_mask",
    "focus_on_y_values_with_draw",
    "zoom_in",
]


def test_every_tool_is_registered_and_importable_by_name():
    assert list(TOOLS) == EXPECTED
    for name, spec in TOOLS.items():
        assert spec.name == name and callable(getattr(tools, name))
        jsonschema.Draft202012Validator.check_schema(spec.parameters)
        assert spec.description.endswith(".") and "\n" not in spec.description


def test_schemas_are_in_openai_function_format():
    schemas = tool_schemas()
    assert [s["function"]["name"] for s in schemas] == EXPECTED
    for schema in schemas:
        assert set(schema) == {"type", "function"} and schema["type"] == "function"
        assert set(schema["function"]) == {"name", "description", "parameters"}
        assert schema["function"]["parameters"]["type"] == "object"
    assert tool_schemas(["zoom_in"])[0]["function"]["parameters"]["required"] == ["bbox_2d"]
    # a copy: editing it cannot change the registry
    tool_schemas(["zoom_in"])[0]["function"]["parameters"]["required"].append("x")
    assert TOOLS["zoom_in"].parameters["required"] == ["bbox_2d"]


def test_unknown_names_raise_listing_the_sorted_valid_names():
    with pytest.raises(KeyError) as error:
        tool_schemas(["zoom_in", "mask"])
    assert error.value.args[0] == f"unknown tool 'mask'; known tools: {', '.join(sorted(EXPECTED))}"


def test_error_kinds_and_outcomes():
    assert set(PARSE_ERROR_KINDS).isdisjoint(TOOL_ERROR_KINDS) and ERROR_KINDS == PARSE_ERROR_KINDS + TOOL_ERROR_KINDS
    assert OUTCOMES == ("none", "executed", "malformed", "failed")
    with pytest.raises(ValueError, match="unknown tool error kind 'oops'; known: bad_arguments, bad_box"):
        ToolError("oops", "x")
    assert ToolError("bad_box", "bbox_2d is wrong.").observation == "Error: bbox_2d is wrong."


def test_every_tool_declares_the_kind_of_its_argument():
    assert {name: spec.argument for name, spec in TOOLS.items()} == {
        **{name: "x_labels" for name in EXPECTED[:3]},
        **{name: "y_labels" for name in EXPECTED[3:6]},
        "zoom_in": "bbox",
    }
    for spec in TOOLS.values():
        # a label tool's one argument is named after the bboxes axis its labels are on
        assert list(spec.parameters["properties"]) == [spec.axis or "bbox_2d"]
    with pytest.raises(ValueError, match="argument kind 'columns'"):
        dataclasses.replace(TOOLS["zoom_in"], argument="columns")


def test_the_labels_a_call_kept_are_read_by_the_tools_argument_kind_not_its_name(monkeypatch):
    """A new label tool, whatever its name, is counted by the label metric through its declared kind."""
    monkeypatch.setitem(
        TOOLS, "keep_columns", dataclasses.replace(TOOLS["focus_on_x_values_with_mask"], name="keep_columns")
    )
    calls = [
        format_tool_call("zoom_in", {"bbox_2d": [0, 0, 1, 1]}),  # no labels: skipped
        format_tool_call("keep_columns", {"x_values": ["2019", "2020"]}),
        format_tool_call("focus_on_y_values_with_draw", {"y_values": ["b"]}),  # not the first
    ]
    assert labels_kept(calls) == ["2019", "2020"]
    assert labels_kept(calls[:1]) == [] and labels_kept([]) == []
