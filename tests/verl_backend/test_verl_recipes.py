"""The GeoQA recipe overlays (config/geoqa_r1v.yaml, config/geoqa_mc.yaml) as verl overrides, composed against the
installed verl's own ``ppo_trainer`` config, converted to verl's dataclasses and checked with verl's own
``validate_config``, as test_verl_overrides.py does for the study; and the recipes' keys read back from verl's
config: LoRA (rank, alpha, all-linear, the vision tower excluded and frozen), the advantage without std
normalisation, the recipe reward, and the "before training" generation on the starting model itself."""

from __future__ import annotations

from pathlib import Path

import pytest
from composed import compose_verl

from chartrl.verl_backend.overrides import generation_overrides, train_overrides

REPO = Path(__file__).resolve().parents[2]
RECIPES = {
    "geoqa_r1v": (["g1", "g2"], ["g1_start", "g1_last", "g2_last"]),
    "geoqa_mc": (["m1"], ["m1_start", "m1_last"]),
    "geoqa_r1v_lora": (["g2"], ["g2_start", "g2_last"]),
}
OVERLAYS = {"geoqa_r1v_lora": ["geoqa_r1v.yaml", "geoqa_r1v_lora.yaml"]}
"""A recipe written as an overlay on another one: its files, in order."""


@pytest.fixture(scope="module")
def recipes(tmp_path_factory):
    """overlay -> (its config, series -> its composed verl config)."""
    from chartrl.config import load_config

    workdir = tmp_path_factory.mktemp("work")
    paths = {"model_dir": workdir / "m", "data_file": workdir / "t.parquet", "dump_dir": workdir / "d"}
    found = {}
    for name, (train, evaluate) in RECIPES.items():
        config = load_config([REPO / "config" / f for f in OVERLAYS.get(name, [f"{name}.yaml"])], root=REPO)
        composed = {sid: compose_verl(train_overrides(config, sid, workdir)) for sid in train}
        composed |= {sid: compose_verl(generation_overrides(config, sid, workdir=workdir, **paths)) for sid in evaluate}
        found[name] = (config, composed)
    return found


@pytest.fixture
def vllm_lora_ranks(monkeypatch):
    """verl's validate_config checks a LoRA rank with ``get_vllm_max_lora_rank`` from its vLLM rollout module, which
    imports vLLM (a CUDA-only wheel, absent here). Stand in for that module with the check itself, against the
    ranks verl's own fallback lists when vLLM's are unavailable (``vllm_rollout/utils.py``: 1 ... 512)."""
    import sys
    import types

    allowed = (1, 8, 16, 32, 64, 128, 256, 320, 512)
    seen = []

    def get_vllm_max_lora_rank(lora_rank: int) -> int:
        seen.append(lora_rank)
        if not 0 < lora_rank <= allowed[-1]:
            raise ValueError(f"lora_rank must be in 1..{allowed[-1]}, got {lora_rank}")
        return next(rank for rank in allowed if rank >= lora_rank)

    module = types.ModuleType("verl.workers.rollout.vllm_rollout.utils")
    module.get_vllm_max_lora_rank = get_vllm_max_lora_rank
    monkeypatch.setitem(sys.modules, "verl.workers.rollout.vllm_rollout.utils", module)
    return seen


@pytest.mark.filterwarnings("ignore:Disabled critic")
@pytest.mark.parametrize("name, sid", [(n, s) for n, (t, e) in RECIPES.items() for s in t + e])
def test_recipe_overrides_pass_verl_validation(recipes, vllm_lora_ranks, name, sid):
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config
    from verl.workers.config import FSDPActorConfig, RolloutConfig

    config = recipes[name][1][sid]
    assert isinstance(omega_conf_to_dataclass(config.algorithm), AlgoConfig)
    actor = omega_conf_to_dataclass(config.actor_rollout_ref.actor)
    assert isinstance(actor, FSDPActorConfig)
    assert isinstance(omega_conf_to_dataclass(config.actor_rollout_ref.rollout), RolloutConfig)
    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    assert vllm_lora_ranks == (
        [config.actor_rollout_ref.model.lora_rank] if config.actor_rollout_ref.model.lora_rank else []
    )


def test_r1v_recipe_keys(recipes):
    _, composed = recipes["geoqa_r1v"]
    full, lora = composed["g1"], composed["g2"]
    for config in (full, lora):
        assert config.data.train_batch_size == 512 and config.actor_rollout_ref.rollout.n == 5
        assert config.actor_rollout_ref.actor.ppo_mini_batch_size == 128
        assert (
            config.actor_rollout_ref.actor.kl_loss_type == "low_var_kl"
            and config.actor_rollout_ref.actor.kl_loss_coef == 0.01
        )
        assert (config.actor_rollout_ref.actor.clip_ratio_low, config.actor_rollout_ref.actor.clip_ratio_high) == (
            0.2,
            0.3,
        )
        assert config.data.max_response_length == 2048 and config.trainer.val_before_train
        assert (config.trainer.test_freq, config.trainer.save_freq, config.trainer.max_actor_ckpt_to_keep) == (5, 5, 3)
        assert config.reward.custom_reward_function.name == "r1v"
        # EasyR1's update micro-batch 1, vLLM tensor parallelism 1, AdamW (weight decay 1e-2, betas 0.9 / 0.999)
        actor = config.actor_rollout_ref.actor
        assert (
            actor.ppo_micro_batch_size_per_gpu == 1 and config.actor_rollout_ref.rollout.tensor_model_parallel_size == 1
        )
        assert actor.optim.weight_decay == 0.01 and list(actor.optim.betas) == [0.9, 0.999]
        assert actor.fsdp_config.param_offload and actor.fsdp_config.optimizer_offload
    assert full.actor_rollout_ref.model.lora_rank == 0 and full.actor_rollout_ref.actor.optim.lr == 1e-6
    model = lora.actor_rollout_ref.model
    assert (model.lora_rank, model.lora_alpha, model.target_modules) == (16, 64, "all-linear")
    assert model.exclude_modules == ".*visual.*"  # the frozen base keeps the vision tower: verl reads no freeze key
    assert lora.actor_rollout_ref.actor.optim.lr == 1e-5


def test_the_lora_variant_runs_as_the_recipe_does_on_7b_and_two_gpus(recipes):
    config, composed = recipes["geoqa_r1v_lora"]
    assert [s.id for s in config.train_series] == ["g2"] and config.verl.n_gpus == 2
    for sid in ("g2", "g2_start", "g2_last"):
        assert composed[sid].trainer.n_gpus_per_node == 2
    assert composed["g2_start"].actor_rollout_ref.model.path == "Qwen/Qwen2.5-VL-7B-Instruct"
    assert composed["g2"].actor_rollout_ref.model.path == "Qwen/Qwen2.5-VL-7B-Instruct"
    assert composed["g2"].actor_rollout_ref.model.lora_rank == 16


def test_mc_recipe_keys(recipes):
    _, composed = recipes["geoqa_mc"]
    config = composed["m1"]
    assert config.algorithm.adv_estimator == "grpo" and config.algorithm.norm_adv_by_std_in_grpo is False
    assert config.actor_rollout_ref.actor.loss_agg_mode == "token-mean"
    assert config.data.train_batch_size == 8 and config.actor_rollout_ref.rollout.n == 8
    assert config.data.max_response_length == 1024 and config.trainer.total_training_steps == 100
    assert config.actor_rollout_ref.actor.optim.lr == 4e-5 and config.actor_rollout_ref.model.lora_rank == 32
    assert config.reward.custom_reward_function.name == "multiple_choice"
    assert config.trainer.save_freq == 25  # the recipe saves every 25 steps
    for sid in ("m1", "m1_start", "m1_last"):  # Qwen3.5 answers without its thinking block, in training and test
        assert composed[sid].data.apply_chat_template_kwargs.enable_thinking is False
    # one update per step on fresh rollouts: verl's PPO-clip is the recipe's plain importance-sampling loss
    actor = config.actor_rollout_ref.actor
    assert (actor.ppo_mini_batch_size, actor.ppo_epochs) == (config.data.train_batch_size, 1)


def test_before_training_generates_with_the_starting_model_itself(recipes):
    for name, before, after, model in (
        ("geoqa_r1v", "g1_start", "g2_last", "Qwen/Qwen2.5-VL-3B-Instruct"),
        ("geoqa_mc", "m1_start", "m1_last", "Qwen/Qwen3.5-4B"),
    ):
        composed = recipes[name][1]
        assert composed[before].actor_rollout_ref.model.path == model  # nothing merged, no adapter
        assert composed[before].actor_rollout_ref.model.get("lora_adapter_path") is None
        assert composed[after].actor_rollout_ref.model.path.endswith("/m")  # the merged checkpoint ...
        assert composed[after].actor_rollout_ref.model.lora_adapter_path.endswith("/m/lora_adapter")  # ... its LoRA
        assert composed[before].trainer.val_only and composed[after].trainer.val_only
