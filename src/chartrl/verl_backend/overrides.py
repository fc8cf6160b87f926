"""One series' config -> the Hydra overrides of ``python -m verl.trainer.main_ppo`` (verl 0.9.1's ``ppo_trainer``).

The same series trains on either backend from the same config: ``train:`` and ``rollout:`` (steps, prompts per
step, lr, clip, KL, LoRA, n, temperature) are read by both; ``verl:`` adds the cluster's shape and verl-only knobs.
What each group of overrides does, and why:

- model and LoRA: ``actor_rollout_ref.model.*`` (LoRA rank/alpha/modules from ``train.lora``; vLLM then loads the
  adapter's base weights from safetensors, as verl's LoRA recipe requires); the attention the GPU environment
  has (``verl.attn_implementation``, :func:`attention_overrides`).
- data: our contract converted to verl's RL dataset (``chartrl.verl_backend.data``), absolute paths, because
  verl's trainer and workers run as Ray actors whose working directory is not the job's. The workflow writes them
  under :data:`WORKDIR` and :data:`PACKAGE` (placeholders, so that no path of the checkout is in a job's params;
  a checkout moved with its results reruns nothing); the job puts its own folders in their place
  (:func:`resolve_placeholders`).
- rollout: vLLM (verl's own default, ``null``, fails), ``n``, sampling, and the agent loop: verl's ``tool_agent``
  with each pass capped at ``rollout.max_new_tokens`` (``chartrl.verl_backend.agent_loop``, registered with verl
  from ``agent_loops.yaml``), ``max_assistant_turns = tools.max_tool_turns + 1`` (one tool turn: the call, then the
  answer), one call per turn, the hermes format, and the tool YAML; a no-tool series runs ``single_turn_agent``
  with no tool config (its one pass is the whole response budget).
- algorithm: GRPO advantages; ``drgrpo`` is GRPO without the std division (``norm_adv_by_std_in_grpo=False``)
  and with ``seq-mean-token-sum-norm`` over a constant ``loss_scale_factor`` = the response length budget
  (verl's agent loop cuts every response at it, so it is the most tokens a response can hold); the settings come
  from ``chartrl.train.algorithms``, the registry the local trainer uses.
- reward: our reward as a verl custom reward function (``chartrl.verl_backend.rewards``) with its params, the
  judge settings when it judges (the key's variable NAME only), the offered tools and, when the length term is on,
  the tokenizer that counts response tokens.
- trainer: ``[console, mlflow]`` logging into the series' run (``MLFLOW_RUN_ID`` is added at launch, when the run
  exists), steps, validation and checkpoint cadence, checkpoints under ``results/runs/{series}/checkpoints``.

``verl.extra_overrides`` come last, so a user's override wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chartrl.config import Config, ConfigError, EvalSeries, TrainSeries, to_plain
from chartrl.rewards import accuracy_signal
from chartrl.train.algorithms import get_algorithm
from chartrl.verl_backend.hydra import override
from chartrl.verl_backend.snapshot import snapshot_folder

WORKDIR = Path("WORKDIR")
"""The workflow's working directory, as a job's overrides name it (``workdir=WORKDIR``): a plain word, so that
Hydra reads the paths under it as it reads absolute ones, unquoted."""
PACKAGE = Path("CHARTRL_PACKAGE")
"""The chartrl package's folder, as a job's overrides name it."""
PACKAGE_DIR = Path(__file__).resolve().parents[1]

REWARD_MODULE = "pkg://chartrl.verl_backend.rewards"
GENERATION_REWARD = "generation_record"
"""The reward function of a generation (val_only) job: rule accuracy as verl's score, plus the row id that ties
each line of verl's generation dump to its question (``chartrl.verl_backend.rewards.generation_record``)."""
TOOL_AGENT = "chartrl_tool_agent"
"""The tool series' agent loop: verl's ``tool_agent`` with each pass capped at ``rollout.max_new_tokens``
(``chartrl.verl_backend.agent_loop``), registered with verl from :data:`AGENT_LOOPS_FILE`."""
AGENT_LOOPS_FILE = Path("verl_backend") / "agent_loops.yaml"
"""Under the package's folder."""
MAX_TOKENS_PER_TURN = "max_tokens_per_turn"
"""The key under ``actor_rollout_ref.rollout.custom`` (verl's extension point) that holds the per-pass cap."""
SINGLE_TURN_AGENT = "single_turn_agent"
IMAGE_TOKEN_PIXELS = 28 * 28
"""Pixels per image token of Qwen2-VL / Qwen2.5-VL (14 px patches merged 2 x 2)."""
TOOL_TURN_TEXT_TOKENS = 64
"""Budget for one tool turn's text and template tokens (role markers, tags, our one-line observation)."""
NEVER_ENDING_EPOCHS = 100_000
"""verl stops at ``trainer.total_training_steps``; the epoch cap must not stop it first on a small dataset."""


def resolved(path: str | Path) -> Path:
    """``path`` made absolute, unless it is written under :data:`WORKDIR` (the workflow's form)."""
    path = Path(path)
    return path if path.parts[:1] == WORKDIR.parts else path.resolve()


def package_dir(workdir: Path) -> Path:
    """The package's folder as overrides for ``workdir`` name it: :data:`PACKAGE` in the workflow's form."""
    return PACKAGE if workdir == WORKDIR else PACKAGE_DIR


def resolve_placeholders(overrides: list[str], workdir: Path) -> list[str]:
    """The workflow's overrides with the job's working directory and the package's folder in place of
    :data:`WORKDIR` and :data:`PACKAGE`."""
    places = {f"{WORKDIR}/": f"{workdir.resolve()}/", f"{PACKAGE}/": f"{PACKAGE_DIR}/"}
    out = []
    for value in overrides:
        for placeholder, folder in places.items():
            value = value.replace(placeholder, folder)
        out.append(value)
    return out


@dataclass(frozen=True)
class SeriesFiles:
    """Where one series' verl job reads and writes. Absolute: verl's Ray actors do not share the job's cwd."""

    run_dir: Path

    @classmethod
    def of(cls, series_id: str, workdir: str | Path) -> SeriesFiles:
        return cls(resolved(workdir) / "results" / "runs" / series_id)

    @property
    def verl_dir(self) -> Path:
        return self.run_dir / "verl"

    @property
    def train_data(self) -> Path:
        return self.verl_dir / "train.parquet"

    @property
    def val_data(self) -> Path:
        return self.verl_dir / "val.parquet"

    @property
    def tool_config(self) -> Path:
        return self.verl_dir / "tools.yaml"

    @property
    def checkpoints(self) -> Path:
        return self.run_dir / "checkpoints"

    @property
    def val_generations(self) -> Path:
        return self.verl_dir / "val_generations"

    @property
    def hydra_dir(self) -> Path:
        return self.verl_dir / "hydra"


@dataclass(frozen=True)
class GenerationFiles:
    """Default paths of an eval series' verl generation job, under ``results/eval/{series}/verl/``: the merged
    checkpoint, the test split in verl's format, verl's generation dumps."""

    folder: Path

    @classmethod
    def of(cls, series_id: str, workdir: str | Path) -> GenerationFiles:
        return cls(resolved(workdir) / "results" / "eval" / series_id / "verl")

    @property
    def model_dir(self) -> Path:
        return self.folder / "model"

    @property
    def data_file(self) -> Path:
        return self.folder / "test.parquet"

    @property
    def dump_dir(self) -> Path:
        return self.folder / "dumps"

    def paths(self) -> dict[str, Path]:
        """As :func:`generation_overrides` takes them."""
        return {"model_dir": self.model_dir, "data_file": self.data_file, "dump_dir": self.dump_dir}


def passes(series: TrainSeries, config: Config) -> int:
    return config.tools.max_tool_turns + 1 if series.tools else 1


def edited_image_tokens(config: Config) -> int:
    """The most image tokens an edited chart can bring into the response: a tool returns a chart of the prompt
    chart's size, at most ``model.max_pixels / 784`` tokens, and a prompt longer than ``verl.max_prompt_length``
    is filtered out of the data (``data.filter_overlong_prompts``), so its chart has fewer tokens than that."""
    return min(config.model.max_pixels // IMAGE_TOKEN_PIXELS, config.verl.max_prompt_length)


def response_length(series: TrainSeries, config: Config) -> int:
    """verl's response budget: every generation pass (``rollout.max_new_tokens`` each) plus, per tool turn, the
    edited chart's image tokens (:func:`edited_image_tokens`) and the observation's text. Tool tokens are in
    verl's response (loss mask 0), so a budget without them would end episodes before the answer."""
    sampled = config.rollout.max_new_tokens * passes(series, config)
    if not series.tools:
        return sampled
    tool_turn = edited_image_tokens(config) + TOOL_TURN_TEXT_TOKENS
    return sampled + config.tools.max_tool_turns * tool_turn


def model_path(config: Config, workdir: Path) -> str:
    """The policy verl starts from, as every verl worker loads it: a local ``model.path`` made absolute; a hub id
    pinned by ``model.revision`` as that commit's snapshot folder in the Hugging Face cache
    (``chartrl.verl_backend.snapshot``: verl has no revision setting); a hub id without one as it is."""
    model = config.model
    if model.path is None:
        return str(resolved(workdir / "results" / "models" / "base"))
    here = Path.cwd() if workdir == WORKDIR else workdir  # the workflow runs in its working directory
    if (here / model.path).exists():
        return str(resolved(workdir / model.path))
    return model.path if model.revision is None else str(snapshot_folder(model.path, model.revision))


def uses_judge(series: TrainSeries) -> bool:
    return accuracy_signal(series.reward.name, series.reward.params) in ("judge", "panel")


def uses_length(series: TrainSeries) -> bool:
    return "d_length" in series.reward.params and float(series.reward.params["d_length"]) > 0


def reward_kwargs(series: TrainSeries, config: Config, workdir: Path) -> dict[str, Any]:
    """What ``chartrl.verl_backend.rewards`` receives besides each sample: the reward's params, the judge settings
    (only when it judges; the key's variable name, never the key), the tools the policy was offered and the
    tokenizer that counts response tokens (only when the length term is on)."""
    kwargs: dict[str, Any] = {
        "params": to_plain(series.reward.params),
        "tools": list(config.tools.names) if series.tools else [],
        "max_calls": config.tools.max_calls_per_turn,
    }
    if uses_judge(series):
        judge = config.judge_of(series.id).to_dict()  # with the series' own judge keys
        if judge["cache_path"] is not None:
            judge["cache_path"] = str(resolved(workdir / judge["cache_path"]))
        kwargs["judge"] = judge
    if uses_length(series):
        kwargs["tokenizer"] = model_path(config, workdir)
    return kwargs


def _agent_overrides(series: TrainSeries, config: Config, files: SeriesFiles, workdir: Path) -> list[str]:
    rollout = "actor_rollout_ref.rollout"
    common = [override(f"{rollout}.agent.num_workers", config.verl.agent_num_workers)]
    if not series.tools:
        return [override(f"{rollout}.agent.default_agent_loop", SINGLE_TURN_AGENT), *common]
    return [
        override(f"{rollout}.agent.default_agent_loop", TOOL_AGENT),
        override(f"{rollout}.agent.agent_loop_config_path", str(package_dir(workdir) / AGENT_LOOPS_FILE)),
        override(f"{rollout}.custom", {MAX_TOKENS_PER_TURN: config.rollout.max_new_tokens}, add=True),
        *common,
        override(f"{rollout}.multi_turn.enable", True),
        override(f"{rollout}.multi_turn.format", "hermes"),
        override(f"{rollout}.multi_turn.max_assistant_turns", config.tools.max_tool_turns + 1),
        override(f"{rollout}.multi_turn.max_parallel_calls", config.tools.max_calls_per_turn),
        override(f"{rollout}.multi_turn.max_tool_response_length", config.verl.max_tool_response_length),
        override(f"{rollout}.multi_turn.tool_config_path", str(files.tool_config)),
    ]


def _algorithm_overrides(series: TrainSeries, config: Config, length: int) -> list[str]:
    algorithm = get_algorithm(series.algorithm)
    actor = "actor_rollout_ref.actor"
    kl = config.train.kl_coef
    found = [
        override("algorithm.adv_estimator", "grpo"),
        override("algorithm.norm_adv_by_std_in_grpo", algorithm.norm_adv_by_std_in_grpo),
        override("algorithm.use_kl_in_reward", False),
        override(f"{actor}.loss_agg_mode", algorithm.loss_agg_mode),
    ]
    if algorithm.loss_agg_mode == "seq-mean-token-sum-norm":
        found.append(override(f"{actor}.loss_scale_factor", length))
    found.append(override(f"{actor}.use_kl_loss", kl > 0))
    if kl > 0:
        found += [override(f"{actor}.kl_loss_coef", kl), override(f"{actor}.kl_loss_type", "low_var_kl")]
    return found


FLASH_ATTENTION = "flash_attention_2"


def attention_overrides(implementation: str) -> list[str]:
    """The policy's attention (``verl.attn_implementation``) and the padding removal that must go with it.

    verl 0.9.1 builds the actor's and reference's Hugging Face config with
    ``attn_implementation=override_config.get("attn_implementation", "flash_attention_2")``
    (``verl/workers/config/model.py``, ``HFModelConfig.__post_init__``), so without this override every FSDP
    worker asks transformers for flash-attn, which ``requirements/gpu.lock`` (``verl[vllm]``) does not install.
    ``sdpa`` is torch's own kernel. ``use_remove_padding`` (verl's default: true) must go off with it: for
    Qwen2.5-VL it makes ``apply_monkey_patch`` (``verl/models/transformers/monkey_patch.py``) replace the
    attention forward with ``qwen2_vl_attn_forward``, which calls flash-attn's varlen kernel whatever
    ``attn_implementation`` says (``verl/models/transformers/qwen2_vl.py``). The padded path costs memory and
    time on short sequences, not correctness."""
    prefix = "actor_rollout_ref.model"
    return [
        override(f"{prefix}.override_config.attn_implementation", implementation, add=True),
        override(f"{prefix}.use_remove_padding", implementation == FLASH_ATTENTION),
    ]


def model_overrides(config: Config, workdir: Path, model: str | None = None) -> list[str]:
    prefix = "actor_rollout_ref.model"
    found = [
        override(f"{prefix}.path", model or model_path(config, workdir)),
        override(f"{prefix}.enable_gradient_checkpointing", config.verl.gradient_checkpointing),
        *attention_overrides(config.verl.attn_implementation),
    ]
    lora = config.train.lora
    if lora.enabled:
        found += [
            override(f"{prefix}.lora_rank", lora.r),
            override(f"{prefix}.lora_alpha", lora.alpha),
            override(f"{prefix}.target_modules", lora.targets),
            override("actor_rollout_ref.rollout.load_format", "safetensors"),
        ]
        if lora.exclude_modules is not None:
            found.append(override(f"{prefix}.exclude_modules", lora.exclude_modules))
    return found


def actor_overrides(config: Config) -> list[str]:
    """The actor's optimiser, batches, clip and offload. verl 0.9.1's FSDP engine clips gradients with
    ``actor.optim.clip_grad`` (``verl/workers/engine/fsdp/transformer_impl.py``); ``actor.grad_clip`` and
    ``actor.freeze_vision_tower`` are accepted and never read, so neither is set (``checks.ignored_settings``
    says what a config asks that verl does not do)."""
    train, verl = config.train, config.verl
    actor, ref = "actor_rollout_ref.actor", "actor_rollout_ref.ref"
    return [
        override(f"{actor}.optim.lr", train.lr),
        override(f"{actor}.optim.lr_warmup_steps", train.lr_warmup_steps),
        override(f"{actor}.optim.lr_scheduler_type", train.lr_scheduler),
        override(f"{actor}.optim.min_lr_ratio", train.min_lr_ratio),
        override(f"{actor}.optim.weight_decay", train.weight_decay),
        override(f"{actor}.optim.betas", list(verl.adam_betas)),
        override(f"{actor}.optim.clip_grad", train.grad_clip),
        override(f"{actor}.ppo_mini_batch_size", verl.ppo_mini_batch_size),
        override(f"{actor}.ppo_micro_batch_size_per_gpu", verl.ppo_micro_batch_size_per_gpu),
        override(f"{actor}.ppo_epochs", train.ppo_epochs),
        override(f"{actor}.clip_ratio", train.clip_ratio),
        override(f"{actor}.clip_ratio_low", train.clip_low),
        override(f"{actor}.clip_ratio_high", train.clip_high),
        override(f"{actor}.entropy_coeff", 0),
        override(f"{actor}.fsdp_config.param_offload", verl.param_offload),
        override(f"{actor}.fsdp_config.optimizer_offload", verl.optimizer_offload),
        override(f"{ref}.fsdp_config.param_offload", verl.param_offload),
        override(f"{ref}.log_prob_micro_batch_size_per_gpu", verl.log_prob_micro_batch_size_per_gpu),
    ]


def rollout_overrides(config: Config, length: int) -> list[str]:
    rollout = "actor_rollout_ref.rollout"
    return [
        override(f"{rollout}.name", config.verl.rollout_engine),
        override(f"{rollout}.n", config.rollout.n),
        override(f"{rollout}.temperature", config.rollout.temperature),
        override(f"{rollout}.top_p", config.rollout.top_p),
        override(f"{rollout}.tensor_model_parallel_size", config.verl.tensor_model_parallel_size),
        override(f"{rollout}.gpu_memory_utilization", config.verl.gpu_memory_utilization),
        override(f"{rollout}.log_prob_micro_batch_size_per_gpu", config.verl.log_prob_micro_batch_size_per_gpu),
        override(f"{rollout}.response_length", length),
        # rollout.kv_reuse on verl: the engine's automatic prefix caching reuses the previous turn's keys/values
        override(f"{rollout}.enable_prefix_caching", config.rollout.kv_reuse),
    ]


def data_overrides(
    config: Config, train_file: Path, val_file: Path, length: int, batch: int, *, drop_overlong: bool = True
) -> list[str]:
    """The data files and lengths. ``drop_overlong``: verl drops a prompt longer than ``verl.max_prompt_length``
    (a train or validation question); a test generation keeps every question, so an over-long one fails its agent
    loop and the job's coverage check names it (``chartrl.verl_backend.generations``)."""
    return [
        override("data.train_files", str(train_file)),
        override("data.val_files", str(val_file)),
        override("data.prompt_key", "prompt"),
        override("data.image_key", "images"),
        override("data.max_prompt_length", config.verl.max_prompt_length),
        override("data.max_response_length", length),
        override("data.train_batch_size", batch),
        override("data.filter_overlong_prompts", drop_overlong),
        override("data.truncation", "error"),
        override("data.return_raw_chat", True),
        override("data.seed", config.train.seed),
        *(  # verl's apply_chat_template_kwargs is {}: each key is added
            override(f"data.apply_chat_template_kwargs.{key}", value, add=True)
            for key, value in config.verl.chat_template_kwargs.items()
        ),
    ]


def reward_overrides(name: str, kwargs: Mapping[str, Any]) -> list[str]:
    return [
        override("reward.custom_reward_function.path", REWARD_MODULE),
        override("reward.custom_reward_function.name", name),
        override("reward.custom_reward_function.reward_kwargs", dict(kwargs), add=True),
    ]


def cluster_overrides(config: Config) -> list[str]:
    return [
        override("trainer.nnodes", config.verl.nnodes),
        override("trainer.n_gpus_per_node", config.verl.n_gpus_per_node),
    ]


def train_series(config: Config, series_id: str) -> TrainSeries:
    series = config.series.get(series_id)
    if not isinstance(series, TrainSeries):
        train_ids = ", ".join(s.id for s in config.train_series)
        raise ConfigError(f"series '{series_id}' is not a train series; train series are: {train_ids}")
    return series


def train_overrides(config: Config, series_id: str, workdir: str | Path = ".") -> list[str]:
    """The overrides of series ``series_id``'s training job (without MLFLOW_RUN_ID: see :func:`mlflow_overrides`)."""
    workdir = resolved(workdir)
    series = train_series(config, series_id)
    config = config.for_train_series(series_id)  # with the series' own train keys (a LoRA variant)
    files = SeriesFiles.of(series_id, workdir)
    length = response_length(series, config)
    train = config.train
    return [
        *model_overrides(config, workdir),
        *data_overrides(config, files.train_data, files.val_data, length, train.prompts_per_step),
        override("data.val_max_samples", train.val_rows),
        *rollout_overrides(config, length),
        *_agent_overrides(series, config, files, workdir),
        *actor_overrides(config),
        *_algorithm_overrides(series, config, length),
        *reward_overrides(series.reward.name, reward_kwargs(series, config, workdir)),
        override("trainer.logger", ["console", "mlflow"]),
        override("trainer.project_name", config.mlflow.experiment),
        override("trainer.experiment_name", f"{series_id}/train"),
        *cluster_overrides(config),
        override("trainer.total_training_steps", train.steps),
        override("trainer.total_epochs", NEVER_ENDING_EPOCHS),
        override("trainer.test_freq", train.val_every),
        override("trainer.val_before_train", config.verl.val_before_train),
        override("trainer.save_freq", train.checkpoint_every),
        override("trainer.max_actor_ckpt_to_keep", train.keep_last),
        override("trainer.default_local_dir", str(files.checkpoints)),
        override("trainer.resume_mode", "auto"),
        override("trainer.validation_data_dir", str(files.val_generations)),
        override("trainer.log_val_generations", 0),
        *config.verl.extra_overrides,
    ]


def generation_overrides(
    config: Config,
    series_id: str,
    *,
    model_dir: str | Path,
    data_file: str | Path,
    dump_dir: str | Path,
    workdir: str | Path = ".",
    n: int = 1,
    greedy: bool = True,
    limit: int | None = None,
) -> list[str]:
    """The overrides of a generation job for eval series ``series_id``: verl's ``trainer.val_only`` on
    ``data_file`` (the test split converted with :func:`chartrl.verl_backend.data.write_verl_dataset` for the
    train series ``of``) with the merged checkpoint ``model_dir``, dumping every generation as JSONL into
    ``dump_dir`` (``chartrl.verl_backend.generations`` turns it into the generations contract). The policy sees
    what it saw in training: the same prompt, agent loop, tools and response budget."""
    workdir = resolved(workdir)
    series = config.series.get(series_id)
    if not isinstance(series, EvalSeries):
        eval_ids = ", ".join(s.id for s in config.eval_series)
        raise ConfigError(f"series '{series_id}' is not an eval series; eval series are: {eval_ids}")
    trained = train_series(config, series.of)
    config = config.for_train_series(series.of)  # the generating policy's own train keys (its LoRA)
    files = SeriesFiles.of(series.of, workdir)
    length = response_length(trained, config)
    data_file, dump_dir = resolved(data_file), resolved(dump_dir)
    val = "actor_rollout_ref.rollout.val_kwargs"
    sampling = (
        [override(f"{val}.do_sample", False), override(f"{val}.temperature", 0)]
        if greedy
        else [override(f"{val}.do_sample", True), override(f"{val}.temperature", config.rollout.temperature)]
    )
    start = series.checkpoint == "start"  # the starting model itself: model.path, nothing merged, no adapter
    model_dir = Path(model_path(config, workdir)) if start else resolved(model_dir)
    lora = (
        # verl's merger writes a LoRA run as the base weights plus lora_adapter/ (chartrl.verl_backend.checkpoints)
        [override("actor_rollout_ref.model.lora_adapter_path", str(model_dir / "lora_adapter"))]
        if config.train.lora.enabled and not start
        else []
    )
    return [
        *model_overrides(config, workdir, model=model_path(config, workdir) if start else str(model_dir)),
        *lora,
        *data_overrides(config, data_file, data_file, length, config.train.prompts_per_step, drop_overlong=False),
        override("data.val_max_samples", limit if limit is not None else -1),
        *rollout_overrides(config, length),
        *_agent_overrides(trained, config, files, workdir),
        override(f"{val}.n", n),
        *sampling,
        *actor_overrides(config),
        *_algorithm_overrides(trained, config, length),
        *reward_overrides(GENERATION_REWARD, {}),
        override("trainer.logger", ["console"]),
        override("trainer.project_name", config.mlflow.experiment),
        override("trainer.experiment_name", f"{series_id}/generate"),
        *cluster_overrides(config),
        override("trainer.val_only", True),
        override("trainer.val_before_train", True),
        override("trainer.resume_mode", "disable"),
        override("trainer.validation_data_dir", str(dump_dir)),
        *config.verl.extra_overrides,
    ]


def eval_overrides(config: Config, series_id: str, workdir: str | Path = ".") -> list[str]:
    """The generation job of eval series ``series_id`` as the generate rule runs it: its files under
    ``results/eval/{series}/verl/`` and the ``evaluate:`` sampling (n, greedy, limit)."""
    paths = GenerationFiles.of(series_id, workdir).paths()
    evaluate = config.evaluate
    return generation_overrides(
        config, series_id, workdir=workdir, n=evaluate.n, greedy=evaluate.greedy, limit=evaluate.limit, **paths
    )


def mlflow_overrides(tracking_uri: str, run_id: str) -> list[str]:
    """Where verl's MLflow logger writes: the series' run. Set as Ray runtime-env variables, so every actor of
    verl's job sees them (verl reads ``MLFLOW_TRACKING_URI`` and attaches to ``MLFLOW_RUN_ID``)."""
    env = "ray_kwargs.ray_init.runtime_env.env_vars"
    return [
        override(f"{env}.MLFLOW_TRACKING_URI", tracking_uri, add=True),
        override(f"{env}.MLFLOW_RUN_ID", run_id, add=True),
    ]


def hydra_overrides(output_dir: str | Path) -> list[str]:
    """Hydra's own settings for main_ppo (not part of verl's config): its output folder under the run."""
    return [override("hydra.run.dir", str(Path(output_dir).resolve()))]
