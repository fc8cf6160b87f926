"""One conversation rendered both ways: by chartrl's local two-pass rollout and by verl's own ``tool_agent`` loop
(``ToolAgentLoop``), with our tools loaded through verl's tool registry and a scripted stand-in for the inference
server returning the same completions. The token streams must be identical; so must the loss masks, except the
``<|im_end|>`` that closes the tool-call turn, which verl's model samples (the hermes parser sets no stop token)
and our rollout appends as a boundary token after stopping on ``</tool_call>``."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
from pathlib import Path

import pytest

from chartrl.rollout.episodes import apply_pass, start_episodes
from chartrl.rollout.sampling import Sampled

VERL_CONFIG_DIR = Path(__import__("verl").__file__).parent / "trainer" / "config"


class ScriptedServer:
    """Stands in for verl's LLM server manager: returns the next scripted completion."""

    def __init__(self, completions: list[list[int]]):
        self.completions = list(completions)
        self.prompts: list[list[int]] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.prompts.append(list(prompt_ids))
        ids = self.completions.pop(0)
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")


def _verl_config(tool_config: Path):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(VERL_CONFIG_DIR), version_base=None):
        return compose(
            config_name="ppo_trainer",
            overrides=[
                "actor_rollout_ref.rollout.multi_turn.enable=True",
                "actor_rollout_ref.rollout.multi_turn.format=hermes",
                "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=2",
                "actor_rollout_ref.rollout.multi_turn.max_parallel_calls=1",
                f"actor_rollout_ref.rollout.multi_turn.tool_config_path={tool_config}",
                "actor_rollout_ref.rollout.prompt_length=2048",
                "actor_rollout_ref.rollout.response_length=1024",
            ],
        )


def _chart_row(synth_rows):
    """A bar chart resized to multiples of 28 px, so verl's own image fetch (qwen_vl_utils) keeps it as it is."""
    from PIL import Image

    row = next(r for r in synth_rows["val"] if r.chart_type == "v_bar" and r.extra.get("about"))
    image = Image.open(io.BytesIO(row.images[0])).convert("RGB").resize((616, 448))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return dataclasses.replace(row, images=[buffer.getvalue()])  # boxes are normalised: still valid


def test_local_rollout_and_verl_tool_agent_build_the_same_tokens(tiny_policy, synth_rows, default_config, tmp_path):
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
    from verl.tools.tool_registry import initialize_tools_from_config
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from chartrl.rollout import conversation
    from chartrl.verl_backend.tool_config import tools_kwargs, write_tool_config

    row = _chart_row(synth_rows)
    tools = default_config.tools
    tok = tiny_policy.tokenizer
    call = (
        "<tool_call>\n"
        + json.dumps({"name": "focus_on_x_values_with_mask", "arguments": {"x_values": row.extra["about"]}})
        + "\n</tool_call>"
    )
    call_ids = tok.encode(call, add_special_tokens=False)
    answer_ids = tok.encode(f"<answer>{row.answer}</answer>", add_special_tokens=False) + [tiny_policy.ids.eos]

    # --- our rollout: pass 1 stops on </tool_call>, the tool runs, pass 2 answers
    (episode,) = start_episodes(
        tiny_policy, [row], with_tools=True, n=1, prompt_config=default_config.prompts, tools=tools
    )
    apply_pass(
        tiny_policy, episode, Sampled(call_ids, [-0.5] * len(call_ids), "tool_call"), last_pass=False, tools=tools
    )
    apply_pass(tiny_policy, episode, Sampled(answer_ids, [-0.5] * len(answer_ids), "eos"), last_pass=True, tools=tools)
    assert episode.tool_outcome == "executed"

    # --- verl's tool_agent loop on the same prompt, the same completions, our tools through verl's registry
    tool_yaml = write_tool_config(tmp_path / "tools.yaml", tools.names)
    config = _verl_config(tool_yaml)
    server = ScriptedServer([call_ids + [tiny_policy.ids.eos], answer_ids])
    image = conversation.chart_image(row)
    text = conversation.prompt_text(row, with_tools=True, prompt_config=default_config.prompts, tool_names=tools.names)
    kwargs_per_tool = tools_kwargs(row.bboxes, tools.names)

    async def run_verl():
        loop = ToolAgentLoop(  # built inside the running event loop, as verl's agent-loop workers do
            trainer_config=DictConfigWrap(config),
            server_manager=server,
            tokenizer=tok,
            processor=tiny_policy.processor,
            dataset_cls=RLHFDataset,
            data_config=DictConfigWrap(config.data),
            hf_model_type="qwen2_5_vl",
            tools=ToolListWrap(initialize_tools_from_config(str(tool_yaml))),
        )
        return await loop.run(
            sampling_params={"temperature": 1.0},
            raw_prompt=conversation.initial_messages(row, image, text),
            tools_kwargs=kwargs_per_tool,
        )

    output = asyncio.run(run_verl())

    assert output.prompt_ids == episode.prompt_ids
    assert output.prompt_ids + output.response_ids == episode.runtime_ids
    boundary = len(call_ids)  # the <|im_end|> closing the tool-call turn
    assert episode.response_ids[boundary] == tiny_policy.ids.eos
    assert output.response_mask[boundary] == 1 and episode.response_mask[boundary] == 0
    ours = episode.response_mask[:boundary] + episode.response_mask[boundary + 1 :]
    theirs = output.response_mask[:boundary] + output.response_mask[boundary + 1 :]
    assert ours == theirs
    # both fed the model the same pass-2 prompt, holding the edited chart's image tokens
    assert server.prompts[1] == episode.runtime_ids[: len(server.prompts[1])]
    assert len(output.multi_modal_data["images"]) == len(episode.images) == 2


@pytest.fixture(autouse=True)
def _quiet_verl_tool_schema_print(capsys):
    """verl's BaseTool prints each tool schema on construction."""
    yield
    capsys.readouterr()
