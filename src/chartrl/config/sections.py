"""The typed, frozen views of the validated config: one dataclass per section, each built one way,
``Section.from_dict(mapping)``, from its field types (a nested section from its mapping, a tuple from a list, a
mapping frozen). Four sections group keys differently from the config and say so in their own ``from_dict``:
a reward spec and a panel member (a name and, beside it, the rest), the judge (validated first: it also arrives
on its own, in a verl reward worker), a dataset (built by :func:`dataset_config`, which resolves the shared
defaults).

Values derived from the config (the dataset a series resolves to) live on these objects; nothing is written back
into the dict, so the config that is logged is the config that ran.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import Any

from chartrl.config.schema import ConfigError, merge_config, validate_fragment, validate_section

SPLITS = ("train", "val", "test")


class Section:
    """A config section's typed view; :meth:`from_dict` builds it from the section's validated mapping."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> typing.Self:
        return _build(cls, data)


def _build(cls: type, data: Mapping[str, Any]) -> Any:
    """``cls(**data)`` with each value shaped by the field's type; a key that is no field raises TypeError."""
    hints = _field_types(cls)
    unknown = sorted(set(data) - set(hints))
    if unknown:
        raise TypeError(f"{cls.__name__} has no field(s) {', '.join(unknown)}")
    return cls(**{key: _shaped(hints[key], value) for key, value in data.items()})


@cache
def _field_types(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {field.name: hints[field.name] for field in dataclasses.fields(cls)}


def _shaped(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    optional = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(optional) == 1:
        hint = optional[0]  # an optional section (``X | None``) is shaped as X
    if isinstance(hint, type) and issubclass(hint, Section):
        return hint.from_dict(value)
    origin = typing.get_origin(hint)
    if origin is tuple:
        item = typing.get_args(hint)[0]
        return tuple(_shaped(item, v) for v in value)
    if origin is Mapping:
        return _frozen(value)
    return value


def _name_and_rest(data: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    return data["name"], _frozen({k: v for k, v in data.items() if k != "name"})


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


# --------------------------------------------------------------------------------------------------------------
# The sections
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MlflowSettings(Section):
    tracking_uri: str
    """MLflow tracking store; the default is a SQLite file under results/."""
    experiment: str
    """One MLflow experiment per config."""


@dataclass(frozen=True)
class ShortcutFilterConfig(Section):
    """``datasets.<name>.shortcut_filter`` (every key documented in the schema, ``$defs/shortcut_filter``)."""

    k: int
    """Answers sampled per question and control."""
    threshold: float
    """The least share of right answers without a usable chart that marks a shortcut question, in (0, 1]."""
    controls: tuple[str, ...]
    """``blank`` and/or ``shuffled``."""
    mode: str
    """``remove`` or ``downweight``."""
    weight: float
    """A shortcut question's sampling weight under ``downweight``."""
    max_questions: int | None
    """Examine at most this many train questions (a seeded sample); None: all."""
    seed: int
    examples: int
    """Shortcut questions the card shows."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ShortcutFilterConfig:
        """The settings of a section that is on (``enabled``, the stage's switch, is read by the dataset)."""
        return _build(cls, {k: v for k, v in data.items() if k != "enabled"})


@dataclass(frozen=True)
class DatasetConfig(Section):
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
    shortcut_filter: ShortcutFilterConfig | None = None
    """The shortcut filter of the train split, when the section sets one (not a reader option: it never reruns
    the data stage)."""

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


@dataclass(frozen=True)
class RewardSpec(Section):
    name: str
    """Reward registry name."""
    params: Mapping[str, Any]
    """The reward's parameters, defaults filled."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RewardSpec:
        """A series' ``reward:`` section: the name and, beside it, the params."""
        name, params = _name_and_rest(data)
        return cls(name=name, params=params)


def parse_reward_spec(spec: Mapping[str, Any], key: str = "reward") -> RewardSpec:
    """A reward given on its own (``{"name": ..., <params>}``), validated against the schema's reward definition
    with its defaults filled."""
    return RewardSpec.from_dict(validate_fragment(spec, "reward", key))


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
    "candidates",
    "false_accept_rate",
    "false_reject_rate",
)
"""The judge keys a panel member may set (``$defs/judge_identity`` of the schema)."""


@dataclass(frozen=True)
class PanelMember(Section):
    name: str
    """The member's name; its verdicts are shown and logged under it."""
    overrides: Mapping[str, Any]
    """The judge keys this member sets; every other key comes from the top-level judge settings."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PanelMember:
        """A ``judge.panel.members`` entry: the name and, beside it, the judge keys it sets."""
        name, overrides = _name_and_rest(data)
        return cls(name=name, overrides=overrides)


@dataclass(frozen=True)
class PanelConfig(Section):
    combine: str
    """``majority`` (ties are incorrect) or ``mean``."""
    members: tuple[PanelMember, ...]


@dataclass(frozen=True)
class JudgeConfig(Section):
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
    candidates: str
    """``reference``: a response naming several candidate answers is wrong (``refuse``) or right when one matches
    (``any``: an exploitable judge)."""
    false_accept_rate: float
    """``reference``: the share of wrong answers it accepts, fixed per item (a judge's errors, lenient side)."""
    false_reject_rate: float
    """``reference``: the share of right answers it refuses, fixed per item (a judge's errors, harsh side)."""
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
        return _build(cls, validate_fragment(section, "judge", "judge"))


@dataclass(frozen=True)
class TrainSeries(Section):
    id: str
    generation: str
    description: str
    tools: bool
    reward: RewardSpec
    algorithm: str
    dataset: str
    """Resolved: the series' own ``dataset`` or ``train.dataset``."""
    kind: str = "train"
    shortcut_filter: bool = False
    """Trains on the dataset's shortcut-filtered train split (``results/filter/{dataset}/train.parquet``)."""


@dataclass(frozen=True)
class RerankScorerConfig(Section):
    """The external scorer of best-of-N reranking (schema: $defs/rerank_scorer)."""

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    template: str = "rerank_score"
    json_mode: str = "auto"
    temperature: float = 0.0
    max_tokens: int = 256
    max_response_chars: int = 4000
    max_concurrency: int = 8
    max_retries: int = 5
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 30.0
    timeout_s: float = 60.0
    cache_path: str | None = "results/judge_cache.sqlite"


@dataclass(frozen=True)
class RerankConfig(Section):
    """Best-of-N reranking of an eval series (schema: $defs/rerank)."""

    n: int
    by: tuple[str, ...]
    questions: int | None = None
    seed: int = 0
    scorer: RerankScorerConfig | None = None


@dataclass(frozen=True)
class EvalSeries(Section):
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
    rerank: RerankConfig | None = None
    """Best-of-N reranking at test time, when the series asks for it."""


@dataclass(frozen=True)
class TinyModelConfig(Section):
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
class ModelConfig(Section):
    path: str | None
    """A pretrained Qwen2.5-VL (folder or hub id); None builds the tiny model."""
    tiny: TinyModelConfig
    min_pixels: int
    max_pixels: int
    """Image processor bounds: at most max_pixels / 784 image tokens per image."""
    revision: str | None = None
    """The hub commit of ``path`` verl loads (its snapshot in the Hugging Face cache); None: the newest."""


@dataclass(frozen=True)
class PromptConfig(Section):
    tool_template: str
    no_tool_template: str
    list_labels: bool


@dataclass(frozen=True)
class ToolsConfig(Section):
    names: tuple[str, ...]
    max_calls_per_turn: int
    max_tool_turns: int


@dataclass(frozen=True)
class RolloutConfig(Section):
    n: int
    temperature: float
    top_p: float
    max_new_tokens: int
    batch_size: int
    kv_reuse: bool
    """A pass after a tool turn reuses the previous pass's keys/values (chartrl.rollout.kv_reuse)."""


@dataclass(frozen=True)
class WarmstartConfig(Section):
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
    unnamed_call_label: str
    """none | first_listed: what a demonstrated call keeps on a bar chart whose question names none of its labels."""
    no_tool_rate: float
    hedge_rate: float
    """Share of answers without a call to a value or compare question written as a hedge naming two candidates."""
    format_slip_rate: float
    """Share of final answers with a period after the closing tag (readable, malformed)."""
    ramble_rate: float
    """Share of answers after a tool call that restate the question first."""
    failed_call_rate: float
    """Share of questions needing no tool demonstrated with a failed call first (a letter the chart lacks)."""
    perception_rate: float
    perception_steps: int
    text_steps: int
    text_restate_rate: float
    text_tool_list: bool
    """The text steps' call demonstrations show the tool list (else the tool prompt without it)."""
    eval_rows: int
    threads: int
    micro_batch_size: int | None = None


@dataclass(frozen=True)
class LoraSettings(Section):
    enabled: bool
    r: int
    alpha: int
    dropout: float
    target_modules: tuple[str, ...]
    exclude_modules: str | None = None
    """A regular expression (PEFT's, full match) of modules LoRA leaves out, e.g. ``.*visual.*``."""
    freeze_vision_tower: bool = False
    """The vision tower is not trained (with LoRA on or off)."""

    @property
    def targets(self) -> str | list[str]:
        """``target_modules`` as PEFT and verl take it: the string ``all-linear``, or the list of names."""
        return "all-linear" if list(self.target_modules) == ["all-linear"] else list(self.target_modules)


@dataclass(frozen=True)
class TrainConfig(Section):
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

    def saves(self, step: int) -> bool:
        """Whether a run of these settings writes a checkpoint at ``step`` (both backends save every
        ``checkpoint_every`` steps and the local trainer also after the last step)."""
        return 0 < step <= self.steps and (step % self.checkpoint_every == 0 or step == self.steps)


@dataclass(frozen=True)
class VerlConfig(Section):
    """The verl backend's settings beyond train/rollout (schema: verl; every key documented there)."""

    nnodes: int
    n_gpus_per_node: int
    ppo_mini_batch_size: int
    """Prompts per PPO mini-batch (verl multiplies it by rollout.n)."""
    ppo_micro_batch_size_per_gpu: int
    log_prob_micro_batch_size_per_gpu: int
    tensor_model_parallel_size: int
    gpu_memory_utilization: float
    gpu_memory_gb: float
    """Memory of each GPU in GiB: the bound of the per-GPU memory estimate (chartrl.verl_backend.memory)."""
    rollout_engine: str
    max_prompt_length: int
    max_tool_response_length: int
    attn_implementation: str
    """The policy's attention in verl's FSDP workers (sdpa, flash_attention_2, eager)."""
    gradient_checkpointing: bool
    param_offload: bool
    """For the actor and the reference."""
    optimizer_offload: bool
    agent_num_workers: int
    val_before_train: bool
    extra_overrides: tuple[str, ...]
    adam_betas: tuple[float, ...] = (0.9, 0.999)
    """verl's actor.optim.betas (the local trainer's AdamW uses 0.9, 0.98)."""
    chat_template_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    """verl's data.apply_chat_template_kwargs, e.g. ``{"enable_thinking": False}`` for Qwen3.5."""

    @property
    def n_gpus(self) -> int:
        return self.nnodes * self.n_gpus_per_node


@dataclass(frozen=True)
class RayConfig(Section):
    """The Ray launcher and the local head (schema: ray)."""

    address: str | None
    """A running cluster's job API; the environment's RAY_ADDRESS wins over it."""
    head_port: int | None
    temp_dir: str | None
    python: str | None
    """The interpreter of the environment Ray jobs run in (the local head's); None: Snakemake's conda env's, or its
    own."""
    num_cpus: int | None
    num_gpus: int | None
    job_gpus: float
    forward_env: tuple[str, ...]
    stop_timeout_s: float


@dataclass(frozen=True)
class EvaluateConfig(Section):
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
    year_rule: str
    curve_rows: int
    hacking_drift: float
    """The least judge-over-rule drift the diagonal check flags (schema: evaluate.hacking_drift)."""
    tool_path_check: bool
    """Run the tool-path check job (chartrl.rollout.tool_path) on the train dataset's charts."""
    headline_types: tuple[str, ...] | None = None
    """The question types the headline test accuracy is over (None: every question)."""

    def in_headline(self, question_type: str) -> bool:
        """Does a question of ``question_type`` count in the headline accuracy?"""
        return self.headline_types is None or question_type in self.headline_types


@dataclass(frozen=True)
class ReferenceValues(Section):
    """Published numbers of the study a config reproduces (schema: reference_values), shown beside the run's."""

    source: str | None = None
    validation: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    """Train series id -> {final, final_step, peak, tool_success}; a value is a number or [low, high]."""
    test: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    """Eval series id -> {accuracy, scorer, checkpoint, tool_call_ratio}."""


@dataclass(frozen=True)
class Hypothesis(Section):
    """A generation's hypothesis as data (schema: hypotheses), tested by the report."""

    id: str
    generation: str
    claim: str
    """The hypothesis in words."""
    metric: str
    """test_accuracy, test_accuracy_<question type>, tool_call_ratio, val_accuracy or drift."""
    series: tuple[str, ...]
    """[a, b]: metric(a) - metric(b) is tested; [a]: metric(a) against 0."""
    comparison: str
    """greater, not_less or not_greater."""
    threshold: float
    """The comparison's margin."""
    question_type: str | None = None
    """Only the test questions of this type (None: all)."""


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
    reference_values: ReferenceValues = dataclasses.field(default_factory=ReferenceValues)
    """The study's published numbers, for the report only (empty unless the config gives them)."""
    hypotheses: tuple[Hypothesis, ...] = ()
    """Each generation's hypothesis, tested by the report (empty unless the config states some)."""

    @property
    def model_path(self) -> str | None:
        return self.model.path

    @property
    def train_series(self) -> list[TrainSeries]:
        return [s for s in self.series.values() if isinstance(s, TrainSeries)]

    @property
    def eval_series(self) -> list[EvalSeries]:
        return [s for s in self.series.values() if isinstance(s, EvalSeries)]

    @property
    def seeded_series(self) -> list[TrainSeries]:
        """The train series the extra seeds train again: those the hypotheses compare (a train series named, or the
        one an eval series named evaluates), so that every verdict rests on every seed; every train series when the
        config states no hypothesis. None without extra seeds."""
        if not self.extra_seeds:
            return []
        named = {
            self.series[sid].of if isinstance(self.series[sid], EvalSeries) else sid
            for hypothesis in self.hypotheses
            for sid in hypothesis.series
            if sid in self.series
        }
        return [s for s in self.train_series if not self.hypotheses or s.id in named]

    @property
    def filtered_datasets(self) -> list[str]:
        """Datasets that get the shortcut-filter stage: a train series trains on the dataset and its section sets
        ``shortcut_filter``, whether or not a series opts in to the filtered split."""
        trained = dict.fromkeys(s.dataset for s in self.train_series)
        return [name for name in trained if name in self.datasets and self.datasets[name].shortcut_filter is not None]

    def train_section(self, train_id: str) -> dict[str, Any]:
        """The ``train:`` section train series ``train_id`` runs with: ``train:`` with the series' own ``train:``
        keys merged over it key by key (a LoRA variant's ``lora`` and ``lr``), validated as ``train:`` is."""
        own = self.resolved["series"][train_id].get("train")
        if not own:
            return to_plain(self.resolved["train"])
        return validate_section("train", merge_config(to_plain(self.resolved["train"]), to_plain(own)))

    def judge_section(self, series_id: str) -> dict[str, Any]:
        """The ``judge:`` settings series ``series_id`` is judged with: ``judge:`` with the train series' own
        ``judge:`` keys merged over it (an exploitable judge for a hack control); an eval series takes those of the
        train series it evaluates (``of``), so its generations are judged by the judge that rewarded them."""
        series = self.series[series_id]
        train_id = series.of if isinstance(series, EvalSeries) else series_id
        own = self.resolved["series"][train_id].get("judge")
        if not own:
            return to_plain(self.resolved["judge"])
        return validate_section("judge", merge_config(to_plain(self.resolved["judge"]), to_plain(own)))

    def judge_of(self, series_id: str) -> JudgeConfig:
        """The typed :meth:`judge_section` of series ``series_id``."""
        return JudgeConfig.from_dict(self.judge_section(series_id))

    def train_of(self, train_id: str) -> TrainConfig:
        """The typed :meth:`train_section` of train series ``train_id``."""
        return self.for_train_series(train_id).train

    def for_train_series(self, train_id: str) -> Config:
        """This config with ``train`` as train series ``train_id`` runs it (:meth:`train_section`)."""
        if not self.resolved["series"][train_id].get("train"):
            return self
        return dataclasses.replace(self, train=TrainConfig.from_dict(self.train_section(train_id)))

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


# The builders callers outside this package use by name (the same ``from_dict``).
model_config = ModelConfig.from_dict
tools_config = ToolsConfig.from_dict
train_config = TrainConfig.from_dict
verl_config = VerlConfig.from_dict
ray_config = RayConfig.from_dict


# --------------------------------------------------------------------------------------------------------------
# The whole config
# --------------------------------------------------------------------------------------------------------------

_DATASET_COMMON_KEYS = {"source", "max_reject_fraction", "max_image_pixels", "shortcut_filter"}


def dataset_config(name: str, section: Mapping[str, Any], shared: Mapping[str, Any]) -> DatasetConfig:
    """Dataset ``name`` from its ``datasets:`` section, the limits it leaves out taken from ``data:`` (``shared``).
    Its splits are what the section lists under ``splits`` (a list, or a mapping from split), else under ``files``
    (a mapping from split)."""
    listed = section["splits"] if "splits" in section else section["files"]
    return DatasetConfig.from_dict(
        {
            "name": name,
            "source": section["source"],
            "splits": [s for s in SPLITS if s in listed],
            "max_reject_fraction": float(section.get("max_reject_fraction", shared["max_reject_fraction"])),
            "max_image_pixels": int(section.get("max_image_pixels", shared["max_image_pixels"])),
            "options": {k: v for k, v in section.items() if k not in _DATASET_COMMON_KEYS},
            "shortcut_filter": _enabled(section.get("shortcut_filter")),
        }
    )


def _enabled(section: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """An optional stage's section without its ``enabled`` switch, or None when it is absent or switched off."""
    if section is None or not section.get("enabled", True):
        return None
    return {k: v for k, v in section.items() if k != "enabled"}


def series_config(sid: str, section: Mapping[str, Any], resolved: Mapping[str, Any]) -> TrainSeries | EvalSeries:
    """Series ``sid`` from its ``series:`` section, its dataset resolved (its own, else ``train.dataset`` or
    ``evaluate.dataset``)."""
    common = {"id": sid, "generation": section["generation"], "description": section["description"]}
    if section["kind"] == "train":
        return TrainSeries.from_dict(
            {
                **common,
                "tools": section["tools"],
                "reward": section["reward"],
                "algorithm": section["algorithm"],
                "dataset": section.get("dataset", resolved["train"]["dataset"]),
                "shortcut_filter": section.get("shortcut_filter", False),
            }
        )
    return EvalSeries.from_dict(
        {
            **common,
            "of": section["of"],
            "checkpoint": section["checkpoint"],
            "scorers": section["scorers"],
            "dataset": section.get("dataset", resolved["evaluate"]["dataset"]),
            "split": resolved["evaluate"]["split"],
            "rerank": section.get("rerank"),
        }
    )


def selected_series(resolved: Mapping[str, Any]) -> dict[str, Any]:
    """The config with ``series`` narrowed to ``run_series`` (when set): a recipe overlay's way to run its own
    series without the default's (overlays merge ``series:`` key by key, so none can be removed). The published
    numbers and the hypotheses of the series it leaves out go with them; a number naming no series at all stays, to
    be refused."""
    only = resolved.get("run_series")
    if only is None:
        return dict(resolved)
    for i, sid in enumerate(only):
        if sid not in resolved["series"]:
            raise ConfigError(
                f"config key 'run_series[{i}]': value '{sid}' names no series; "
                f"series are: {', '.join(resolved['series'])}"
            )
    left_out = set(resolved["series"]) - set(only)
    hypotheses = [h for h in resolved.get("hypotheses") or [] if left_out.isdisjoint(h["series"])]
    reference = {
        part: {sid: values for sid, values in entries.items() if sid not in left_out}
        if part in ("validation", "test")
        else entries
        for part, entries in (resolved.get("reference_values") or {}).items()
    }
    return {
        **resolved,
        "series": {sid: resolved["series"][sid] for sid in only},
        "reference_values": reference,
        "hypotheses": hypotheses,
    }


def typed_config(resolved: Mapping[str, Any]) -> Config:
    """The typed view of a config validated against the schema (defaults filled)."""
    resolved = selected_series(resolved)
    shared = resolved["data"]
    return Config(
        resolved=_frozen(resolved),
        mlflow=MlflowSettings.from_dict(resolved["mlflow"]),
        backend=resolved["backend"],
        launcher=resolved["launcher"],
        model=ModelConfig.from_dict(resolved["model"]),
        prompts=PromptConfig.from_dict(resolved["prompts"]),
        tools=ToolsConfig.from_dict(resolved["tools"]),
        rollout=RolloutConfig.from_dict(resolved["rollout"]),
        warmstart=WarmstartConfig.from_dict(resolved["warmstart"]),
        train=TrainConfig.from_dict(resolved["train"]),
        evaluate=EvaluateConfig.from_dict(resolved["evaluate"]),
        datasets=MappingProxyType(
            {name: dataset_config(name, section, shared) for name, section in resolved["datasets"].items()}
        ),
        series=MappingProxyType(
            {sid: series_config(sid, section, resolved) for sid, section in resolved["series"].items()}
        ),
        extra_datasets=tuple(resolved["extra_datasets"]),
        extra_seeds=tuple(s for s in resolved["extra_seeds"] if s != resolved["train"]["seed"]),
        samples_in_card=shared["samples_in_card"],
        min_box_coverage=shared["min_box_coverage"],
        judge=JudgeConfig.from_dict(resolved["judge"]),
        verl=VerlConfig.from_dict(resolved["verl"]),
        ray=RayConfig.from_dict(resolved["ray"]),
        reference_values=ReferenceValues.from_dict(resolved.get("reference_values") or {}),
        hypotheses=tuple(Hypothesis.from_dict(h) for h in resolved.get("hypotheses") or []),
    )
