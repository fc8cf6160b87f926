"""Every generation pass of a tool series samples at most ``rollout.max_new_tokens`` on verl, as on the local backend
(verl 0.9.1's ``ToolAgentLoop`` sends no ``max_tokens``, so its vLLM server would let the first pass take the whole
3,136-token response budget). The agent loop a tool series' overrides name is resolved as verl's ``AgentLoopWorker``
resolves it (verl's registry plus ``agent_loop_config_path``), built by ``hydra.utils.instantiate`` as verl builds
it, and driven by verl's own loop code against a stand-in server that records what each pass asks for."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json

import pytest
from composed import compose_verl
from omegaconf import OmegaConf

from chartrl.verl_backend.overrides import generation_overrides, response_length, train_overrides


class RecordingServer:
    """Stands in for verl's LLM server manager: records each pass's sampling params, returns the next completion."""

    def __init__(self, completions):
        self.completions = list(completions)
        self.asked: list[dict] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.asked.append(dict(sampling_params))
        ids = self.completions.pop(0)
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")


def agent_loop_config(composed):
    """The config verl instantiates for the series' rows: verl's own registry with the entries of
    ``rollout.agent.agent_loop_config_path`` added (``AgentLoopWorker.__init__``), at the series' agent name."""
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.utils.import_utils import resolve_config_path

    agent = composed.actor_rollout_ref.rollout.agent
    registry = dict(_agent_loop_registry)
    if agent.agent_loop_config_path:
        for entry in OmegaConf.load(resolve_config_path(agent.agent_loop_config_path)):
            registry[entry.name] = entry
    return registry[agent.default_agent_loop]


@pytest.fixture(scope="module")
def setup(gpu_config, synth_rows, tiny_model_dir, tmp_path_factory):
    from PIL import Image

    from chartrl.verl_backend.tool_config import write_tool_config

    workdir = tmp_path_factory.mktemp("agent")
    overrides = train_overrides(gpu_config, "e6", workdir)
    tool_yaml = write_tool_config(workdir / "tools.yaml", gpu_config.tools.names)
    composed = compose_verl([*overrides, f"reward.custom_reward_function.reward_kwargs.tokenizer={tiny_model_dir}"])
    row = next(r for r in synth_rows["val"] if r.chart_type == "v_bar" and r.extra.get("about"))
    image = Image.open(io.BytesIO(row.images[0])).convert("RGB").resize((616, 448))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return {"composed": composed, "tool_yaml": tool_yaml, "row": dataclasses.replace(row, images=[buffer.getvalue()])}


def build_loop(setup, policy, server):
    import hydra
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.tools.tool_registry import initialize_tools_from_config
    from verl.utils.dataset.rl_dataset import RLHFDataset

    composed = setup["composed"]
    return hydra.utils.instantiate(
        config=agent_loop_config(composed),
        trainer_config=DictConfigWrap(config=composed),
        server_manager=server,
        tokenizer=policy.tokenizer,
        processor=policy.processor,
        hf_model_type="qwen2_5_vl",
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(composed.data),
        tools=ToolListWrap(initialize_tools_from_config(str(setup["tool_yaml"]))),
    )


def run_episode(setup, policy, study, completions):
    from chartrl.rollout import conversation
    from chartrl.verl_backend.tool_config import tools_kwargs

    row, names = setup["row"], study.tools.names
    text = conversation.prompt_text(row, with_tools=True, prompt_config=study.prompts, tool_names=names)
    server = RecordingServer(completions)

    async def run():
        loop = build_loop(setup, policy, server)
        messages = conversation.initial_messages(row, conversation.chart_image(row), text)
        return await loop.run(
            sampling_params={"temperature": 1.0}, raw_prompt=messages, tools_kwargs=tools_kwargs(row.bboxes, names)
        )

    return asyncio.run(run()), server.asked


def test_each_pass_of_a_tool_episode_asks_for_at_most_max_new_tokens(setup, tiny_policy, gpu_config):
    row, tok, eos = setup["row"], tiny_policy.tokenizer, tiny_policy.ids.eos
    body = json.dumps({"name": "focus_on_x_values_with_mask", "arguments": {"x_values": row.extra["about"]}})
    call = tok.encode(f"<tool_call>\n{body}\n</tool_call>", add_special_tokens=False) + [eos]
    answer = tok.encode(f"<answer>{row.answer}</answer>", add_special_tokens=False) + [eos]
    output, asked = run_episode(setup, tiny_policy, gpu_config, [call, answer])

    per_pass, budget = gpu_config.rollout.max_new_tokens, response_length(gpu_config.series["e6"], gpu_config)
    assert (per_pass, budget) == (512, 3136)  # without the cap the first pass could take all 3,136
    assert len(asked) == 2 and [a["max_tokens"] for a in asked] == [per_pass, per_pass]
    assert sum(output.response_mask) == len(call) + len(answer)  # the episode ran both passes through verl's loop
    assert all(a["temperature"] == 1.0 for a in asked)  # the rest of the sampling params pass through


def test_a_pass_never_asks_for_more_than_the_response_budget_has_left(setup, tiny_policy):
    loop = build_loop(setup, tiny_policy, RecordingServer([]))
    budget = loop.response_length
    assert [loop.pass_budget(used) for used in (0, budget - 600, budget - 10, budget)] == [512, 512, 10, 1]


def test_generation_jobs_cap_their_passes_too(gpu_config, tmp_path):
    paths = {"model_dir": tmp_path / "m", "data_file": tmp_path / "t.parquet", "dump_dir": tmp_path / "d"}
    composed = compose_verl(generation_overrides(gpu_config, "e13", workdir=tmp_path, **paths))
    rollout = composed.actor_rollout_ref.rollout
    assert agent_loop_config(composed)._target_ == "chartrl.verl_backend.agent_loop.PassCappedToolAgentLoop"
    assert rollout.custom.max_tokens_per_turn == gpu_config.rollout.max_new_tokens
