"""The verl tool config YAML (``actor_rollout_ref.rollout.multi_turn.tool_config_path``), rendered from the same
``tool_schemas`` as the prompt's tool list. Kept apart from ``chartrl.verl_backend.tools`` so writing it does not
import verl.

Format (verl/tools/tool_registry.py, ``initialize_tools_from_config``)::

    tools:
      - class_name: chartrl.verl_backend.tools.ChartTool
        config: {type: native, tool: focus_on_x_values_with_mask, success_reward: 0.0, error_reward: 0.0}
        tool_schema: {type: function, function: {name: ..., description: ..., parameters: {...}}}
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from chartrl.files import write_atomically
from chartrl.tools.boxes import BoxesInput, read_bboxes
from chartrl.tools.registry import select_tools, tool_schemas

VERL_TOOL_CLASS = "chartrl.verl_backend.tools.ChartTool"
DEFAULT_STEP_REWARD = 0.0
"""verl's per-call step reward, for a call that ran and for one that failed. 0 by default: the tool terms of
the rewards are computed from the whole trajectory (chartrl.rewards), not per step."""


def tool_config(
    tool_names: Iterable[str] | None = None,
    success_reward: float = DEFAULT_STEP_REWARD,
    error_reward: float = DEFAULT_STEP_REWARD,
) -> dict[str, Any]:
    names = select_tools(tool_names)
    return {
        "tools": [
            {
                "class_name": VERL_TOOL_CLASS,
                "config": {
                    "type": "native",
                    "tool": name,
                    "success_reward": float(success_reward),
                    "error_reward": float(error_reward),
                },
                "tool_schema": schema,
            }
            for name, schema in zip(names, tool_schemas(names), strict=True)
        ]
    }


def write_tool_config(
    path: str | Path,
    tool_names: Iterable[str] | None = None,
    success_reward: float = DEFAULT_STEP_REWARD,
    error_reward: float = DEFAULT_STEP_REWARD,
) -> Path:
    """Write the verl tool YAML for ``tool_names`` (all tools when None) to ``path``, atomically."""
    text = yaml.safe_dump(tool_config(tool_names, success_reward, error_reward), sort_keys=False, allow_unicode=True)
    return write_atomically(path, lambda tmp: tmp.write_text(text))


def tools_kwargs(bboxes: BoxesInput, tool_names: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """A sample's ``extra_info.tools_kwargs`` for verl: each tool's ``create_kwargs`` carry the sample's bboxes as
    JSON text (a parquet cell cannot hold a dict keyed by chart labels); the chart itself reaches the tool as
    ``agent_data.image_data[0]``."""
    text = json.dumps(read_bboxes(bboxes), ensure_ascii=False)
    return {name: {"create_kwargs": {"bboxes": text}} for name in select_tools(tool_names)}
