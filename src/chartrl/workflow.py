"""What the Snakemake rules read from chartrl to plan the study; every job itself runs the ``chartrl`` CLI.

- :func:`checked_config`: the config, validated and checked as ``chartrl config check`` checks it.
- :func:`job_spec`: a job's ``--spec`` (its ``spec`` param), built from what its command declares it reads
  (``READS`` in the command's module, ``chartrl.commands.spec.Reads``): the job depends on exactly that config.
- :func:`job_code`: a job's ``code`` param, the fingerprint of the code its commands run (``chartrl.fingerprint``)
  and of the registry entries its config selects (:func:`reward_code`, :func:`judge_code`, :func:`scorer_code`,
  :func:`source_code`): the job depends on exactly that code.
- The checks the workflow runs before any job (the launcher, the Ray head, the tracking store, verl's GPUs) and
  what it passes to the verl jobs (their Hydra overrides, written under ``WORKDIR``: no path of the checkout
  is in a job's params or inputs).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from chartrl import cli
from chartrl.commands.spec import Reads
from chartrl.config import Config, ConfigError, DatasetConfig, parse_config, to_plain
from chartrl.data.sources import source_of, split_spec
from chartrl.evaluate.matrix import RECIPE_SCORERS, extra_matrix_files, matrix_scorers
from chartrl.evaluate.score import SCORER_JUDGES
from chartrl.fingerprint import FACTS_CACHE, code_fingerprint, load_facts_cache, save_facts_cache, template_files
from chartrl.judge import judge_modules
from chartrl.launch import VERL_MODULES, judge_key_names, ray_address_problem, submission_id
from chartrl.ray_head import default_temp_dir, join_head, leave_head, python_problem
from chartrl.rewards import SCORERS, accuracy_signal, reward_module
from chartrl.tools.study_checks import tool_data_problems
from chartrl.tracking import shared_sqlite_problem, unreachable_store_problem
from chartrl.verl_backend.checks import gpu_limit_problem
from chartrl.verl_backend.overrides import WORKDIR, eval_overrides, train_overrides
from chartrl.verl_backend.shortcut import shortcut_overrides

__all__ = [
    "RECIPE_SCORERS",
    "SCORER_JUDGES",
    "VERL_MODULES",
    "OMIT",
    "WORKDIR",
    "ConfigError",
    "accuracy_signal",
    "checked_config",
    "command_module",
    "commands",
    "default_temp_dir",
    "eval_overrides",
    "extra_matrix_files",
    "gpu_limit_problem",
    "job_code",
    "job_spec",
    "join_head",
    "judge_code",
    "judge_key_names",
    "leave_head",
    "matrix_scorers",
    "python_problem",
    "ray_address_problem",
    "report_code",
    "reward_code",
    "scorer_code",
    "shared_sqlite_problem",
    "shortcut_overrides",
    "relative_root",
    "source_code",
    "source_files",
    "split_job_spec",
    "submission_id",
    "to_plain",
    "train_overrides",
    "unreachable_store_problem",
]

FACTS_FILE = Path(".snakemake") / "chartrl" / "code_facts.json"
"""Where the workflow keeps what it read of chartrl's modules (``chartrl.fingerprint.FACTS_CACHE``), in its working
directory: keyed by each file's content, it spares a dry run the parse of unchanged modules."""


def checked_config(config: Mapping[str, Any]) -> Config:
    """The typed config with the checks of ``chartrl config check`` (an eval series' ``of``, dataset references,
    ...) and the study's own: the tools of the tool series have label boxes to edit."""
    checked = parse_config(config)
    problems = tool_data_problems(checked)
    if problems:
        raise ConfigError("the study cannot work as configured:\n  " + "\n  ".join(problems))
    return checked


@cache
def commands() -> dict[str, tuple[str, Reads | None]]:
    """``chartrl`` command (``generate``, ``verl train``) -> the module of its function and its declaration, read
    off the CLI's own parser."""
    found: dict[str, tuple[str, Reads | None]] = {}

    def walk(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> None:
        func = parser.get_default("func")
        if func is not None:
            command = " ".join(words)
            module = func.__module__
            found[command] = (module, getattr(importlib.import_module(module), "READS", {}).get(command))
        for action in parser._actions:  # argparse keeps its subparsers there
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*words, name))

    walk(cli.build_parser(), ())
    return found


def command_module(command: str) -> str:
    """The module whose function runs ``chartrl <command>``."""
    known = commands()
    if command not in known:
        raise KeyError(f"no command `chartrl {command}`; the commands: {', '.join(sorted(known))}")
    return known[command][0]


def reads_of(command: str) -> Reads:
    """What ``chartrl <command>`` declares it reads."""
    command_module(command)
    reads = commands()[command][1]
    if reads is None:
        raise KeyError(f"`chartrl {command}` declares no job spec (READS in {command_module(command)})")
    return reads


OMIT = None
"""A section a rule leaves out of a job's spec (the judge of a series whose reward does not judge)."""


def job_spec(command: str, config: Config, sections: Mapping[str, Any] | None = None, **entries: Any) -> str:
    """The ``--spec`` of a job running ``chartrl <command>``, as JSON: the ``entries`` the command declares
    (``series``, ``of``, ...: a None entry is left out), then each section it declares, whole or the declared keys
    of it, from the resolved config, or from ``sections`` where the rule gives a section of its own (a series'
    own train keys) or :data:`OMIT` (a section the job does not read this time)."""
    reads = reads_of(command)
    unknown = set(entries) - {*reads.entries, "keep_steps"}
    if unknown:
        raise KeyError(f"`chartrl {command}` takes no {', '.join(sorted(unknown))} (it declares {reads.entries})")
    data = {name: value for name, value in entries.items() if value is not None}
    given = dict(sections or {})
    for name in reads.section_names:
        if name in given and given[name] is OMIT:
            continue
        section = given[name] if name in given else to_plain(config.resolved[name])
        keys = reads.keys_of(name, section)
        data[name] = section if keys is None else {key: section[key] for key in keys}
    return json.dumps(data, sort_keys=True)


def split_job_spec(dataset: DatasetConfig, split: str) -> dict[str, Any]:
    """A split's dataset entry: the dataset's section narrowed to the split, its local paths as the config names
    them (the data job resolves them against its ``--root``)."""
    return split_spec(dataset, split)


@cache
def _fingerprint(modules: frozenset[str], files: frozenset[str]) -> dict[str, str]:
    return code_fingerprint(modules, files)


def named_templates(spec: Any) -> list[str]:
    """The prompt templates a job's spec (or config) names: the value of every ``*template`` key, at any depth
    (``prompts.tool_template``, ``judge.template``, a panel member's, a rerank scorer's)."""
    found = []
    if isinstance(spec, dict):
        for key, value in spec.items():
            if key.endswith("template") and isinstance(value, str):
                found.append(value)
            else:
                found += named_templates(value)
    elif isinstance(spec, list):
        for value in spec:
            found += named_templates(value)
    return found


def job_code(run: Iterable[str], modules: Iterable[str] = (), spec: str | None = None) -> str:
    """A job's ``code`` param: the ``chartrl`` commands its shell command runs (``run``: ``launch``, ``train``) and the
    digest of every chartrl file they, the registry entries it uses (``modules``) and the prompt templates its
    ``spec`` names run, as JSON. Any change to that code reruns the job; a comment, a docstring or a moved checkout
    does not."""
    run = list(run)
    roots = {"chartrl.cli", *(command_module(command) for command in run), *modules}
    templates = template_files(named_templates(json.loads(spec))) if spec else []
    if not FACTS_CACHE:
        load_facts_cache(FACTS_FILE)
    known = len(FACTS_CACHE)
    code = _fingerprint(frozenset(roots), frozenset(templates))
    if len(FACTS_CACHE) != known and Path(".snakemake").is_dir():
        save_facts_cache(FACTS_FILE)
    return json.dumps({"commands": [f"chartrl {c}" for c in run], "code": code}, sort_keys=True)


def reward_code(config: Config, series_id: str) -> list[str]:
    """The module of a train series' reward and those of the judge it grades with."""
    reward = config.series[series_id].reward
    return [reward_module(reward.name), *judge_code(config, series_id, accuracy_signal(reward.name, reward.params))]


def judge_code(config: Config, series_id: str, accuracy: str) -> list[str]:
    """The modules of the judge (or panel) that grades series ``series_id`` with ``accuracy`` (none for rule)."""
    return judge_modules(accuracy, config.judge_of(series_id)) if accuracy in ("judge", "panel") else []


def scorer_code(config: Config, series_id: str, scorer: str) -> list[str]:
    """The modules of scorer ``scorer`` (the reward it is) and of the judge it asks for eval series ``series_id``."""
    return [reward_module(SCORERS[scorer].reward), *judge_code(config, series_id, SCORER_JUDGES[scorer])]


def report_code(config: Config) -> list[str]:
    """The modules of the train series' rewards: the report reads what grades each series' answers."""
    return sorted({reward_module(series.reward.name) for series in config.train_series})


def source_code(dataset: DatasetConfig) -> list[str]:
    """The reader module of a dataset's source."""
    return [source_of(dataset).read.__module__]


def source_files(dataset: DatasetConfig, split: str, root: Path) -> list[str]:
    """The local files a split reads that exist, relative to the working directory (``root`` is the checkout,
    against which the config's paths are read): a checkout moved with its results names the same files. A missing
    one is not an input (Snakemake would refuse the whole plan, even a dry run on a machine that is not the
    cluster); the split's job then fails naming the file and what to download."""
    files = source_of(dataset).input_files(dataset, split, root)
    return [os.path.relpath(path) for path in files if path.exists()]


def relative_root(root: Path) -> str:
    """The checkout as a job's ``--root`` names it: relative to the working directory (``.`` when they are one)."""
    return os.path.relpath(root)

