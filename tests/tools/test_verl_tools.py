"""The tools as verl sees them: the YAML from `write_tool_config` loads with verl's own
``initialize_tools_from_config``, and each tool, driven the way verl's tool agent loop drives it, returns exactly
the pixels of ``apply_tool_call``."""

from __future__ import annotations

import asyncio
import io
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from chartrl.tools import TOOLS, ToolCall, apply_tool_call, tool_schemas
from chartrl.verl_backend.tool_config import tools_kwargs, write_tool_config

from tool_charts import real_bar_charts, synthetic_bar_charts

verl_registry = pytest.importorskip("verl.tools.tool_registry")


def drive(tool, create_kwargs: dict, arguments, image_data: list):
    """verl 0.9.1's ToolAgentLoop._call_tool, step for step: create, execute, release."""

    async def call():
        instance_id, _ = await tool.create(create_kwargs=create_kwargs)
        try:
            return await tool.execute(instance_id, arguments, agent_data=SimpleNamespace(image_data=image_data))
        finally:
            await tool.release(instance_id)

    return asyncio.run(call())


@pytest.fixture(scope="module")
def verl_tools(tmp_path_factory):
    path = write_tool_config(tmp_path_factory.mktemp("verl") / "tools.yaml")
    return {tool.name: tool for tool in verl_registry.initialize_tools_from_config(str(path))}


def test_the_yaml_holds_every_tool_with_our_schemas(verl_tools, tmp_path):
    assert list(verl_tools) == list(TOOLS)
    for name, tool in verl_tools.items():
        ours = tool_schemas([name])[0]
        theirs = tool.get_openai_tool_schema().model_dump(exclude_unset=True, exclude_none=True)
        assert (
            theirs["function"]["name"] == name and theirs["function"]["description"] == ours["function"]["description"]
        )
        # verl keeps only type and description of a property: the reason the tools check arguments themselves
        for key, prop in theirs["function"]["parameters"]["properties"].items():
            assert prop["type"] == ours["function"]["parameters"]["properties"][key]["type"]
    config = yaml.safe_load(
        write_tool_config(tmp_path / "two.yaml", ["zoom_in", "focus_on_y_values_with_mask"]).read_text()
    )
    assert [t["config"]["tool"] for t in config["tools"]] == ["zoom_in", "focus_on_y_values_with_mask"]
    assert config["tools"][0]["config"] == {
        "type": "native",
        "tool": "zoom_in",
        "success_reward": 0.0,
        "error_reward": 0.0,
    }


def test_every_tool_returns_the_pixels_of_apply_tool_call(verl_tools):
    charts = [real_bar_charts()[0], real_bar_charts()[-1], synthetic_bar_charts()[0]]
    for chart in charts:
        kwargs = tools_kwargs(chart.bboxes)  # bboxes travel as JSON text, as in a parquet extra_info
        for name, tool in verl_tools.items():
            axis = TOOLS[name].axis
            arguments = {"bbox_2d": [0.1, 0.3, 0.6, 0.9]} if axis is None else {axis: chart.labels[1:3]}
            response, reward, metrics = drive(tool, kwargs[name]["create_kwargs"], arguments, [chart.image])
            expected = apply_tool_call(chart.image, chart.bboxes, ToolCall(name, arguments))
            assert response.text == expected.observation and reward == 0.0
            assert metrics == {
                "tool": name,
                "ok": expected.ok,
                "error_kind": expected.error.kind if expected.error else "none",
            }
            if expected.ok:
                (image,) = response.image
                assert np.array_equal(np.asarray(image), np.asarray(expected.image)), (chart.name, name)
            else:  # the other axis' tools: no boxes there, and verl gets the error line only
                assert expected.error.kind == "no_boxes" and response.image is None


def test_a_create_time_image_wins_over_the_conversation(verl_tools):
    chart, other = real_bar_charts()[0], real_bar_charts()[1]
    png = io.BytesIO()
    chart.image.save(png, format="PNG")
    tool = verl_tools["zoom_in"]
    response, _, _ = drive(tool, {"image": png.getvalue()}, {"bbox_2d": [0, 0, 0.5, 0.5]}, [other.image])
    expected = apply_tool_call(chart.image, None, ToolCall("zoom_in", {"bbox_2d": [0, 0, 0.5, 0.5]}))
    assert np.array_equal(np.asarray(response.image[0]), np.asarray(expected.image))


@pytest.mark.parametrize(
    "arguments,kind",
    [
        # verl hands over whatever JSON the model wrote: a list instead of an object
        (["2019"], "bad_arguments"),
        # a label the chart does not have
        ({"x_values": ["Atlantis"]}, "unknown_label"),
        # a wrong type inside the list (verl's schema model dropped `items`, the tool still checks)
        ({"x_values": [1]}, "bad_arguments"),
    ],
)
def test_model_mistakes_come_back_as_text_with_the_error_reward(arguments, kind, tmp_path):
    path = write_tool_config(
        tmp_path / "t.yaml", ["focus_on_x_values_with_mask"], success_reward=0.5, error_reward=-0.5
    )
    (tool,) = verl_registry.initialize_tools_from_config(str(path))
    chart = synthetic_bar_charts()[0]
    response, reward, metrics = drive(tool, {"bboxes": chart.bboxes}, arguments, [chart.image])
    assert response.image is None and response.text.startswith("Error: ") and reward == -0.5
    assert metrics["ok"] is False and metrics["error_kind"] == kind
    response, reward, _ = drive(tool, {"bboxes": chart.bboxes}, {"x_values": chart.labels[:1]}, [chart.image])
    assert response.image and reward == 0.5


def test_wiring_faults_raise(verl_tools):
    # no bboxes for a label tool: a data-conversion bug, loud (verl logs it), not a silent failed call
    with pytest.raises(ValueError, match="create_kwargs has no 'bboxes'"):
        drive(verl_tools["focus_on_x_values_with_mask"], {}, {"x_values": ["a"]}, [])
    # no chart anywhere
    with pytest.raises(ValueError, match="no chart to edit"):
        drive(verl_tools["zoom_in"], {}, {"bbox_2d": [0, 0, 1, 1]}, [])
