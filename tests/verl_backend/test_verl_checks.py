"""Batch divisibility is checked before launch: whatever verl's own validation (``validate_config``, run on the
composed config) rejects, our check rejects too, with a message naming the chartrl keys to change; and our check
also catches the splits verl only hits on the GPUs (mini-batches over ranks, micro-batches per GPU)."""

from __future__ import annotations

import dataclasses

import pytest
from composed import compose_verl

from chartrl.verl_backend.checks import batch_problems, dataset_problems, gpu_limit_problem
from chartrl.verl_backend.overrides import train_overrides

CASES = [
    # prompts_per_step, n, mini, micro, nodes x gpus, tp: what is wrong (None: nothing)
    (64, 8, 16, 4, (1, 8), 1, None),  # the study's settings
    (12, 5, 4, 1, (1, 8), 1, "rollouts per step do not split evenly"),  # 60 % 8
    (8, 4, 16, 2, (1, 8), 1, "larger than train.prompts_per_step"),  # mini > batch
    (24, 4, 16, 2, (1, 8), 1, "not a multiple of verl.ppo_mini_batch_size"),  # 24 % 16
    (16, 3, 8, 2, (1, 16), 1, "sequences per mini-batch do not split evenly"),  # 24 % 16
    (16, 8, 4, 3, (1, 8), 1, "not a multiple of verl.ppo_micro_batch_size_per_gpu"),  # 4 per GPU % 3
    (16, 8, 4, 4, (2, 4), 3, "does not divide"),  # TP 3 on 8 GPUs
    (16, 1, 4, 2, (1, 8), 1, "rollout.n = 1"),  # a group of one
]


def settings(config, prompts, n, mini, micro, shape, tp):
    return dataclasses.replace(
        config,
        train=dataclasses.replace(config.train, prompts_per_step=prompts),
        rollout=dataclasses.replace(config.rollout, n=n),
        verl=dataclasses.replace(
            config.verl,
            ppo_mini_batch_size=mini,
            ppo_micro_batch_size_per_gpu=micro,
            nnodes=shape[0],
            n_gpus_per_node=shape[1],
            tensor_model_parallel_size=tp,
        ),
    )


@pytest.mark.filterwarnings("ignore:Disabled critic")
@pytest.mark.parametrize("prompts, n, mini, micro, shape, tp, problem", CASES)
def test_our_check_covers_verls_own_validation(gpu_config, prompts, n, mini, micro, shape, tp, problem):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    config = settings(gpu_config, prompts, n, mini, micro, shape, tp)
    ours = batch_problems(config.train, config.rollout, config.verl)
    composed = compose_verl(train_overrides(config, "e1", "."))
    try:
        validate_config(
            composed, use_reference_policy=need_reference_policy(composed), use_critic=need_critic(composed)
        )
        verl_accepts = True
    except (AssertionError, ValueError):
        verl_accepts = False
    assert verl_accepts or ours, "verl rejects settings our check let through"
    if problem is None:
        assert ours == []
    else:
        assert any(problem in p for p in ours), ours


def test_messages_name_the_numbers_and_a_fix(gpu_config):
    config = settings(gpu_config, 12, 5, 4, 1, (1, 8), 1)
    [message] = [p for p in batch_problems(config.train, config.rollout, config.verl) if "rollouts" in p]
    assert "train.prompts_per_step 12" in message and "rollout.n 5" in message and "= 60" in message
    assert "8 GPUs" in message and "e.g. train.prompts_per_step 8 or 16" in message


def test_the_config_loader_refuses_bad_batches_for_the_verl_backend(tmp_path):
    from chartrl.config import ConfigError, load_config

    from conftest import REPO

    bad = tmp_path / "bad.yaml"
    bad.write_text("train: {prompts_per_step: 12}\nrollout: {n: 5}\n")
    with pytest.raises(ConfigError, match="do not split evenly over 8 GPUs"):
        load_config([REPO / "config" / "gpu.yaml", bad], root=REPO)
    load_config([bad], root=REPO)  # the local backend has no GPUs to split over


@pytest.mark.parametrize(
    "train, val, batch, problem",
    [
        (64, 10, 64, None),
        (63, 10, 64, "fewer than train.prompts_per_step 64"),
        (64, 0, 64, "validation split is empty"),
    ],
)
def test_dataset_sizes(train, val, batch, problem):
    found = dataset_problems(train, val, batch)
    assert (found == []) if problem is None else any(problem in p for p in found)


@pytest.mark.parametrize(
    "limit, shape, wrong",
    [
        (8, (1, 8), None),  # docs/cluster.md's single node: one verl job at a time
        (16, (1, 8), None),  # room for two
        (16, (2, 8), None),
        (0, (1, 8), "--resources gpu=0"),  # the default profile's limit: Snakemake would cap the jobs' gpu at 0
        (None, (1, 8), "no --resources gpu limit"),  # no limit at all: nothing queues
        (8, (2, 8), "takes 16 GPUs (verl.nnodes 2 x verl.n_gpus_per_node 8)"),
    ],
)
def test_the_gpu_limit_must_hold_one_verl_job(gpu_config, limit, shape, wrong):
    verl = dataclasses.replace(gpu_config.verl, nnodes=shape[0], n_gpus_per_node=shape[1])
    problem = gpu_limit_problem(limit, verl)
    if wrong is None:
        assert problem is None
    else:
        assert wrong in problem and f"pass --resources gpu={shape[0] * shape[1]}" in problem


# --- train keys verl 0.9.1 accepts and does not apply --------------------------------------------------------------

LORA_OFF = {"enabled": False, "exclude_modules": None}
LORA_WITHOUT_TOWER = {"enabled": True, "exclude_modules": ".*visual.*"}


@pytest.mark.parametrize(
    "exclude_degenerate, freeze, lora, warned",
    [
        (False, False, LORA_OFF, []),  # nothing asked that verl cannot do
        (True, False, LORA_OFF, ["train.exclude_degenerate"]),  # verl keeps such groups (advantage 0)
        (False, True, LORA_OFF, ["train.lora.freeze_vision_tower"]),  # full-parameter: the tower trains
        (False, True, {"enabled": True, "exclude_modules": None}, ["train.lora.freeze_vision_tower"]),  # adapters in it
        (False, True, {"enabled": True, "exclude_modules": ".*language_model.*"}, ["train.lora.freeze_vision_tower"]),
        (False, True, LORA_WITHOUT_TOWER, []),  # LoRA's frozen base keeps the tower, no adapter enters it
    ],
)
def test_train_keys_verl_does_not_apply_are_named(gpu_config, exclude_degenerate, freeze, lora, warned):
    from chartrl.verl_backend.checks import IGNORED_BY_VERL, ignored_settings, ignored_train_keys

    lora_settings = dataclasses.replace(gpu_config.train.lora, freeze_vision_tower=freeze, **lora)
    train = dataclasses.replace(gpu_config.train, exclude_degenerate=exclude_degenerate, lora=lora_settings)
    assert ignored_train_keys(train) == warned
    lines = ignored_settings(dataclasses.replace(gpu_config, train=train))
    assert lines == [
        IGNORED_BY_VERL[key].format(series=", ".join(s.id for s in gpu_config.train_series)) for key in warned
    ]
    for key, line in zip(warned, lines, strict=True):  # the key, its value, the series, the fix
        assert line.startswith(f"{key} is true (e1, ") and "set " in line


def test_the_local_backend_is_not_warned(gpu_config):
    from chartrl.verl_backend.checks import ignored_settings

    local = dataclasses.replace(
        gpu_config, backend="local", train=dataclasses.replace(gpu_config.train, exclude_degenerate=True)
    )
    assert ignored_settings(local) == []
