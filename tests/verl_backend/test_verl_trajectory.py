"""Reading verl's decoded responses back into turns and tool outcomes, as the reward adapter and the generation
converter do: first on hand-written responses in both chat layouts, then on responses produced by verl's own
``ToolAgentLoop`` (our tools through verl's registry, a scripted stand-in for the inference server), decoded the
way verl's reward manager decodes them, and scored through verl's ``get_custom_reward_fn``."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json

import pytest
from composed import compose_verl

from chartrl.verl_backend.trajectory import observation_text, read_trajectory, response_tokens, split_response

TOOLS = ["focus_on_x_values_with_mask", "focus_on_x_values_with_highlight", "zoom_in"]
BOXES = {"x_values": {"2019": [0.1, 0.1, 0.2, 0.9], "2020": [0.3, 0.1, 0.4, 0.9]}, "y_values": {}}
CALL = '<tool_call>\n{"name": "focus_on_x_values_with_mask", "arguments": {"x_values": ["2019"]}}\n</tool_call>'
BAD_LABEL = CALL.replace("2019", "1999")
BAD_JSON = '<tool_call>\n{"name": "focus_on_x_values_with_mask", "arguments": }\n</tool_call>'
QWEN25 = "\nuser\n<tool_response>\n{obs}\n</tool_response>\nassistant\n"  # Qwen2.5 (and the tiny model)
QWEN25_VL = "\ntool\n{obs}\nassistant\n"  # Qwen2.5-VL's stock template: a tool turn

CASES = [
    # response (as verl decodes it), tools offered, outcome, calling turns, final turn
    ("<answer>42</answer>", TOOLS, "none", 0, "<answer>42</answer>"),
    (
        CALL + QWEN25.format(obs="Masked all x values except 2019.") + "<answer>42</answer>",
        TOOLS,
        "executed",
        1,
        "<answer>42</answer>",
    ),
    (
        CALL + QWEN25_VL.format(obs="Masked all x values except 2019.") + "<answer>42</answer>",
        TOOLS,
        "executed",
        1,
        "<answer>42</answer>",
    ),
    # a label the chart lacks: the tool refuses it (checked against the boxes)
    (
        BAD_LABEL + QWEN25.format(obs="Error: unknown x value '1999'.") + "<answer>7</answer>",
        TOOLS,
        "failed",
        1,
        "<answer>7</answer>",
    ),
    # verl's hermes parser drops undecodable JSON and ends the episode: ours names it malformed
    (BAD_JSON, TOOLS, "malformed", 1, BAD_JSON),
    # a tool that was not offered
    (
        CALL.replace("focus_on_x_values_with_mask", "erase_chart")
        + QWEN25.format(obs="Unknown function")
        + "<answer>1</answer>",
        TOOLS,
        "malformed",
        1,
        "<answer>1</answer>",
    ),
    # a call in the answer turn: no turn left to show it (the local rollout's rule)
    (CALL + QWEN25.format(obs="Masked all x values except 2019.") + CALL, TOOLS, "failed", 2, CALL),
    # a well-formed call and no tool turn after it (the response budget ran out)
    ("thinking " + CALL, TOOLS, "failed", 1, "thinking " + CALL),
    # a no-tool series: one turn, whatever it holds
    (CALL + "<answer>3</answer>", [], "none", 0, CALL + "<answer>3</answer>"),
]


@pytest.mark.parametrize("text, tools, outcome, calls, final", CASES)
def test_decoded_responses(text, tools, outcome, calls, final):
    trajectory = read_trajectory(text, tools=tools, bboxes=BOXES)
    assert (trajectory.tool_outcome, trajectory.tool_calls, trajectory.final_response) == (outcome, calls, final)


def test_error_kinds_and_observations():
    text = BAD_LABEL + QWEN25_VL.format(obs="Error: unknown x value '1999'.") + "<answer>7</answer>"
    [turn, _] = read_trajectory(text, tools=TOOLS, bboxes=BOXES).turns
    assert turn.error_kind == "unknown_label" and turn.observation == "Error: unknown x value '1999'."
    without_boxes = read_trajectory(text, tools=TOOLS).turns[0]  # only the observation tells
    assert (without_boxes.outcome, without_boxes.error_kind) == ("failed", "tool_error")
    assert observation_text("\nuser\n<tool_response>\nMasked.\n</tool_response>") == "Masked."
    assert split_response("no call at all\nassistant\n") == (["no call at all\nassistant\n"], [])


def test_the_adapter_reads_the_response_when_extra_info_lacks_the_episode():
    from chartrl.verl_backend import rewards as verl_rewards

    text = CALL + QWEN25.format(obs="Masked all x values except 2019.") + "<answer>42</answer>"
    extra = {"bboxes": json.dumps(BOXES), "question": "Value in 2019?"}
    params = {"d_format": 0.1, "d_length": 0.0, "d_tool": 0.1}
    scored = verl_rewards.v2_shaped("synthchart", text, "42", extra, params=params, tools=TOOLS)
    assert scored["tool"] == pytest.approx(0.1) and scored["format"] == pytest.approx(0.1)  # executed, well-formed
    assert scored["score"] == pytest.approx(1.2)
    with pytest.raises(ValueError, match="reward_kwargs.tokenizer"):  # a length term needs the tokens counted
        verl_rewards.v2_shaped("synthchart", text, "42", extra, params={**params, "d_length": 0.1}, tools=TOOLS)


# --- verl's own tool agent loop -----------------------------------------------------------------------------


class ScriptedServer:
    """Stands in for verl's LLM server manager: returns the next scripted completion."""

    def __init__(self, completions):
        self.completions = list(completions)

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        ids = self.completions.pop(0)
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")


@pytest.fixture(scope="module")
def agent_setup(gpu_config, synth_rows, tiny_model_dir, tmp_path_factory):
    from PIL import Image

    from chartrl.verl_backend.overrides import train_overrides
    from chartrl.verl_backend.tool_config import write_tool_config

    workdir = tmp_path_factory.mktemp("agent")
    overrides = train_overrides(gpu_config, "e6", workdir)  # v2_shaped, tools, the length term on
    tool_yaml = write_tool_config(workdir / "results/runs/e6/verl/tools.yaml", gpu_config.tools.names)
    config = compose_verl([*overrides, f"reward.custom_reward_function.reward_kwargs.tokenizer={tiny_model_dir}"])
    row = next(r for r in synth_rows["val"] if r.chart_type == "v_bar" and r.extra.get("about"))
    image = Image.open(io.BytesIO(row.images[0])).convert("RGB").resize((616, 448))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    row = dataclasses.replace(row, images=[buffer.getvalue()])
    return {"config": config, "tool_yaml": tool_yaml, "row": row, "study": gpu_config}


def run_verl_episode(setup, policy, completions):
    """One episode through verl's ToolAgentLoop; returns its output and the response as verl's reward manager
    decodes it (``NaiveRewardManager.run_single``: skip_special_tokens=True)."""
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
    from verl.tools.tool_registry import initialize_tools_from_config
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from chartrl.rollout import conversation
    from chartrl.verl_backend.tool_config import tools_kwargs

    config, row, study = setup["config"], setup["row"], setup["study"]
    names = study.tools.names
    text = conversation.prompt_text(row, with_tools=True, prompt_config=study.prompts, tool_names=names)

    async def run():
        loop = ToolAgentLoop(
            trainer_config=DictConfigWrap(config),
            server_manager=ScriptedServer(completions),
            tokenizer=policy.tokenizer,
            processor=policy.processor,
            dataset_cls=RLHFDataset,
            data_config=DictConfigWrap(config.data),
            hf_model_type="qwen2_5_vl",
            tools=ToolListWrap(initialize_tools_from_config(str(setup["tool_yaml"]))),
        )
        messages = conversation.initial_messages(row, conversation.chart_image(row), text)
        return await loop.run(
            sampling_params={"temperature": 1.0},
            raw_prompt=messages,
            tools_kwargs=tools_kwargs(row.bboxes, names),
        )

    output = asyncio.run(run())
    return output, policy.tokenizer.decode(output.response_ids, skip_special_tokens=True)


@pytest.mark.parametrize(
    "call, outcome, tool_term",
    [
        ("right_labels", "executed", 0.1),
        ("unknown_label", "failed", -0.1),
        ("bad_json", "malformed", -0.1),  # verl's hermes parser drops it and ends the episode
        (None, "none", 0.0),
    ],
)
def test_verl_tool_agent_episodes_score_as_local_ones(agent_setup, tiny_policy, call, outcome, tool_term):
    from verl.trainer.ppo.reward import get_custom_reward_fn

    row, tok, eos = agent_setup["row"], tiny_policy.tokenizer, tiny_policy.ids.eos
    labels = {"right_labels": row.extra["about"], "unknown_label": ["NoSuchLabel"]}
    answer = tok.encode(f"<answer>{row.answer}</answer>", add_special_tokens=False) + [eos]
    if call is None:
        completions = [answer]
    elif call == "bad_json":
        completions = [tok.encode(BAD_JSON, add_special_tokens=False) + [eos]]
    else:
        body = json.dumps({"name": "focus_on_x_values_with_mask", "arguments": {"x_values": labels[call]}})
        completions = [tok.encode(f"<tool_call>\n{body}\n</tool_call>", add_special_tokens=False) + [eos], answer]
    output, decoded = run_verl_episode(agent_setup, tiny_policy, completions)

    fn = get_custom_reward_fn(agent_setup["config"])
    extra = {"bboxes": json.dumps(row.bboxes), "question": row.problem, "num_turns": output.num_turns}
    scored = fn(data_source=row.data_source, solution_str=decoded, ground_truth=row.answer, extra_info=extra)
    assert scored["tool"] == pytest.approx(tool_term)
    trajectory = read_trajectory(decoded, tools=agent_setup["study"].tools.names, bboxes=row.bboxes)
    assert trajectory.tool_outcome == outcome
    sampled = sum(output.response_mask)  # what the model sampled, as verl masks it
    assert abs(response_tokens(trajectory, tok) - sampled) <= 2, (decoded, sampled)
    if call != "bad_json":
        assert trajectory.final_response.strip() == f"<answer>{row.answer}</answer>" and scored["accuracy"] == 1.0
