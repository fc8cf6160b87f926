"""Our data contract converted to verl's dataset and loaded by verl's own ``RLHFDataset`` with the tiny model's
processor: the prompt verl builds is the prompt the local rollout builds, the chart gets the same image budget,
and each tool gets its ``create_kwargs``."""

from __future__ import annotations

import asyncio
import json

import pytest
from omegaconf import OmegaConf

from chartrl.verl_backend.data import write_verl_dataset
from chartrl.verl_backend.overrides import TOOL_AGENT


@pytest.fixture(scope="module")
def converted(synth_rows, default_config, tmp_path_factory):
    folder = tmp_path_factory.mktemp("verl-data")
    rows = synth_rows["val"]
    options = {"prompts": default_config.prompts, "tools": default_config.tools, "model": default_config.model}
    return {
        "rows": rows,
        "tools": write_verl_dataset(rows, folder / "tools.parquet", with_tools=True, **options),
        "plain": write_verl_dataset(rows, folder / "plain.parquet", with_tools=False, **options),
        "folder": folder,
    }


def load(path, processor, folder, tool_config=None):
    from verl.utils.dataset.rl_dataset import RLHFDataset

    data_config = {
        "prompt_key": "prompt",
        "image_key": "images",
        "max_prompt_length": 4096,
        "filter_overlong_prompts": True,
        "filter_overlong_prompts_workers": None,  # in-process: datasets forks a pool even for 1 (hangs under pytest)
        "return_raw_chat": True,
        "cache_dir": str(folder / "cache"),
        "tool_config_path": str(tool_config) if tool_config else None,
    }
    return RLHFDataset(str(path), processor.tokenizer, OmegaConf.create(data_config), processor=processor)


def test_rlhf_dataset_loads_every_row_with_tools_kwargs(converted, tiny_policy, default_config):
    from chartrl.verl_backend.tool_config import write_tool_config

    tool_yaml = write_tool_config(converted["folder"] / "tools.yaml", default_config.tools.names)
    dataset = load(converted["tools"], tiny_policy.processor, converted["folder"], tool_yaml)
    rows = converted["rows"]
    assert len(dataset) == len(rows)  # none filtered as over-long
    for index in (0, len(rows) - 1):
        item, row = dataset[index], rows[index]
        assert item["agent_name"] == TOOL_AGENT and item["data_source"] == row.data_source
        assert item["reward_model"]["ground_truth"] == row.answer
        extra = item["extra_info"]
        assert extra["id"] == row.id and extra["question"] in row.problem and json.loads(extra["bboxes"]) == row.bboxes
        assert set(item["tools_kwargs"]) == set(default_config.tools.names)
        create = item["tools_kwargs"]["focus_on_x_values_with_mask"]["create_kwargs"]
        assert json.loads(create["bboxes"]) == row.bboxes


def test_the_prompt_is_the_local_rollouts_prompt(converted, tiny_policy, default_config):
    from chartrl.rollout import conversation

    dataset = load(converted["tools"], tiny_policy.processor, converted["folder"])
    row = converted["rows"][0]
    [message] = dataset[0]["raw_prompt"]
    kinds = [part["type"] for part in message["content"]]
    assert message["role"] == "user" and kinds == ["image", "text"]  # the chart first, as the local rollout
    expected = conversation.prompt_text(
        row, with_tools=True, prompt_config=default_config.prompts, tool_names=default_config.tools.names
    )
    assert message["content"][1]["text"] == expected


def test_the_chart_gets_the_local_image_budget(converted, tiny_policy, default_config):
    from verl.utils.dataset.rl_dataset import RLHFDataset

    dataset = load(converted["plain"], tiny_policy.processor, converted["folder"])
    item = dataset[0]
    images, _ = asyncio.run(RLHFDataset.process_vision_info(item["raw_prompt"], 14, OmegaConf.create({})))
    width, height = images[0].size
    assert width * height <= default_config.model.max_pixels and width % 28 == 0 and height % 28 == 0


def test_no_tool_series_have_no_tools(converted, tiny_policy):
    dataset = load(converted["plain"], tiny_policy.processor, converted["folder"])
    item = dataset[0]
    assert item["agent_name"] == "single_turn_agent" and item["tools_kwargs"] == {}
    assert "Tools:" not in item["raw_prompt"][0]["content"][1]["text"]


def test_an_empty_split_fails_loudly(default_config, tmp_path):
    with pytest.raises(ValueError, match="split is empty"):
        write_verl_dataset(
            [],
            tmp_path / "x.parquet",
            with_tools=True,
            prompts=default_config.prompts,
            tools=default_config.tools,
            model=default_config.model,
        )
