"""The tools as verl ``BaseTool``s, for verl's ``tool_agent`` loop (the GPU backend).

verl 0.9.1 drives a tool like this (verl/experimental/agent_loop/tool_agent_loop.py, ``_call_tool``)::

    instance_id, _ = await tool.create(create_kwargs=tools_kwargs[name].get("create_kwargs", {}))
    response, step_reward, metrics = await tool.execute(instance_id, parsed_json_args, agent_data=agent_data)
    await tool.release(instance_id)

where ``tools_kwargs`` comes from the sample's ``extra_info`` and ``agent_data.image_data`` holds the
conversation's images, the chart first. So each sample's ``create_kwargs`` carry its ``bboxes`` (the contract's
dict, or its JSON text as stored in the parquet) and, optionally, the ``image``; without one the tool edits
``agent_data.image_data[0]``, the chart as verl's processor loaded it (boxes are normalised, so a resized chart is
edited in the same places).

On success the tool answers with the edited image and its one-line observation. On a model's mistake it answers
with the error line only, no image: the model sees what went wrong, verl appends no image (an unchanged copy of
the chart would cost a full image of context and say nothing), and the trajectory is scored as a failed call.
Infrastructure faults (no bboxes in create_kwargs for a label tool, no chart to edit) raise; verl logs them as
``Error executing tool`` and carries on, so they show in the logs, not as silent zeros.
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from PIL import Image
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from chartrl.tools.boxes import ChartBoxes, read_bboxes
from chartrl.tools.calls import ToolCall
from chartrl.tools.execute import apply_tool_call
from chartrl.tools.pixels import as_rgb
from chartrl.tools.registry import tool_spec
from chartrl.verl_backend.tool_config import DEFAULT_STEP_REWARD, VERL_TOOL_CLASS, tools_kwargs, write_tool_config

__all__ = ["VERL_TOOL_CLASS", "ChartTool", "tools_kwargs", "write_tool_config"]


class ChartTool(BaseTool):
    """One chartrl tool, named by ``config["tool"]``; ``config`` may set ``success_reward`` and ``error_reward``
    (verl's step reward for a call that ran / failed, default 0.0)."""

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None = None):
        if "tool" not in config:
            raise ValueError(f"{VERL_TOOL_CLASS} needs config.tool, the name of a chartrl tool")
        self.spec = tool_spec(config["tool"])
        if tool_schema is None:
            tool_schema = OpenAIFunctionToolSchema.model_validate(self.spec.schema())
        if tool_schema.function.name != self.spec.name:
            raise ValueError(
                f"tool_schema names {tool_schema.function.name!r} but config.tool is {self.spec.name!r}; "
                "regenerate the YAML with `chartrl tools config`"
            )
        super().__init__(config, tool_schema)
        self.success_reward = float(config.get("success_reward", DEFAULT_STEP_REWARD))
        self.error_reward = float(config.get("error_reward", DEFAULT_STEP_REWARD))
        self._instances: dict[str, dict[str, Any]] = {}

    async def create(self, instance_id: str | None = None, **kwargs) -> tuple[str, ToolResponse]:
        """``create_kwargs={"bboxes": dict | JSON str, "image": PIL image | PNG bytes (optional)}``, as verl passes
        them (the same keys given directly as keyword arguments work too)."""
        options = kwargs.get("create_kwargs", kwargs) or {}
        if "bboxes" not in options and self.spec.axis is not None:
            raise ValueError(
                f"{self.name}: create_kwargs has no 'bboxes'; put the sample's bboxes in "
                f"extra_info.tools_kwargs.{self.name}.create_kwargs"
            )
        instance_id = instance_id or str(uuid4())
        self._instances[instance_id] = {
            "bboxes": read_bboxes(options.get("bboxes")),
            "image": _chart_image(options.get("image")),
        }
        return instance_id, ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs) -> tuple[ToolResponse, float, dict]:
        instance = self._instances[instance_id]
        image = instance["image"] if instance["image"] is not None else _first_image(kwargs.get("agent_data"))
        bboxes: ChartBoxes = instance["bboxes"]
        result = apply_tool_call(image, bboxes, ToolCall(name=self.name, arguments=parameters))
        metrics = {"tool": self.name, "ok": result.ok, "error_kind": result.error.kind if result.error else "none"}
        if result.ok:
            return ToolResponse(image=[result.image], text=result.observation), self.success_reward, metrics
        return ToolResponse(text=result.observation), self.error_reward, metrics

    async def release(self, instance_id: str, **kwargs) -> None:
        self._instances.pop(instance_id, None)


def _chart_image(value: Any) -> Image.Image | None:
    if value is None:
        return None
    if isinstance(value, dict) and value.get("bytes"):  # a Hugging Face image struct
        value = value["bytes"]
    return as_rgb(value)


def _first_image(agent_data: Any) -> Image.Image:
    images = getattr(agent_data, "image_data", None)
    if not images:
        raise ValueError("no chart to edit: create_kwargs has no image and agent_data.image_data is empty")
    return as_rgb(images[0])
