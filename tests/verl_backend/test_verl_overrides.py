"""Every series of the real study (config/gpu.yaml) as verl overrides, composed against the installed verl's own
``ppo_trainer`` config and converted to verl's dataclasses, then checked with verl's own ``validate_config``:
what ``main_ppo`` does before it needs a GPU."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest
from composed import compose_verl
from omegaconf import OmegaConf

from chartrl.verl_backend.hydra import override_key
from chartrl.verl_backend.overrides import (
    TOOL_AGENT,
    WORKDIR,
    SeriesFiles,
    eval_overrides,
    generation_overrides,
    mlflow_overrides,
    resolve_placeholders,
    response_length,
    train_overrides,
)

TRAIN = ["e1", "e2", "e3", "e6", "e7", "e10", "e11", "e12"]
EVAL = ["e4", "e5", "e8", "e9", "e13", "e14"]


@pytest.fixture(scope="module")
def composed(gpu_config, tmp_path_factory):
    """series -> its composed verl config (train series: training; eval series: generation), with the time it
    took to generate and compose all of them."""
    workdir = tmp_path_factory.mktemp("work")
    started = time.perf_counter()
    found = {sid: compose_verl(train_overrides(gpu_config, sid, workdir)) for sid in TRAIN}
    for sid in EVAL:
        paths = {"model_dir": workdir / "m", "data_file": workdir / "t.parquet", "dump_dir": workdir / "d"}
        found[sid] = compose_verl(generation_overrides(gpu_config, sid, workdir=workdir, **paths))
    found["_seconds"] = time.perf_counter() - started
    found["_workdir"] = workdir
    return found


@pytest.mark.filterwarnings("ignore:Disabled critic")  # GRPO has no critic: verl says so
@pytest.mark.parametrize("sid", TRAIN + EVAL)
def test_sections_convert_to_verl_dataclasses_and_pass_verl_validation(composed, sid):
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config
    from verl.workers.config import FSDPActorConfig, RolloutConfig

    config = composed[sid]
    assert isinstance(omega_conf_to_dataclass(config.algorithm), AlgoConfig)
    assert isinstance(omega_conf_to_dataclass(config.actor_rollout_ref.actor), FSDPActorConfig)
    rollout = omega_conf_to_dataclass(config.actor_rollout_ref.rollout)
    assert isinstance(rollout, RolloutConfig) and rollout.name == "vllm"  # verl's default (null) would fail
    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))


@pytest.mark.parametrize(
    "sid, std, agg, scale",
    [
        ("e1", True, "token-mean", None),  # grpo
        ("e3", True, "token-mean", None),
        # drgrpo: 2 x 512 sampled + an edited chart of at most max_prompt_length 2048 image tokens + 64 text tokens
        ("e10", False, "seq-mean-token-sum-norm", 3136),
        ("e11", False, "seq-mean-token-sum-norm", 512),  # no tools: one pass
    ],
)
def test_algorithm_keys(composed, gpu_config, sid, std, agg, scale):
    config = composed[sid]
    assert config.algorithm.adv_estimator == "grpo"
    assert config.algorithm.norm_adv_by_std_in_grpo is std
    assert config.actor_rollout_ref.actor.loss_agg_mode == agg
    assert config.actor_rollout_ref.actor.loss_scale_factor == scale
    actor = config.actor_rollout_ref.actor
    # gpu.yaml follows EasyR1: KL to the reference, low_var_kl 1e-2; clip 0.2 below, 0.3 above
    assert (actor.use_kl_loss, actor.kl_loss_coef, actor.kl_loss_type) == (True, 0.01, "low_var_kl")
    assert (actor.clip_ratio_low, actor.clip_ratio_high) == (0.2, 0.3)
    if scale is not None:
        assert scale == response_length(gpu_config.series[sid], gpu_config) == config.data.max_response_length


@pytest.mark.parametrize("sid", ["e1", "e2", "e6", "e10", "e12"])
def test_tool_series_run_verl_tool_agent_with_two_turns_and_our_tools(composed, gpu_config, sid):
    from verl.tools.tool_registry import initialize_tools_from_config

    from chartrl.verl_backend.tool_config import write_tool_config

    rollout = composed[sid].actor_rollout_ref.rollout
    assert rollout.agent.default_agent_loop == TOOL_AGENT
    assert rollout.multi_turn.max_assistant_turns == 2 and rollout.multi_turn.max_parallel_calls == 1
    assert rollout.multi_turn.format == "hermes"
    path = rollout.multi_turn.tool_config_path
    assert path == str(SeriesFiles.of(sid, composed["_workdir"]).tool_config)
    write_tool_config(path, gpu_config.tools.names)  # what the job writes there; verl's registry must load it
    assert [tool.name for tool in initialize_tools_from_config(path)] == list(gpu_config.tools.names)


@pytest.mark.parametrize("sid", ["e3", "e7", "e11"])
def test_no_tool_series_run_one_turn_without_tools(composed, sid):
    rollout = composed[sid].actor_rollout_ref.rollout
    assert rollout.agent.default_agent_loop == "single_turn_agent"
    assert rollout.multi_turn.tool_config_path is None and rollout.multi_turn.enable is False
    assert OmegaConf.select(composed[sid], "reward.custom_reward_function.reward_kwargs.tools") == []


def test_rewards_load_through_verl_with_their_kwargs(composed, gpu_config):
    from verl.trainer.ppo.reward import get_custom_reward_fn

    for sid in TRAIN:
        kwargs = composed[sid].reward.custom_reward_function.reward_kwargs
        series = gpu_config.series[sid]
        assert composed[sid].reward.custom_reward_function.name == series.reward.name
        assert dict(kwargs.params) == dict(series.reward.params)
        assert ("judge" in kwargs) == (sid in ("e2", "e12"))  # only judging rewards get the judge settings
        assert ("tokenizer" in kwargs) == (sid in ("e6", "e7", "e10", "e11", "e12"))  # a length term is on
    fn = get_custom_reward_fn(composed["e1"])
    assert fn(data_source="chartqa_human", solution_str="<answer>42</answer>", ground_truth="42")["score"] == 1.0


def test_judge_settings_carry_the_key_name_never_a_value(composed, monkeypatch, gpu_config):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-very-secret-value")
    text = "\n".join(train_overrides(gpu_config, "e12", "."))
    assert "OPENROUTER_API_KEY" in text and "sk-or-very-secret-value" not in text
    judge = composed["e12"].reward.custom_reward_function.reward_kwargs.judge
    assert judge.api_key_env == "OPENROUTER_API_KEY" and judge.cache_path.startswith("/")


def test_logging_checkpoints_and_schedule(composed, gpu_config):
    config, files = composed["e10"], SeriesFiles.of("e10", composed["_workdir"])
    assert list(config.trainer.logger) == ["console", "mlflow"]
    assert config.trainer.project_name == "chartrl-gpu" and config.trainer.experiment_name == "e10/train"
    assert config.trainer.total_training_steps == gpu_config.train.steps
    assert config.trainer.save_freq == gpu_config.train.checkpoint_every
    assert config.trainer.test_freq == gpu_config.train.val_every
    assert config.trainer.default_local_dir == str(files.checkpoints)
    assert config.data.train_files == str(files.train_data) and config.data.train_batch_size == 512
    assert config.actor_rollout_ref.rollout.n == 5 and config.actor_rollout_ref.model.path == gpu_config.model.path
    assert config.actor_rollout_ref.actor.ppo_mini_batch_size == 128 and config.trainer.max_actor_ckpt_to_keep == 3


def test_lora_and_extra_overrides(gpu_config):
    import dataclasses

    lora = dataclasses.replace(gpu_config.train.lora, enabled=True, r=16, alpha=32)
    config = dataclasses.replace(
        gpu_config,
        train=dataclasses.replace(gpu_config.train, lora=lora),
        verl=dataclasses.replace(gpu_config.verl, extra_overrides=("actor_rollout_ref.actor.entropy_coeff=0.001",)),
    )
    composed = compose_verl(train_overrides(config, "e1", "."))
    model = composed.actor_rollout_ref.model
    assert model.lora_rank == 16 and model.lora_alpha == 32 and list(model.target_modules) == list(lora.target_modules)
    assert composed.actor_rollout_ref.actor.entropy_coeff == 0.001  # the user's override comes last and wins
    paths = {"model_dir": "/m", "data_file": "/t.parquet", "dump_dir": "/d"}
    generation = compose_verl(generation_overrides(config, "e4", **paths))
    assert generation.actor_rollout_ref.model.lora_adapter_path == "/m/lora_adapter"  # what verl's merger writes


@pytest.mark.parametrize("sid", ["e10", "e13"])  # a training and a generation job
def test_attention_is_sdpa_without_padding_removal_in_every_job(composed, sid):
    model = composed[sid].actor_rollout_ref.model
    assert model.override_config.attn_implementation == "sdpa"
    assert model.use_remove_padding is False  # verl's Qwen2.5-VL remove-padding attention calls flash-attn


def _attention_config(gpu_config, model_dir, implementation):
    """The generation job of e13 on ``model_dir`` with ``verl.attn_implementation`` = ``implementation``, composed
    and validated as main_ppo does."""
    import dataclasses

    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    config = dataclasses.replace(
        gpu_config, verl=dataclasses.replace(gpu_config.verl, attn_implementation=implementation)
    )
    paths = {"model_dir": model_dir, "data_file": "/t.parquet", "dump_dir": "/d"}
    composed = compose_verl(generation_overrides(config, "e13", **paths))
    validate_config(composed, use_reference_policy=need_reference_policy(composed), use_critic=need_critic(composed))
    return composed


@pytest.mark.filterwarnings("ignore:Disabled critic")
def test_verl_builds_the_policy_with_the_chosen_attention(gpu_config, tiny_model_dir):
    """verl's own HFModelConfig (what its FSDP engine builds the model from) carries sdpa into the Hugging Face
    config, and the model loads; verl's default, flash_attention_2, cannot load here (no flash-attn, as on the
    cluster's envs/gpu.yaml)."""
    import torch
    from verl.utils.config import omega_conf_to_dataclass
    from verl.utils.model import get_hf_auto_model_class

    def build(implementation):
        composed = _attention_config(gpu_config, tiny_model_dir, implementation)
        model_config = omega_conf_to_dataclass(composed.actor_rollout_ref.model)
        auto_class = get_hf_auto_model_class(hf_config=model_config.hf_config)
        module = auto_class.from_pretrained(
            model_config.local_path, config=model_config.hf_config, torch_dtype=torch.float32
        )
        return model_config, module

    model_config, module = build("sdpa")
    assert model_config.use_remove_padding is False
    assert model_config.hf_config._attn_implementation == "sdpa" == module.config._attn_implementation
    if importlib.util.find_spec("flash_attn") is None:  # verl's default fails here, as it did on the cluster
        with pytest.raises(ImportError, match="(?i)flash"):
            build("flash_attention_2")


def test_generation_jobs_validate_once_on_the_test_split(composed):
    config = composed["e13"]  # e10's checkpoint, rule scorer
    assert config.trainer.val_only is True and config.trainer.resume_mode == "disable"
    assert config.reward.custom_reward_function.name == "generation_record"
    assert config.actor_rollout_ref.rollout.val_kwargs.do_sample is False
    assert config.actor_rollout_ref.rollout.agent.default_agent_loop == TOOL_AGENT  # as e10 trained
    assert config.data.val_files.endswith("t.parquet") and config.trainer.validation_data_dir.endswith("/d")
    # no test question is dropped for its length: it fails its agent loop, and the job's coverage check names it
    assert config.data.filter_overlong_prompts is False and composed["e10"].data.filter_overlong_prompts is True
    assert config.actor_rollout_ref.actor.loss_scale_factor == composed["e10"].actor_rollout_ref.actor.loss_scale_factor


def test_mlflow_run_travels_in_verl_ray_runtime_env(composed):
    config = compose_verl(train_overrides_for("e1", composed) + mlflow_overrides("sqlite:////x/mlflow.db", "abc123"))
    env = config.ray_kwargs.ray_init.runtime_env.env_vars
    assert env.MLFLOW_RUN_ID == "abc123" and env.MLFLOW_TRACKING_URI == "sqlite:////x/mlflow.db"


def train_overrides_for(sid, composed):
    from chartrl.config import load_config

    from conftest import REPO

    return train_overrides(load_config([REPO / "config" / "gpu.yaml"], root=REPO), sid, composed["_workdir"])


def test_every_key_is_set_once_and_all_series_are_quick(composed, gpu_config):
    for sid in TRAIN:
        keys = [override_key(o) for o in train_overrides(gpu_config, sid, ".")]
        assert len(keys) == len(set(keys)), sid
    print(f"overrides generated and composed for {len(gpu_config.series)} series in {composed['_seconds']:.2f}s")
    assert composed["_seconds"] < 60


def test_the_cli_prints_one_series_overrides(capsys):
    from chartrl.cli import main

    from conftest import REPO

    def run(series):
        code = main(["verl", "overrides", "--series", series, "--configfile", str(REPO / "config/gpu.yaml"), "--root",
                     str(REPO)])  # fmt: skip
        captured = capsys.readouterr()
        return code, captured.out.splitlines(), captured.err

    code, lines, _ = run("e10")
    assert code == 0 and "algorithm.norm_adv_by_std_in_grpo=False" in lines
    code, lines, _ = run("e13")
    assert code == 0 and "trainer.val_only=True" in lines
    code, _, err = run("e99")
    assert code == 2 and "unknown series 'e99'; series are: e1, e2" in err


def test_kv_reuse_is_the_rollout_engines_prefix_caching(composed, gpu_config):
    """rollout.kv_reuse on verl: vLLM's automatic prefix caching reuses the previous turn's keys/values."""
    import dataclasses

    assert composed["e10"].actor_rollout_ref.rollout.enable_prefix_caching is True
    assert composed["e13"].actor_rollout_ref.rollout.enable_prefix_caching is True
    off = dataclasses.replace(gpu_config, rollout=dataclasses.replace(gpu_config.rollout, kv_reuse=False))
    composed_off = compose_verl(train_overrides(off, "e10", composed["_workdir"]))
    assert composed_off.actor_rollout_ref.rollout.enable_prefix_caching is False


def test_the_optimiser_settings_reach_the_keys_verl_reads(gpu_config):
    """verl 0.9.1's FSDP engine clips with actor.optim.clip_grad (``transformer_impl.py``); actor.grad_clip and
    actor.freeze_vision_tower are accepted and never read, so a value written there is silently lost."""
    import dataclasses

    from verl.utils.config import omega_conf_to_dataclass

    train = dataclasses.replace(gpu_config.train, grad_clip=0.5, weight_decay=0.02)
    config = dataclasses.replace(gpu_config, train=train)
    overrides = train_overrides(config, "e1", ".")
    optim = omega_conf_to_dataclass(compose_verl(overrides).actor_rollout_ref.actor).optim
    assert optim.clip_grad == 0.5  # verl's default is 1.0
    assert optim.weight_decay == 0.02 and tuple(optim.betas) == (0.9, 0.999)  # verl's, torch's and EasyR1's betas
    keys = {override_key(o) for o in overrides}
    assert not keys & {"actor_rollout_ref.actor.grad_clip", "actor_rollout_ref.actor.freeze_vision_tower"}


def test_the_workflows_overrides_name_no_path_of_the_checkout_and_the_job_fills_them_in(gpu_config, tmp_path):
    """The rules write a verl job's overrides under WORKDIR and CHARTRL_PACKAGE (no absolute path in a job's params:
    a checkout moved with its results reruns nothing); in the job, its working directory and chartrl's folder take
    their place, giving the overrides generated for that folder."""
    package = str(Path(train_overrides.__code__.co_filename).parents[1])
    for sid in ("e2", "e6", "e12"):  # a judge's cache and the tokenizer of the length term are paths too
        written = train_overrides(gpu_config, sid, WORKDIR)
        assert not any(str(tmp_path) in o or package in o for o in written)
        assert resolve_placeholders(written, tmp_path) == train_overrides(gpu_config, sid, tmp_path)
    written = eval_overrides(gpu_config, "e13", WORKDIR)
    assert resolve_placeholders(written, tmp_path) == eval_overrides(gpu_config, "e13", tmp_path)
