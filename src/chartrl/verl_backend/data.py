"""Our parquet contract -> verl's RL dataset parquet (what ``verl.utils.dataset.rl_dataset.RLHFDataset`` reads).

One row per question::

    prompt        [{"role": "user", "content": "<image>" + the prompt text}]: the layout of the local rollout
                  (chartrl.rollout.conversation), the chart first; RLHFDataset swaps <image> for the image
    images        [{"bytes": PNG, "min_pixels": .., "max_pixels": ..}]: qwen_vl_utils reads the bounds per image,
                  so the chart gets as many image tokens as in the local backend (model.min/max_pixels)
    data_source   the row's data_source (verl groups validation metrics by it)
    reward_model  {"style": "rule", "ground_truth": answer}
    extra_info    {"id", "index", "question", "subset", "split", "chart_type", "bboxes" (JSON), "about" (JSON:
                   the labels the question names), "question_type",
                   "tools_kwargs": {tool: {"create_kwargs": {"bboxes": JSON}}} (tool series only)}
    agent_name    chartrl_tool_agent (verl's tool_agent with each pass capped: chartrl.verl_backend.agent_loop) |
                  single_turn_agent

``extra_info`` reaches our reward function (``chartrl.verl_backend.rewards``) with the fields it reads under the
names it reads them; the episode's tool statistics are not in it (they are what the policy does).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from chartrl.config import ModelConfig, PromptConfig, ToolsConfig
from chartrl.data.contract import IMAGE_PLACEHOLDER, Row
from chartrl.files import write_atomically
from chartrl.rollout.conversation import prompt_text, question_of
from chartrl.verl_backend.overrides import SINGLE_TURN_AGENT, TOOL_AGENT
from chartrl.verl_backend.tool_config import tools_kwargs


def verl_record(
    row: Row, index: int, *, with_tools: bool, prompts: PromptConfig, tools: ToolsConfig, model: ModelConfig
) -> dict[str, Any]:
    import json

    text = prompt_text(row, with_tools=with_tools, prompt_config=prompts, tool_names=tools.names)
    extra = {
        "id": row.id,
        "index": index,
        "question": question_of(row),
        "subset": str(row.extra.get("subset", "")),
        "split": row.split,
        "chart_type": row.chart_type,
        "bboxes": json.dumps(row.bboxes, ensure_ascii=False),
        "about": json.dumps([str(v) for v in row.extra.get("about") or []], ensure_ascii=False),
        "question_type": str(row.extra.get("question_type", "unknown")),
    }
    if with_tools:
        extra["tools_kwargs"] = tools_kwargs(row.bboxes, tools.names)
    return {
        "prompt": [{"role": "user", "content": IMAGE_PLACEHOLDER + text}],
        "images": [
            {"bytes": image, "min_pixels": model.min_pixels, "max_pixels": model.max_pixels} for image in row.images
        ],
        "data_source": row.data_source,
        "reward_model": {"style": "rule", "ground_truth": row.answer},
        "extra_info": extra,
        "agent_name": TOOL_AGENT if with_tools else SINGLE_TURN_AGENT,
    }


def verl_records(
    rows: Sequence[Row], *, with_tools: bool, prompts: PromptConfig, tools: ToolsConfig, model: ModelConfig
) -> list[dict[str, Any]]:
    return [
        verl_record(row, index, with_tools=with_tools, prompts=prompts, tools=tools, model=model)
        for index, row in enumerate(rows)
    ]


def write_verl_dataset(
    rows: Iterable[Row],
    path: str | Path,
    *,
    with_tools: bool,
    prompts: PromptConfig,
    tools: ToolsConfig,
    model: ModelConfig,
) -> Path:
    """Write ``rows`` as verl's dataset to ``path`` (atomically); returns the path."""
    records = verl_records(list(rows), with_tools=with_tools, prompts=prompts, tools=tools, model=model)
    if not records:
        raise ValueError(f"no rows to write to {path}; the split is empty")
    table = pa.Table.from_pylist(records)
    return write_atomically(path, lambda tmp: pq.write_table(table, tmp))
