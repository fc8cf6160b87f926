"""The batch arithmetic verl needs, checked before anything launches, each problem naming the numbers to change.

verl 0.9.1 splits work like this (``verl/utils/config.py`` ``validate_config``, ``verl/workers/config/actor.py``
``ActorConfig.validate``, ``verl/workers/engine_workers.py``, ``verl/protocol.py`` ``DataProto.chunk``):

- a step rolls out ``train_batch_size x n`` sequences and splits them evenly over all GPUs;
- the actor updates in mini-batches of ``ppo_mini_batch_size`` prompts (``x n`` sequences), split evenly over the
  data-parallel ranks (every GPU, without sequence parallelism), each rank accumulating gradients over
  micro-batches of ``ppo_micro_batch_size_per_gpu``;
- each vLLM replica spans ``tensor_model_parallel_size`` GPUs.

A violation surfaces on the cluster, minutes in, as ``only support equal chunk`` or a bare assertion; here it is a
config error before the job starts. The train and rollout sections are shared with the local backend, so the
names below are chartrl's config keys, with verl's name in brackets.

The train keys the local trainer applies and verl 0.9.1 cannot (:data:`IGNORED_BY_VERL`) are warnings, not errors:
``chartrl config check``, ``chartrl plan`` and each verl train job say which series set them and what happens.
"""

from __future__ import annotations

import re
from pathlib import Path

from chartrl.config import Config, LoraSettings, RolloutConfig, TrainConfig, VerlConfig, config_check


def _multiples(base: int, near: int, count: int = 2) -> str:
    """The nearest multiples of ``base`` around ``near``, for a suggestion (``16 or 24``)."""
    lower = max(base, (near // base) * base)
    candidates = sorted({lower, lower + base} - {near})[:count]
    return " or ".join(str(c) for c in candidates)


@config_check("verl batch sizes")
def config_batch_problems(config: Config) -> list[str]:
    """The batch rules, for a config whose backend is verl (registered with the config checks)."""
    return batch_problems(config.train, config.rollout, config.verl) if config.backend == "verl" else []


def batch_problems(train: TrainConfig, rollout: RolloutConfig, verl: VerlConfig) -> list[str]:
    """Every batch-size rule the settings break (empty when verl can split the work)."""
    problems = []
    gpus = verl.n_gpus
    gpus_text = f"{gpus} GPUs (verl.nnodes {verl.nnodes} x verl.n_gpus_per_node {verl.n_gpus_per_node})"
    prompts, n, mini = train.prompts_per_step, rollout.n, verl.ppo_mini_batch_size
    sequences = prompts * n
    if sequences % gpus:
        problems.append(
            f"train.prompts_per_step {prompts} [data.train_batch_size] x rollout.n {n} = {sequences} rollouts per "
            f"step do not split evenly over {gpus_text}; make train.prompts_per_step x rollout.n a multiple of "
            f"{gpus} (e.g. train.prompts_per_step {_multiples(gpus // _gcd(gpus, n), prompts)})"
        )
    if mini > prompts:
        problems.append(
            f"verl.ppo_mini_batch_size {mini} is larger than train.prompts_per_step {prompts} "
            f"[actor.ppo_mini_batch_size > data.train_batch_size]; lower verl.ppo_mini_batch_size to at most {prompts}"
        )
    elif prompts % mini:
        problems.append(
            f"train.prompts_per_step {prompts} is not a multiple of verl.ppo_mini_batch_size {mini}, so a step's "
            f"last mini-batch would be partial; set verl.ppo_mini_batch_size to a divisor of {prompts} "
            f"(e.g. {_divisors_near(prompts, mini)})"
        )
    mini_sequences = mini * n
    if mini_sequences % gpus:
        problems.append(
            f"verl.ppo_mini_batch_size {mini} x rollout.n {n} = {mini_sequences} sequences per mini-batch do not "
            f"split evenly over {gpus_text}; make verl.ppo_mini_batch_size x rollout.n a multiple of {gpus}"
        )
    elif (mini_sequences // gpus) % verl.ppo_micro_batch_size_per_gpu:
        per_gpu = mini_sequences // gpus
        problems.append(
            f"each GPU gets {per_gpu} sequences per mini-batch (verl.ppo_mini_batch_size {mini} x rollout.n {n} / "
            f"{gpus} GPUs), not a multiple of verl.ppo_micro_batch_size_per_gpu {verl.ppo_micro_batch_size_per_gpu}; "
            f"set verl.ppo_micro_batch_size_per_gpu to a divisor of {per_gpu} (e.g. {_divisors_near(per_gpu, 4)})"
        )
    if gpus % verl.tensor_model_parallel_size:
        problems.append(
            f"verl.tensor_model_parallel_size {verl.tensor_model_parallel_size} does not divide the {gpus_text}; "
            f"choose a divisor of {gpus}"
        )
    if rollout.n < 2:
        problems.append(f"rollout.n = {rollout.n}: a GRPO group of one response has advantage 0; set rollout.n >= 2")
    return problems


@config_check("model revision")
def model_revision_problems(config: Config) -> list[str]:
    """``model.revision`` pins what verl's workers load (``chartrl.verl_backend.snapshot``): a hub id's snapshot
    folder of that commit. A local folder (relative to the working directory, where the workflow runs) is loaded as
    it is, and the local backend loads ``model.path`` as it is: there a revision would pin nothing, while the
    run's MLflow params and run.json recorded it as the commit that trained."""
    model = config.model
    if model.revision is None:
        return []
    if config.backend == "verl":
        if model.path is None or not Path(model.path).exists():
            return []
        return [
            f"model.revision {model.revision} with model.path {model.path}, a local folder: verl loads the folder as "
            "it is, whatever commit it holds, so the revision would be recorded without pinning anything. Set "
            "model.path to the hub id and download that commit into the Hugging Face cache (`hf download <hub id> "
            f"--revision {model.revision}`; HF_HOME on a filesystem the GPU nodes see), or remove model.revision"
        ]
    return [
        f"model.revision {model.revision} is read by the verl backend only; the local backend loads model.path as "
        f"it is: download that commit to a folder (`hf download {model.path} --revision {model.revision} "
        "--local-dir DIR`) and set model.path to DIR, or remove model.revision"
    ]


def dataset_problems(train_rows: int, val_rows: int, prompts_per_step: int) -> list[str]:
    """What the converted data must hold: verl's train loader drops a last partial batch, so fewer questions than
    one batch means zero steps."""
    problems = []
    if train_rows < prompts_per_step:
        problems.append(
            f"the train split has {train_rows} questions, fewer than train.prompts_per_step {prompts_per_step} "
            "(verl's loader drops the partial batch: no step would run); lower train.prompts_per_step or build "
            "a larger train split"
        )
    if val_rows == 0:
        problems.append("the validation split is empty; give the dataset a val split with rows")
    return problems


def _gcd(a: int, b: int) -> int:
    from math import gcd

    return gcd(a, b)


def _divisors_near(number: int, near: int) -> str:
    divisors = [d for d in range(1, number + 1) if number % d == 0]
    return ", ".join(str(d) for d in sorted(divisors, key=lambda d: (abs(d - near), d))[:3])


def gpu_limit_problem(limit: int | None, verl: VerlConfig) -> str | None:
    """Whether Snakemake's ``gpu`` limit (``--resources gpu=N``) queues verl jobs, each of which takes the whole
    shape verl is given. Snakemake caps a job's resource at the global limit instead of refusing the job
    (``snakemake/resources.py``, ``Resource.constrain``), so with the default profile's ``gpu: 0`` every verl job
    would run at once; verl checks its GPUs once at start and fails when another job's workers hold them."""
    gpus = verl.n_gpus
    if limit is not None and limit >= gpus:
        return None
    given = "no --resources gpu limit" if limit is None else f"--resources gpu={limit}"
    return (
        f"each verl train or generate job takes {gpus} GPUs (verl.nnodes {verl.nnodes} x verl.n_gpus_per_node "
        f"{verl.n_gpus_per_node}), but this run has {given}, so Snakemake would start verl jobs together and they "
        f"would fight over the GPUs; pass --resources gpu={gpus} (or the cluster's GPU count, to run several)"
    )


VISION_TOWER_MODULE = "model.visual.blocks.0.mlp.up_proj"
"""A module of Qwen2.5-VL's vision tower as PEFT names it (transformers 5), to test a LoRA exclude pattern with."""


def vision_tower_frozen_by_lora(lora: LoraSettings) -> bool:
    """Whether verl's LoRA leaves the vision tower untrained: the base model is frozen, and ``exclude_modules``
    keeps adapters out of the tower (PEFT's full match)."""
    excluded = lora.exclude_modules is not None and re.fullmatch(lora.exclude_modules, VISION_TOWER_MODULE)
    return lora.enabled and bool(excluded)


IGNORED_BY_VERL = {
    "train.exclude_degenerate": (
        "train.exclude_degenerate is true ({series}), but verl 0.9.1 cannot leave a group out of the update "
        "(algorithm.filter_groups replaces it with new prompts: DAPO's dynamic sampling, another recipe): groups whose "
        "rewards are all equal stay in, with advantage 0 (no gradient; their tokens count in token-mean's "
        "denominator); set train.exclude_degenerate: false to say so"
    ),
    "train.lora.freeze_vision_tower": (
        "train.lora.freeze_vision_tower is true ({series}), but verl 0.9.1 never reads actor.freeze_vision_tower: the "
        "vision tower trains; on verl freeze it with LoRA and train.lora.exclude_modules '.*visual.*' (the frozen "
        "base keeps it, no adapter enters it), or set freeze_vision_tower: false"
    ),
}
"""Train keys verl 0.9.1 accepts and does not apply -> the warning, with ``{series}`` for the series that set it."""


def ignored_train_keys(train: TrainConfig) -> list[str]:
    """The keys of :data:`IGNORED_BY_VERL` that ``train`` (one series' train settings) sets."""
    keys = []
    if train.exclude_degenerate:
        keys.append("train.exclude_degenerate")
    if train.lora.freeze_vision_tower and not vision_tower_frozen_by_lora(train.lora):
        keys.append("train.lora.freeze_vision_tower")
    return keys


def ignored_settings(config: Config) -> list[str]:
    """What a verl config asks that verl 0.9.1 does not do, one line per key naming the series that set it.
    Warnings, not errors: the run is valid, only not what the key says."""
    if config.backend != "verl":
        return []
    series_by_key: dict[str, list[str]] = {}
    for series in config.train_series:
        for key in ignored_train_keys(config.train_of(series.id)):
            series_by_key.setdefault(key, []).append(series.id)
    return [IGNORED_BY_VERL[key].format(series=", ".join(ids)) for key, ids in series_by_key.items()]
