"""The checks a schema cannot express, one registry of them: each check reads the typed config and returns the
problems it finds, one actionable line each (the key, the value, the fix); :func:`run_checks` runs them all and
reports every problem at once.

The checks here know only the config: an eval series must name a train series and a step that is saved, every
dataset a series or a list refers to must exist and have the splits asked of it, the judge and the prompt
templates must exist. A check that needs a dataset source or a backend lives with the code that knows it and
registers itself with :func:`config_check`; :data:`CHECK_MODULES` names those modules, imported by name when a
config is checked, so this package never imports a floor above it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable

from chartrl.config.schema import ConfigError
from chartrl.config.sections import Config, EvalSeries, JudgeConfig, PromptConfig, TrainConfig, TrainSeries
from chartrl.prompts import template_names

Check = Callable[[Config], list[str]]

CHECKS: dict[str, Check] = {}
"""Check name -> check, in registration order."""

CHECK_MODULES = (
    "chartrl.data.sources",  # every dataset source's reader, with the checks of its options
    "chartrl.launch",  # ray.address
    "chartrl.tracking",  # a SQLite MLflow store with verl on several nodes
    "chartrl.tools.registry",  # tools.names: the tools that exist
    "chartrl.evaluate.habits",  # hypotheses' sampled_ metrics
    "chartrl.verl_backend.checks",  # verl's batch arithmetic
    "chartrl.verl_backend.budget",  # each verl job's memory per GPU
)
"""The modules above ``config`` that register checks, imported by name before a config is checked."""


def config_check(name: str) -> Callable[[Check], Check]:
    """Register a check under ``name`` (a second registration under a taken name raises)."""

    def register(check: Check) -> Check:
        if name in CHECKS:
            raise ValueError(f"config check {name!r} is already registered ({CHECKS[name].__module__})")
        CHECKS[name] = check
        return check

    return register


def run_checks(config: Config) -> None:
    """Run every registered check; raise one ConfigError listing every problem found (each once)."""
    for module in CHECK_MODULES:
        importlib.import_module(module)
    problems = [problem for check in CHECKS.values() for problem in check(config)]
    if problems:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(dict.fromkeys(problems)))


@config_check("series and datasets")
def series_problems(config: Config) -> list[str]:
    """Every series names a defined dataset with the splits it reads, and an eval series a train series and a
    step its run saves; every dataset of ``extra_datasets`` is defined."""
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
        own = "dataset" in config.resolved["series"][series.id]
        if isinstance(series, TrainSeries):
            check_dataset(f"series.{series.id}.dataset" if own else "train.dataset", series.dataset, ("train", "val"))
            continue
        check_dataset(f"series.{series.id}.dataset" if own else "evaluate.dataset", series.dataset, (series.split,))
        if series.of not in train_ids:
            problems.append(
                f"config key 'series.{series.id}.of': value '{series.of}' names no train series; "
                f"train series are: {', '.join(train_ids) or '(none)'}"
            )
        elif isinstance(series.checkpoint, int) and not config.train_of(series.of).saves(series.checkpoint):
            problems.append(_unsaved_step_problem(series, config.train_of(series.of)))
    for i, name in enumerate(config.extra_datasets):
        check_dataset(f"extra_datasets[{i}]", name, ())
    return problems


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


@config_check("judge")
def _judge_check(config: Config) -> list[str]:
    return judge_problems(config.judge)


@config_check("prompts")
def _prompt_check(config: Config) -> list[str]:
    return prompt_problems(config.prompts)


def prompt_problems(prompts: PromptConfig) -> list[str]:
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


@config_check("reference values")
def reference_value_problems(config: Config) -> list[str]:
    """A published number belongs to a series of this config: a validation value to a train series, a test value to
    an eval series that scores with the same scorer (the report says where the checkpoints differ: an overlay that
    shortens training, like the rehearsal, evaluates earlier steps)."""
    problems = []
    reference = config.reference_values
    for sid in reference.validation:
        if not isinstance(config.series.get(sid), TrainSeries):
            problems.append(f"reference_values.validation.{sid}: {sid!r} is not a train series of this config")
    for sid, values in reference.test.items():
        series = config.series.get(sid)
        if not isinstance(series, EvalSeries):
            problems.append(f"reference_values.test.{sid}: {sid!r} is not an eval series of this config")
            continue
        if values["scorer"] not in series.scorers:
            problems.append(
                f"reference_values.test.{sid}: published for scorer {values['scorer']}, but {sid} scores with "
                f"{', '.join(series.scorers)}: give the scorer the study used, or drop the value"
            )
    return problems


@config_check("hypotheses")
def hypothesis_problems(config: Config) -> list[str]:
    """Each hypothesis has its own id and names series its metric can be read from: a train series for
    val_accuracy, one eval series for drift, a train or eval series for the test metrics."""
    problems = []
    seen: set[str] = set()
    for i, hypothesis in enumerate(config.hypotheses):
        key = f"hypotheses[{i}]"
        if hypothesis.id in seen:
            problems.append(f"config key '{key}.id': value '{hypothesis.id}' is used twice; give each its own id")
        seen.add(hypothesis.id)
        if hypothesis.question_type is not None and hypothesis.metric in ("drift", "val_accuracy"):
            problems.append(
                f"config key '{key}.question_type': metric {hypothesis.metric} is not read per test question; "
                "leave question_type out, or name a test or sampled metric"
            )
        if hypothesis.metric == "drift" and len(hypothesis.series) != 1:
            problems.append(
                f"config key '{key}.series': metric drift reads one eval series' diagonal check, got "
                f"{list(hypothesis.series)}; name one eval series (e.g. [e9])"
            )
        for j, sid in enumerate(hypothesis.series):
            series = config.series.get(sid)
            wanted = {"val_accuracy": TrainSeries, "drift": EvalSeries}.get(hypothesis.metric)
            if series is None:
                problems.append(
                    f"config key '{key}.series[{j}]': value '{sid}' names no series; series are: "
                    f"{', '.join(config.series)}"
                )
            elif wanted is not None and not isinstance(series, wanted):
                kind = "a train" if wanted is TrainSeries else "an eval"
                other = "a train" if isinstance(series, TrainSeries) else "an eval"
                problems.append(
                    f"config key '{key}.series[{j}]': metric {hypothesis.metric} needs {kind} series, and '{sid}' is "
                    f"{other} series; name {kind} series or change the metric"
                )
    return problems


@config_check("rerank")
def rerank_problems(config: Config) -> list[str]:
    """An eval series reranking ``by: [scorer]`` names its scorer, whose template exists."""
    problems = []
    templates = template_names()
    for series in config.eval_series:
        rerank = series.rerank
        if rerank is None:
            continue
        key = f"series.{series.id}.rerank"
        if "scorer" in rerank.by and rerank.scorer is None:
            problems.append(
                f"config key '{key}.by': names 'scorer' but '{key}.scorer' is not set; give the endpoint "
                "(scorer: {base_url: http://localhost:8000/v1, model: <served model>, api_key_env: <VARIABLE>}) or "
                "leave 'scorer' out of 'by'"
            )
        if rerank.scorer is not None and rerank.scorer.template not in templates:
            problems.append(
                f"config key '{key}.scorer.template': value '{rerank.scorer.template}' names no prompt template; "
                f"templates: {', '.join(templates)} (src/chartrl/prompts/<name>.jinja)"
            )
    return problems


@config_check("shortcut filter")
def shortcut_filter_problems(config: Config) -> list[str]:
    """A train series that trains on the shortcut-filtered split needs its dataset to set the filter, and the verl
    backend has no per-row sampling weight, so it takes only ``mode: remove``."""
    problems = []
    for series in config.train_series:
        if not series.shortcut_filter:
            continue
        dataset = config.datasets.get(series.dataset)
        if dataset is None:
            continue  # the series and datasets check names it
        settings = dataset.shortcut_filter
        if settings is None:
            problems.append(
                f"config key 'series.{series.id}.shortcut_filter': dataset '{series.dataset}' sets no shortcut "
                f"filter; add datasets.{series.dataset}.shortcut_filter (e.g. {{k: 4, threshold: 0.75}}) or set "
                f"series.{series.id}.shortcut_filter: false"
            )
        elif config.backend == "verl" and settings.mode == "downweight":
            problems.append(
                f"config key 'datasets.{series.dataset}.shortcut_filter.mode': value 'downweight' is not supported "
                f"on the verl backend (series {series.id} trains on it): verl 0.9.1 samples train prompts uniformly "
                "and reads no per-row weight; use mode: remove there, or backend: local"
            )
    return problems
