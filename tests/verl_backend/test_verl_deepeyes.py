"""The DeepEyes overlay (config/deepeyes.yaml) as verl overrides: each series composed against the installed verl's
own ``ppo_trainer`` config, converted to verl's dataclasses and checked with verl's ``validate_config``; the
recipe's values where it states them; the zoom tool's YAML loaded by verl's own tool registry, and bad boxes
coming back from the tool as error text (never an exception, never an image)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest
from composed import compose_verl
from PIL import Image

from chartrl.config import load_config
from chartrl.verl_backend.overrides import TOOL_AGENT, generation_overrides, response_length, train_overrides

REPO = Path(__file__).resolve().parents[2]
TRAIN, EVAL = ["d1", "d2"], ["d3", "d4"]


@pytest.fixture(scope="module")
def deepeyes_config():
    return load_config([REPO / "config" / "deepeyes.yaml"], root=REPO)


@pytest.fixture(scope="module")
def composed(deepeyes_config, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("work")
    found = {sid: compose_verl(train_overrides(deepeyes_config, sid, workdir)) for sid in TRAIN}
    for sid in EVAL:
        paths = {"model_dir": workdir / "m", "data_file": workdir / "t.parquet", "dump_dir": workdir / "d"}
        found[sid] = compose_verl(generation_overrides(deepeyes_config, sid, workdir=workdir, **paths))
    return found


def test_the_overlay_runs_only_its_own_series(deepeyes_config):
    assert list(deepeyes_config.series) == ["d1", "d2", "d3", "d4"]
    assert deepeyes_config.backend == "verl" and deepeyes_config.tools.names == ("zoom_in",)
    assert {s.dataset for s in deepeyes_config.train_series} == {"deepeyes", "chartqa"}


@pytest.mark.filterwarnings("ignore:Disabled critic")
@pytest.mark.parametrize("sid", TRAIN + EVAL)
def test_every_series_passes_verl_validation(composed, sid):
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config
    from verl.workers.config import FSDPActorConfig, RolloutConfig

    config = composed[sid]
    assert isinstance(omega_conf_to_dataclass(config.algorithm), AlgoConfig)
    assert isinstance(omega_conf_to_dataclass(config.actor_rollout_ref.actor), FSDPActorConfig)
    assert isinstance(omega_conf_to_dataclass(config.actor_rollout_ref.rollout), RolloutConfig)
    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))


@pytest.mark.parametrize("sid", TRAIN)
def test_the_recipe_values(composed, deepeyes_config, sid):
    """What run_deepeyes_grpo.sh sets, as verl receives it."""
    config = composed[sid]
    actor, rollout = config.actor_rollout_ref.actor, config.actor_rollout_ref.rollout
    assert (config.data.train_batch_size, config.data.max_prompt_length) == (128, 8192)
    assert config.data.max_response_length == response_length(deepeyes_config.series[sid], deepeyes_config) <= 16384
    assert (config.algorithm.adv_estimator, config.algorithm.norm_adv_by_std_in_grpo) == ("grpo", True)
    assert (actor.optim.lr, actor.ppo_mini_batch_size, actor.ppo_micro_batch_size_per_gpu) == (1e-6, 128, 1)
    assert actor.use_kl_loss is False and actor.entropy_coeff == 0
    assert actor.fsdp_config.param_offload is True and actor.fsdp_config.optimizer_offload is True
    assert (rollout.n, rollout.gpu_memory_utilization, rollout.tensor_model_parallel_size) == (8, 0.8, 1)
    assert rollout.agent.default_agent_loop == TOOL_AGENT
    turns = rollout.multi_turn
    assert (turns.max_assistant_turns, turns.max_user_turns, turns.max_parallel_calls) == (5, 5, 1)
    assert (config.trainer.save_freq, config.trainer.test_freq, config.trainer.val_before_train) == (8, 80, False)
    assert (config.trainer.n_gpus_per_node, config.trainer.nnodes) == (8, 1)
    reward = config.reward.custom_reward_function
    assert reward.name == "deepeyes"
    assert dict(reward.reward_kwargs.params) == {
        "accuracy_weight": 0.8,
        "format_weight": 0.2,
        "tool_bonus": 1.2,
        "year_rule": "standard",
    }
    assert reward.reward_kwargs.judge.backend == "openai" and reward.reward_kwargs.judge.temperature == 0.1
    assert list(reward.reward_kwargs.tools) == ["zoom_in"]


@pytest.mark.parametrize("sid", TRAIN + EVAL)
def test_the_recipe_memory_settings(composed, sid):
    """What run_deepeyes_grpo.sh sets to fit sequences of up to 23,808 tokens on the 7B: fused kernels (no logits
    tensor), the reference offloaded with the actor, vLLM eager with 32,768 batched tokens; verl's AdamW defaults."""
    config = composed[sid]
    model, actor, rollout = (
        config.actor_rollout_ref.model,
        config.actor_rollout_ref.actor,
        config.actor_rollout_ref.rollout,
    )
    assert model.use_fused_kernels is True and model.fused_kernel_options.impl_backend == "torch"
    assert config.actor_rollout_ref.ref.fsdp_config.param_offload is True
    assert rollout.enforce_eager is True and rollout.max_num_batched_tokens == 32768
    assert rollout.free_cache_engine is True and rollout.enable_chunked_prefill is True
    assert actor.optim.weight_decay == 0.01 and list(actor.optim.betas) == [0.9, 0.999]


def test_the_plan_counts_the_fused_kernels(deepeyes_config):
    from chartrl.verl_backend.budget import logits_path

    assert logits_path(deepeyes_config) == "fused"


ZOOM = '<tool_call>\n{"name": "zoom_in", "arguments": {"bbox_2d": [0.1, 0.1, 0.4, 0.4]}}\n</tool_call>'
TURN = "\nuser\n<tool_response>\n{obs}\n</tool_response>\nassistant\n"  # a tool turn as verl decodes it (Qwen2.5)
RESPONSES = [
    # (response as verl decodes it, score): 0.8 x judge accuracy + 1.2 only for a right answer after a zoom that ran
    (ZOOM + TURN.format(obs="Zoomed in on [0.1, 0.1, 0.4, 0.4].") + "<answer>43</answer>", 2.0),
    (ZOOM + TURN.format(obs="Zoomed in on [0.1, 0.1, 0.4, 0.4].") + "<answer>34</answer>", 0.0),
    (
        ZOOM.replace("0.4, 0.4", "4, 4")
        + TURN.format(obs="Error: bbox_2d lies outside [0, 1]")
        + "<answer>43</answer>",
        0.8,
    ),
    ("<answer>43</answer>", 0.8),
    ("43", -0.2),  # no answer tag: a format error, nothing to judge
]


def test_verl_loads_the_reward_and_pays_the_bonus_only_on_right_answers(composed, monkeypatch):
    """d1's reward as verl loads it (its custom reward function with the overlay's reward_kwargs), the judge
    pointed at the loopback OpenAI-compatible test server."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn

    from judge_server import FakeJudgeServer

    monkeypatch.setenv("DEEPEYES_JUDGE_KEY", "EMPTY")
    config = OmegaConf.create(OmegaConf.to_container(composed["d1"]))
    judge = config.reward.custom_reward_function.reward_kwargs.judge
    with FakeJudgeServer() as server:
        judge.base_url, judge.cache_path = server.base_url, None
        fn = get_custom_reward_fn(config)
        extra = {"question": "What number is written in the small box in the top left of the image?"}
        scores = [
            fn(data_source="zoomchart", solution_str=text, ground_truth="43", extra_info=extra) for text, _ in RESPONSES
        ]
    assert [round(s["score"], 6) for s in scores] == [score for _, score in RESPONSES]
    assert [s["tool_bonus"] for s in scores] == [1.2, 0.0, 0.0, 0.0, 0.0]
    assert server.requests == 2  # the answers 43 and 34, each judged once over HTTP


def _drive(tool, create_kwargs: dict, arguments, image_data: list):
    """verl 0.9.1's ToolAgentLoop._call_tool, step for step: create, execute, release."""

    async def call():
        instance_id, _ = await tool.create(create_kwargs=create_kwargs)
        try:
            return await tool.execute(instance_id, arguments, agent_data=SimpleNamespace(image_data=image_data))
        finally:
            await tool.release(instance_id)

    return asyncio.run(call())


BAD_BOXES = [
    {"bbox_2d": [-0.2, 0.1, 0.5, 0.6]},  # outside [0, 1]
    {"bbox_2d": [0.6, 0.6, 0.2, 0.9]},  # inverted
    {"bbox_2d": [0.1, 0.1, 0.5]},  # three numbers
    {"bbox_2d": "the top left"},  # not a list
    {"bbox_2d": [0, 0, 10**400, 1]},  # an integer no float holds
    {"bbox_2d": [0.0, 0.0, float("nan"), 1.0]},  # not a finite number
    {"bbox_2d": [226, 399, 265, 464]},  # the recipe's pixel boxes: outside [0, 1] here
    {"box": [0, 0, 1, 1]},  # the wrong argument name
    ["not", "an", "object"],
]


def test_verl_loads_the_zoom_tool_and_bad_boxes_come_back_as_error_text(deepeyes_config, composed):
    from verl.tools.tool_registry import initialize_tools_from_config

    from chartrl.verl_backend.tool_config import tools_kwargs, write_tool_config

    # what the train job writes where its overrides point verl's multi-turn tool config
    path = write_tool_config(
        composed["d1"].actor_rollout_ref.rollout.multi_turn.tool_config_path, deepeyes_config.tools.names
    )
    (tool,) = initialize_tools_from_config(str(path))
    assert tool.name == "zoom_in"
    chart = Image.new("RGB", (224, 224), "white")
    create = tools_kwargs({}, ["zoom_in"])["zoom_in"]["create_kwargs"]
    response, _, metrics = _drive(tool, create, {"bbox_2d": [0.1, 0.1, 0.4, 0.4]}, [chart])
    assert response.image and metrics["ok"] is True
    for arguments in BAD_BOXES:
        response, reward, metrics = _drive(tool, create, arguments, [chart])
        assert response.text.startswith("Error: ") and response.image is None, arguments
        assert metrics["ok"] is False and metrics["error_kind"] in ("bad_box", "bad_arguments"), arguments
        assert reward == 0.0


def test_tool_calls_per_step_come_from_verls_num_turns_as_the_recipe_reads_them():
    """verl's tool agent loop counts num_turns = user turns + assistant turns + 1, so k zoom calls make 2k + 2
    turns; the export adds rollout/tool_calls = num_turns / 2 - 1 (the recipe's README formula) for the report and
    MLflow."""
    from chartrl.verl_backend.metrics import with_aliases

    out = with_aliases({"critic/score/mean": 0.5, "num_turns/mean": 3.5, "num_turns/max": 10.0, "num_turns/min": 2.0})
    assert out["rollout/tool_calls"] == 0.75 and out["rollout/tool_calls_max"] == 4.0
    assert "rollout/tool_calls" not in with_aliases({"critic/score/mean": 0.5})  # nothing invented
