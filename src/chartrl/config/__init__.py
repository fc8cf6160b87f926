"""The workflow configuration: loaded once, validated with actionable errors, typed and frozen.

One JSON Schema (``workflow/schemas/config.schema.yaml``) holds every key, its default and its documentation.
The Snakefile validates ``config`` with it through ``snakemake.utils.validate``; :func:`parse_config` applies the
same schema here (so ``chartrl`` commands run outside Snakemake get the same checks and defaults), builds the
typed view and runs the checks a schema cannot express.

- ``chartrl.config.schema``    read and merge YAML files, validate against the schema, defaults filled
- ``chartrl.config.sections``  the typed sections, each built by ``from_dict``, and :class:`Config`
- ``chartrl.config.checks``    the registry of cross-checks (``@config_check``), run on every loaded config
- ``chartrl.config.load``      :func:`parse_config`, :func:`load_config`
"""

from chartrl.config.checks import CHECK_MODULES, CHECKS, config_check, judge_problems, prompt_problems, run_checks
from chartrl.config.load import DEFAULT_CONFIG_FILES, load_config, parse_config
from chartrl.config.schema import (
    ConfigError,
    config_schema,
    merge_config,
    read_config_files,
    validate_fragment,
    validate_schema,
    validate_section,
)
from chartrl.config.sections import (
    JUDGE_IDENTITY_KEYS,
    SPLITS,
    Config,
    DatasetConfig,
    EvalSeries,
    EvaluateConfig,
    JudgeConfig,
    LoraSettings,
    MlflowSettings,
    ModelConfig,
    PanelConfig,
    PanelMember,
    PromptConfig,
    RayConfig,
    RewardSpec,
    RolloutConfig,
    Section,
    TinyModelConfig,
    ToolsConfig,
    TrainConfig,
    TrainSeries,
    VerlConfig,
    WarmstartConfig,
    dataset_config,
    lr_factor,
    model_config,
    parse_reward_spec,
    ray_config,
    series_config,
    to_plain,
    tools_config,
    train_config,
    typed_config,
    verl_config,
)

__all__ = [
    "CHECKS",
    "CHECK_MODULES",
    "DEFAULT_CONFIG_FILES",
    "JUDGE_IDENTITY_KEYS",
    "SPLITS",
    "Config",
    "ConfigError",
    "DatasetConfig",
    "EvalSeries",
    "EvaluateConfig",
    "JudgeConfig",
    "LoraSettings",
    "MlflowSettings",
    "ModelConfig",
    "PanelConfig",
    "PanelMember",
    "PromptConfig",
    "RayConfig",
    "RewardSpec",
    "RolloutConfig",
    "Section",
    "TinyModelConfig",
    "ToolsConfig",
    "TrainConfig",
    "TrainSeries",
    "VerlConfig",
    "WarmstartConfig",
    "config_check",
    "config_schema",
    "dataset_config",
    "judge_problems",
    "load_config",
    "lr_factor",
    "merge_config",
    "model_config",
    "parse_config",
    "parse_reward_spec",
    "prompt_problems",
    "ray_config",
    "read_config_files",
    "run_checks",
    "series_config",
    "to_plain",
    "tools_config",
    "train_config",
    "typed_config",
    "validate_fragment",
    "validate_schema",
    "validate_section",
    "verl_config",
]
