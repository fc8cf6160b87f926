"""The workflow configuration: loaded once, validated with actionable errors, typed and frozen.

One JSON Schema (``workflow/schemas/config.schema.yaml``) holds every key, its default and its documentation.
The Snakefile validates ``config`` with it through ``snakemake.utils.validate``; :func:`parse_config` applies the
same schema here (so ``chartrl`` commands run outside Snakemake get the same checks and defaults) and then the
checks a schema cannot express: an eval series must name a train series, every dataset a series or a split
list refers to must exist and have the needed splits.

The typed objects are views of the validated config. Values derived from it (the dataset a series resolves to)
live on these objects; nothing is written back into the dict, so the config that is logged is the config that ran.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

import jsonschema
import yaml
from jsonschema import Draft202012Validator

from chartrl.errors import ChartrlError

SPLITS = ("train", "val", "test")
DEFAULT_CONFIG_FILES = ("config/config.yaml", "config/series.yaml")


class ConfigError(ChartrlError, ValueError):
    """A configuration value is wrong; the message names the key, the value and the fix."""

    exit_code = 2


# --------------------------------------------------------------------------------------------------------------
# Loading and schema validation
# --------------------------------------------------------------------------------------------------------------


@cache
def config_schema() -> dict[str, Any]:
    """The JSON Schema shared with the Snakefile (shipped in the package as a link to workflow/schemas/)."""
    text = resources.files("chartrl").joinpath("schemas/config.schema.yaml").read_text()
    return yaml.safe_load(text)


def _default_filling_validator() -> type:
    """A Draft 2020-12 validator that fills ``default`` values, as ``snakemake.utils.validate`` does."""
    validate_properties = Draft202012Validator.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for key, subschema in properties.items():
                if isinstance(subschema, dict) and "default" in subschema:
                    instance.setdefault(key, copy.deepcopy(subschema["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(Draft202012Validator, {"properties": set_defaults})


def merge_config(base: dict[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge ``overlay`` into ``base`` (in place) the way Snakemake merges ``--configfile`` overlays:
    mappings merge key by key, every other value (lists included) replaces the old one."""
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            merge_config(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def read_config_files(paths: Iterable[str | Path]) -> dict[str, Any]:
    """Read and merge YAML config files in order, naming the file in every error."""
    merged: dict[str, Any] = {}
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist (working directory: {Path.cwd()})")
        try:
            data = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"config file {path} is not valid YAML: {err}") from err
        if not isinstance(data, dict):
            raise ConfigError(f"config file {path} must hold a mapping at the top level, not {type(data).__name__}")
        merge_config(merged, data)
    return merged


def _key_path(path: Sequence[Any]) -> str:
    return ".".join(str(part) for part in path) or "<top level>"


def _describe_error(error: jsonschema.ValidationError, prefix: Sequence[str] = ()) -> str:
    """One line per schema error: the key, the bad value, what is allowed (and, for a key that takes one of
    several forms, the key's own description). ``prefix`` names where a validated fragment sits."""
    message = _describe_leaf(error, prefix)
    parent = error.parent
    if parent is not None and parent.validator in {"oneOf", "anyOf"} and "description" in parent.schema:
        message += f" ({parent.schema['description']})"
    return message


def _describe_leaf(error: jsonschema.ValidationError, prefix: Sequence[str] = ()) -> str:
    key = _key_path([*prefix, *error.absolute_path])
    value = json.dumps(error.instance, default=str)
    if len(value) > 80:
        value = value[:77] + "..."
    kind = error.validator
    if kind == "enum":
        allowed = ", ".join(str(v) for v in error.validator_value)
        return f"config key '{key}': value {value} is not allowed; allowed values: {allowed}"
    if kind == "const":
        return f"config key '{key}': value {value} must be {json.dumps(error.validator_value)}"
    if kind == "additionalProperties":
        known = sorted(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(known))
        return (
            f"config key '{key}': unknown key(s) {', '.join(unknown)}; allowed keys: {', '.join(known)} "
            "(check the spelling, or see workflow/schemas/config.schema.yaml)"
        )
    if kind == "required":
        return f"config key '{key}': {error.message}; add it (see workflow/schemas/config.schema.yaml)"
    if kind == "type":
        return f"config key '{key}': value {value} has the wrong type; expected {error.validator_value}"
    if kind in {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems"}:
        return f"config key '{key}': value {value} violates {kind} {error.validator_value}"
    if kind == "pattern":
        return f"config key '{key}': value {value} must match {error.validator_value} (letters, digits, underscores)"
    if kind == "propertyNames":
        return f"config key '{key}': {error.message}"
    return f"config key '{key}': {error.message}"


def _leaf_errors(errors: Iterable[jsonschema.ValidationError]) -> list[jsonschema.ValidationError]:
    """Expand combinator errors (allOf/if-then/oneOf) into the errors a person can act on."""
    leaves = []
    for error in errors:
        if error.context and error.validator in {"oneOf", "anyOf"}:
            leaves.extend(_leaf_errors([min(error.context, key=jsonschema.exceptions.relevance)]))
        else:
            leaves.append(error)
    return leaves


def _validate(instance: Mapping[str, Any], schema: Mapping[str, Any], prefix: Sequence[str] = ()) -> dict[str, Any]:
    resolved = copy.deepcopy(dict(instance))
    validator = _default_filling_validator()(schema)
    errors = sorted(_leaf_errors(validator.iter_errors(resolved)), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = sorted({_describe_error(e, prefix) for e in errors})
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(lines))
    return resolved


def validate_schema(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Validate against the schema and return a copy with every default filled; raise ConfigError listing
    every problem found."""
    return _validate(raw, config_schema())


def validate_fragment(instance: Mapping[str, Any], definition: str, key: str) -> dict[str, Any]:
    """Validate one section against ``$defs/<definition>`` of the schema (defaults filled), naming keys as
    ``<key>.<...>`` in errors: for sections that arrive on their own (a reward given on the command line, the
    judge settings handed to a verl reward worker)."""
    defs = config_schema()["$defs"]
    return _validate(instance, {"$defs": defs, **defs[definition]}, prefix=key.split("."))


def validate_section(name: str, data: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Validate one top-level section (``model``, ``tools``, ...) alone, defaults filled: what a job that was
    handed only its slice of the config (or nothing) runs with."""
    schema = config_schema()
    if name not in schema["properties"]:
        raise KeyError(f"unknown config section {name!r}; known: {', '.join(sorted(schema['properties']))}")
    return _validate(data or {}, {"$defs": schema["$defs"], **schema["properties"][name]}, prefix=[name])


# --------------------------------------------------------------------------------------------------------------
# Typed views
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MlflowSettings:
    tracking_uri: str
    """MLflow tracking store; the default is a SQLite file under results/."""
    experiment: str
    """One MLflow experiment per config."""


@dataclass(frozen=True)
class DatasetConfig:
    name: str
    """The key under ``datasets:``; also the folder under results/data/."""
    source: str
    """Which reader builds it (``chartrl.data.sources``)."""
    splits: tuple[str, ...]
    """The splits this dataset provides."""
    max_reject_fraction: float
    """A split fails when more than this fraction of its rows is rejected."""
    max_image_pixels: int
    """Decompression-bomb guard."""
    options: Mapping[str, Any]
    """Everything else of the dataset's section, as validated by the schema for its source."""

    def to_dict(self) -> dict[str, Any]:
        """The resolved section as it ran (what the data rule passes on and MLflow logs)."""
        return {
            "name": self.name,
            "source": self.source,
            "splits": list(self.splits),
            "max_reject_fraction": self.max_reject_fraction,
            "max_image_pixels": self.max_image_pixels,
            "options": to_plain(self.options),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DatasetConfig:
        return cls(
            name=data["name"],
            source=data["source"],
            splits=tuple(data["splits"]),
            max_reject_fraction=float(data["max_reject_fraction"]),
            max_image_pixels=int(data["max_image_pixels"]),
            options=_frozen(data["options"]),
        )


@dataclass(frozen=True)
class RewardSpec:
    name: str
    """Reward registry name."""
    params: Mapping[str, Any]
    """The reward's parameters, defaults filled."""


def parse_reward_spec(spec: Mapping[str, Any], key: str = "reward") -> RewardSpec:
    """A reward given on its own (``{"name": ..., <params>}``), validated against the schema's reward definition
    with its defaults filled."""
    resolved = validate_fragment(spec, "reward", key)
    name = resolved.pop("name")
    return RewardSpec(name=name, params=_frozen(resolved))


JUDGE_IDENTITY_KEYS = (
    "backend",
    "model",
    "base_url",
    "api_key_env",
    "template",
    "json_mode",
    "temperature",
    "max_tokens",
    "numeric_tolerance",
    "string_match",
)
"""The judge keys a panel member may set (``$defs/judge_identity`` of the schema)."""


@dataclass(frozen=True)
class PanelMember:
    name: str
    """The member's name; its verdicts are shown and logged under it."""
    overrides: Mapping[str, Any]
    """The judge keys this member sets; every other key comes from the top-level judge settings."""


@dataclass(frozen=True)
class PanelConfig:
    combine: str
    """``majority`` (ties are incorrect) or ``mean``."""
    members: tuple[PanelMember, ...]


@dataclass(frozen=True)
class JudgeConfig:
    """The ``judge:`` section (documentation and defaults: ``$defs/judge`` of the schema)."""

    backend: str
    """``reference`` (offline answer equivalence, not an LLM) or ``openai`` (OpenAI-compatible endpoint)."""
    model: str | None
    base_url: str | None
    api_key_env: str
    """The NAME of the environment variable with the key (never the key)."""
    template: str
    """Judge prompt template name (src/chartrl/prompts/<template>.jinja)."""
    json_mode: str
    temperature: float
    max_tokens: int
    numeric_tolerance: float
    string_match: str
    max_response_chars: int
    max_concurrency: int
    max_retries: int
    backoff_initial_s: float
    backoff_max_s: float
    timeout_s: float
    max_judge_failure_fraction: float
    """Above this share of the sent items ending as judge failures, scoring fails naming the endpoint."""
    cache_path: str | None
    panel: PanelConfig

    def member(self, member: PanelMember) -> JudgeConfig:
        """The full settings of one panel member: the top-level settings with the member's keys replaced (a
        derived object; the config itself is not changed)."""
        return dataclasses.replace(self, **member.overrides)

    def to_dict(self) -> dict[str, Any]:
        """The section as it runs (the form :meth:`from_dict` and a verl reward worker read)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "panel"}
        data["panel"] = {
            "combine": self.panel.combine,
            "members": [{"name": m.name, **to_plain(m.overrides)} for m in self.panel.members],
        }
        return data

    @classmethod
    def from_dict(cls, section: Mapping[str, Any]) -> JudgeConfig:
        """Validate a ``judge:`` section (defaults filled) and return its typed view."""
        resolved = validate_fragment(section, "judge", "judge")
        panel = resolved.pop("panel")
        members = tuple(
            PanelMember(name=m["name"], overrides=_frozen({k: v for k, v in m.items() if k != "name"}))
            for m in panel["members"]
        )
        return cls(**resolved, panel=PanelConfig(combine=panel["combine"], members=members))


@dataclass(frozen=True)
class TrainSeries:
    id: str
    generation: str
    description: str
    tools: bool
    reward: RewardSpec
    algorithm: str
    dataset: str
    """Resolved: the series' own ``dataset`` or ``train.dataset``."""
    kind: str = "train"


@dataclass(frozen=True)
class EvalSeries:
    id: str
    generation: str
    description: str
    of: str
    checkpoint: str | int
    scorers: tuple[str, ...]
    dataset: str
    """Resolved: the series' own ``dataset`` or ``evaluate.dataset``."""
    split: str
    kind: str = "eval"


@dataclass(frozen=True)
class TinyModelConfig:
    """Sizes of the embedded default's tiny Qwen2.5-VL (documented in the schema under model.tiny)."""

    seed: int
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vision_depth: int
    vision_hidden_size: int
    vision_intermediate_size: int
    vision_num_heads: int


@dataclass(frozen=True)
class ModelConfig:
    path: str | None
    """A pretrained Qwen2.5-VL (folder or hub id); None builds the tiny model."""
    tiny: TinyModelConfig
    min_pixels: int
    max_pixels: int
    """Image processor bounds: at most max_pixels / 784 image tokens per image."""


@dataclass(frozen=True)
class PromptConfig:
    tool_template: str
    no_tool_template: str
    list_labels: bool


@dataclass(frozen=True)
class ToolsConfig:
    names: tuple[str, ...]
    max_calls_per_turn: int
    max_tool_turns: int


@dataclass(frozen=True)
class RolloutConfig:
    n: int
    temperature: float
    top_p: float
    max_new_tokens: int
    batch_size: int


@dataclass(frozen=True)
class WarmstartConfig:
    steps: int
    batch_size: int
    lr: float
    warmup_steps: int
    min_lr_ratio: float
    weight_decay: float
    grad_clip: float
    seed: int
    tool_rate: float
    correct_label_rate: float
    correct_label_rate_start: float | None
    no_tool_rate: float
    perception_rate: float
    perception_steps: int
    text_steps: int
    text_restate_rate: float
    eval_rows: int
    threads: int


@dataclass(frozen=True)
class LoraSettings:
    enabled: bool
    r: int
    alpha: int
    dropout: float
    target_modules: tuple[str, ...]


@dataclass(frozen=True)
class TrainConfig:
    """The local trainer's settings (schema: train)."""

    dataset: str
    steps: int
    prompts_per_step: int
    lr: float
    lr_warmup_steps: int
    lr_scheduler: str
    min_lr_ratio: float
    weight_decay: float
    clip_ratio: float
    clip_ratio_low: float | None
    clip_ratio_high: float | None
    kl_coef: float
    ppo_epochs: int
    micro_batch_size: int
    grad_clip: float
    exclude_degenerate: bool
    val_every: int
    val_rows: int
    checkpoint_every: int
    keep_last: int
    seed: int
    threads: int
    lora: LoraSettings

    @property
    def clip_low(self) -> float:
        """The lower PPO clip: ``clip_ratio_low``, else ``clip_ratio``."""
        return self.clip_ratio if self.clip_ratio_low is None else self.clip_ratio_low

    @property
    def clip_high(self) -> float:
        """The upper PPO clip: ``clip_ratio_high``, else ``clip_ratio``."""
        return self.clip_ratio if self.clip_ratio_high is None else self.clip_ratio_high

    def lr_at(self, step: int) -> float:
        """The learning rate of update ``step`` (1-based), from verl's own schedule functions
        (``verl.utils.torch_functional``), which the verl backend's actor uses with the same settings."""
        return self.lr * lr_factor(self.lr_scheduler, self.lr_warmup_steps, self.steps, self.min_lr_ratio, step)

    def saves(self, step: int) -> bool:
        """Whether a run of these settings writes a checkpoint at ``step`` (both backends save every
        ``checkpoint_every`` steps and the local trainer also after the last step)."""
        return 0 < step <= self.steps and (step % self.checkpoint_every == 0 or step == self.steps)


def lr_factor(scheduler: str, warmup_steps: int, total_steps: int, min_lr_ratio: float, step: int) -> float:
    """The share of the peak learning rate at update ``step`` (1-based): verl's
    ``get_constant_schedule_with_warmup`` / ``get_cosine_schedule_with_warmup``, which verl's FSDP actor steps
    after every update, so update k runs at the schedule's value for k - 1."""
    import torch
    from verl.utils.torch_functional import get_constant_schedule_with_warmup, get_cosine_schedule_with_warmup

    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    if scheduler == "cosine":
        schedule = get_cosine_schedule_with_warmup(optimizer, warmup_steps, total_steps, min_lr_ratio=min_lr_ratio)
    else:
        schedule = get_constant_schedule_with_warmup(optimizer, warmup_steps)
    return float(schedule.lr_lambdas[0](step - 1))


def train_config(section: Mapping[str, Any]) -> TrainConfig:
    lora = section["lora"]
    return TrainConfig(**{**section, "lora": LoraSettings(**{**lora, "target_modules": tuple(lora["target_modules"])})})


@dataclass(frozen=True)
class VerlConfig:
    """The verl backend's settings beyond train/rollout (schema: verl; every key documented there)."""

    nnodes: int
    n_gpus_per_node: int
    ppo_mini_batch_size: int
    """Prompts per PPO mini-batch (verl multiplies it by rollout.n)."""
    ppo_micro_batch_size_per_gpu: int
    log_prob_micro_batch_size_per_gpu: int
    tensor_model_parallel_size: int
    gpu_memory_utilization: float
    rollout_engine: str
    max_prompt_length: int
    max_tool_response_length: int
    attn_implementation: str
    """The policy's attention in verl's FSDP workers (sdpa, flash_attention_2, eager)."""
    gradient_checkpointing: bool
    param_offload: bool
    optimizer_offload: bool
    agent_num_workers: int
    val_before_train: bool
    extra_overrides: tuple[str, ...]

    @property
    def n_gpus(self) -> int:
        return self.nnodes * self.n_gpus_per_node


def verl_config(section: Mapping[str, Any]) -> VerlConfig:
    return VerlConfig(**{**section, "extra_overrides": tuple(section["extra_overrides"])})


@dataclass(frozen=True)
class RayConfig:
    """The Ray launcher and the local head (schema: ray)."""

    address: str | None
    """A running cluster's job API; the environment's RAY_ADDRESS wins over it."""
    head_port: int | None
    temp_dir: str | None
    num_cpus: int | None
    num_gpus: int | None
    job_gpus: float
    forward_env: tuple[str, ...]
    stop_timeout_s: float


def ray_config(section: Mapping[str, Any]) -> RayConfig:
    return RayConfig(**{**section, "forward_env": tuple(section["forward_env"])})


@dataclass(frozen=True)
class EvaluateConfig:
    """Test evaluation settings (schema: evaluate)."""

    dataset: str
    split: str
    n: int
    greedy: bool
    limit: int | None
    seed: int
    threads: int
    bootstrap_samples: int
    confidence: float
    gallery_size: int


@dataclass(frozen=True)
class Config:
    resolved: Mapping[str, Any]
    """The validated config with defaults filled (read-only)."""
    mlflow: MlflowSettings
    backend: str
    launcher: str
    model: ModelConfig
    prompts: PromptConfig
    tools: ToolsConfig
    rollout: RolloutConfig
    warmstart: WarmstartConfig
    train: TrainConfig
    evaluate: EvaluateConfig
    datasets: Mapping[str, DatasetConfig]
    series: Mapping[str, TrainSeries | EvalSeries]
    extra_datasets: tuple[str, ...]
    extra_seeds: tuple[int, ...]
    samples_in_card: int
    min_box_coverage: float
    """The least share of a tool series' train questions whose chart has label boxes (data.min_box_coverage)."""
    judge: JudgeConfig
    verl: VerlConfig
    ray: RayConfig

    @property
    def model_path(self) -> str | None:
        return self.model.path

    @property
    def train_series(self) -> list[TrainSeries]:
        return [s for s in self.series.values() if isinstance(s, TrainSeries)]

    @property
    def eval_series(self) -> list[EvalSeries]:
        return [s for s in self.series.values() if isinstance(s, EvalSeries)]

    def keep_steps(self, train_id: str) -> tuple[int, ...]:
        """The checkpoint steps of train series ``train_id`` that an eval series names: saved and never pruned
        (``keep_last`` keeps only the newest, so an early named step would otherwise be gone when it is evaluated)."""
        steps = {s.checkpoint for s in self.eval_series if s.of == train_id and isinstance(s.checkpoint, int)}
        return tuple(sorted(steps))

    def tool_train_datasets(self) -> tuple[str, ...]:
        """Datasets whose train split a tool series trains on (their box coverage is checked)."""
        return tuple(dict.fromkeys(s.dataset for s in self.train_series if s.tools))

    def needed_splits(self) -> dict[str, tuple[str, ...]]:
        """Dataset -> the splits the pipeline builds: what the series read, plus every split of the
        ``extra_datasets``. Ordered as the config lists datasets, splits as train, val, test."""
        wanted: dict[str, set[str]] = {}
        for series in self.train_series:
            wanted.setdefault(series.dataset, set()).update({"train", "val"})
        for series in self.eval_series:
            wanted.setdefault(series.dataset, set()).add(series.split)
        for name in self.extra_datasets:
            wanted.setdefault(name, set()).update(self.datasets[name].splits)
        return {name: tuple(s for s in SPLITS if s in wanted[name]) for name in self.datasets if name in wanted}


def model_config(section: Mapping[str, Any]) -> ModelConfig:
    return ModelConfig(
        path=section["path"],
        tiny=TinyModelConfig(**section["tiny"]),
        min_pixels=section["min_pixels"],
        max_pixels=section["max_pixels"],
    )


def tools_config(section: Mapping[str, Any]) -> ToolsConfig:
    return ToolsConfig(**{**section, "names": tuple(section["names"])})


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def to_plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [to_plain(v) for v in value]
    return value


_DATASET_COMMON_KEYS = {"source", "max_reject_fraction", "max_image_pixels"}


def _dataset_splits(section: Mapping[str, Any]) -> tuple[str, ...]:
    source = section["source"]
    if source in {"geoqa_r1v", "geoqa_mc"}:
        names = section["files"]
    else:
        names = section["splits"]
    return tuple(s for s in SPLITS if s in names)


def _dataset_config(name: str, section: Mapping[str, Any], shared: Mapping[str, Any]) -> DatasetConfig:
    options = {k: v for k, v in section.items() if k not in _DATASET_COMMON_KEYS}
    return DatasetConfig(
        name=name,
        source=section["source"],
        splits=_dataset_splits(section),
        max_reject_fraction=float(section.get("max_reject_fraction", shared["max_reject_fraction"])),
        max_image_pixels=int(section.get("max_image_pixels", shared["max_image_pixels"])),
        options=_frozen(options),
    )


def _series(sid: str, section: Mapping[str, Any], resolved: Mapping[str, Any]) -> TrainSeries | EvalSeries:
    if section["kind"] == "train":
        reward = dict(section["reward"])
        return TrainSeries(
            id=sid,
            generation=section["generation"],
            description=section["description"],
            tools=section["tools"],
            reward=RewardSpec(name=reward.pop("name"), params=_frozen(reward)),
            algorithm=section["algorithm"],
            dataset=section.get("dataset", resolved["train"]["dataset"]),
        )
    return EvalSeries(
        id=sid,
        generation=section["generation"],
        description=section["description"],
        of=section["of"],
        checkpoint=section["checkpoint"],
        scorers=tuple(section["scorers"]),
        dataset=section.get("dataset", resolved["evaluate"]["dataset"]),
        split=resolved["evaluate"]["split"],
    )


def _cross_check(config: Config) -> None:
    """The rules a schema cannot express; every problem is reported at once."""
    problems: list[str] = []
    defined = ", ".join(config.datasets)
    train_ids = [s.id for s in config.train_series]

    def check_dataset(key: str, name: str, splits: Iterable[str]) -> None:
        if name not in config.datasets:
            problems.append(
                f"config key '{key}': dataset '{name}' is not defined; defined datasets: {defined} "
                "(add it under 'datasets:' or pick one of these)"
            )
            return
        missing = [s for s in splits if s not in config.datasets[name].splits]
        if missing:
            problems.append(
                f"config key '{key}': dataset '{name}' has no split(s) {', '.join(missing)} "
                f"(it provides {', '.join(config.datasets[name].splits)}); add them to datasets.{name}"
            )

    for series in config.series.values():
        if isinstance(series, TrainSeries):
            key = (
                f"series.{series.id}.dataset" if "dataset" in config.resolved["series"][series.id] else "train.dataset"
            )
            check_dataset(key, series.dataset, ("train", "val"))
        else:
            key = (
                f"series.{series.id}.dataset"
                if "dataset" in config.resolved["series"][series.id]
                else "evaluate.dataset"
            )
            check_dataset(key, series.dataset, (series.split,))
            if series.of not in train_ids:
                problems.append(
                    f"config key 'series.{series.id}.of': value '{series.of}' names no train series; "
                    f"train series are: {', '.join(train_ids) or '(none)'}"
                )
            elif isinstance(series.checkpoint, int) and not config.train.saves(series.checkpoint):
                problems.append(_unsaved_step_problem(series, config.train))
    for i, name in enumerate(config.extra_datasets):
        check_dataset(f"extra_datasets[{i}]", name, ())
    for name, dataset in config.datasets.items():
        opts = dataset.options
        if dataset.source == "synthchart" and opts["min_categories"] > opts["max_categories"]:
            problems.append(
                f"config key 'datasets.{name}.min_categories': value {opts['min_categories']} is larger than "
                f"max_categories ({opts['max_categories']}); make min_categories <= max_categories"
            )
    problems += judge_problems(config.judge)
    problems += prompt_problems(config.prompts)
    if config.ray.address is not None:
        from chartrl.launch import ray_address_problem

        problem = ray_address_problem(config.ray.address, "config key 'ray.address': value")
        problems += [problem] if problem else []
    if config.backend == "verl":
        from chartrl.verl_backend.checks import batch_problems

        problems += batch_problems(config.train, config.rollout, config.verl)
    if problems:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(dict.fromkeys(problems)))


def _unsaved_step_problem(series: EvalSeries, train: TrainConfig) -> str:
    step, every = series.checkpoint, train.checkpoint_every
    saved = f"every {every} steps up to train.steps {train.steps}"
    if step > train.steps:
        fix = f"raise train.steps to at least {step}, or name a step up to {train.steps}"
    else:
        lower, upper = (step // every) * every, (step // every + 1) * every
        fix = f"name step {lower or every} or {upper}, or set train.checkpoint_every to a divisor of {step}"
    return (
        f"config key 'series.{series.id}.checkpoint': step {step} of train series {series.of} is never saved "
        f"(checkpoints are written {saved}); {fix}"
    )


def prompt_problems(prompts: PromptConfig) -> list[str]:
    from chartrl.prompts import template_names

    known = template_names()
    return [
        f"config key 'prompts.{key}': template '{name}' does not exist; known templates: {', '.join(known)} "
        "(src/chartrl/prompts/<name>.jinja)"
        for key, name in (("tool_template", prompts.tool_template), ("no_tool_template", prompts.no_tool_template))
        if name not in known
    ]


def judge_problems(judge: JudgeConfig) -> list[str]:
    """What the schema cannot check about the judge: an ``openai`` judge (top level or panel member) needs a
    base_url and a model, and every template must exist."""
    from chartrl.prompts import template_names

    problems = []
    templates = template_names()
    judges = [("judge", judge)] + [
        (f"judge.panel.members[{i}]", judge.member(m)) for i, m in enumerate(judge.panel.members)
    ]
    for key, settings in judges:
        if settings.backend == "openai":
            for needed, example in (("base_url", "http://localhost:8000/v1"), ("model", "Qwen/Qwen2.5-7B-Instruct")):
                if not getattr(settings, needed):
                    problems.append(
                        f"config key '{key}.{needed}': the openai judge backend needs a {needed} "
                        f"(e.g. {example}); set it, or use backend: reference"
                    )
        if settings.template not in templates:
            problems.append(
                f"config key '{key}.template': value '{settings.template}' names no prompt template; "
                f"templates: {', '.join(templates)} (src/chartrl/prompts/<name>.jinja)"
            )
    return problems


def parse_config(raw: Mapping[str, Any]) -> Config:
    """Validate a config dict (as Snakemake holds it, or as read from files) and return its typed view."""
    resolved = validate_schema(raw)
    shared = resolved["data"]
    config = Config(
        resolved=_frozen(resolved),
        mlflow=MlflowSettings(**resolved["mlflow"]),
        backend=resolved["backend"],
        launcher=resolved["launcher"],
        model=model_config(resolved["model"]),
        prompts=PromptConfig(**resolved["prompts"]),
        tools=tools_config(resolved["tools"]),
        rollout=RolloutConfig(**resolved["rollout"]),
        warmstart=WarmstartConfig(**resolved["warmstart"]),
        train=train_config(resolved["train"]),
        evaluate=EvaluateConfig(**resolved["evaluate"]),
        datasets=MappingProxyType(
            {name: _dataset_config(name, section, shared) for name, section in resolved["datasets"].items()}
        ),
        series=MappingProxyType({sid: _series(sid, section, resolved) for sid, section in resolved["series"].items()}),
        extra_datasets=tuple(resolved["extra_datasets"]),
        extra_seeds=tuple(s for s in resolved["extra_seeds"] if s != resolved["train"]["seed"]),
        samples_in_card=shared["samples_in_card"],
        min_box_coverage=shared["min_box_coverage"],
        judge=JudgeConfig.from_dict(resolved["judge"]),
        verl=verl_config(resolved["verl"]),
        ray=ray_config(resolved["ray"]),
    )
    _cross_check(config)
    return config


def load_config(
    configfiles: Sequence[str | Path] = (),
    *,
    base_files: Sequence[str | Path] = DEFAULT_CONFIG_FILES,
    root: str | Path = ".",
) -> Config:
    """Load the default files (relative to ``root``) and the given overlays, in the order Snakemake merges
    ``configfile:`` directives and ``--configfile`` arguments, then validate."""
    root = Path(root)
    paths = [root / p for p in base_files] + [Path(p) for p in configfiles]
    return parse_config(read_config_files(paths))
