"""The conversation layout: the messages a sample starts with and the ones a tool turn appends.

It is the layout verl's ``tool_agent`` loop builds (``verl/experimental/agent_loop/tool_agent_loop.py``): the
user turn holds the chart and the prompt; an assistant turn that calls a tool is followed by a ``tool`` message
whose content is the edited image then one line of text (text only when the call failed); then the assistant
answers.
"""

from __future__ import annotations

import io
from typing import Any

from chartrl import prompts
from chartrl.config import PromptConfig
from chartrl.data.contract import BOX_AXES, IMAGE_PLACEHOLDER, Row


def question_of(row: Row) -> str:
    return row.problem.replace(IMAGE_PLACEHOLDER, "").strip()


def chart_image(row: Row):
    from PIL import Image

    return Image.open(io.BytesIO(row.images[0])).convert("RGB")


def axis_labels(row: Row) -> dict[str, list[str]]:
    return {axis: list(row.bboxes.get(axis, {})) for axis in BOX_AXES}


def prompt_text(row: Row, *, with_tools: bool, prompt_config: PromptConfig, tool_names) -> str:
    if not with_tools:
        return prompts.render(prompt_config.no_tool_template, question=question_of(row))
    from chartrl.tools import tool_schemas

    labels = axis_labels(row) if prompt_config.list_labels else None
    return prompts.render(
        prompt_config.tool_template, question=question_of(row), tools=tool_schemas(tool_names), labels=labels
    )


def initial_messages(row: Row, image, text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": text}]}]


def assistant_message(text: str, calls) -> dict[str, Any]:
    """The assistant turn as verl records it: the text around the call, and the parsed calls."""
    content = text.split("<tool_call>")[0].strip()
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"type": "function", "function": {"name": call.name, "arguments": call.arguments}} for call in calls
        ]
    return message


def tool_message(observation: str, image=None) -> dict[str, Any]:
    """verl's tool message: the image(s) first, then the text; text only when there is no image."""
    if image is None:
        return {"role": "tool", "content": observation}
    return {"role": "tool", "content": [{"type": "image", "image": image}, {"type": "text", "text": observation}]}
