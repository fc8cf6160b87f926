"""``chartrl verl shortcut-answers``: the shortcut filter's answers on verl (rules/filter.smk), as a recipe::

    prepare   the examined train questions under each control (``chartrl.evaluate.shortcut.control_rows``: a blank
              chart, another question's chart), ids ``{row id}@{control}``, written as verl's dataset with the
              no-tool prompt and verl's ``single_turn_agent``
    generate  python -m verl.trainer.main_ppo trainer.val_only=True with the starting policy (model.path, or the
              warm-started model), ``val_kwargs.n = k`` samples per question at the rollout temperature; verl
              dumps every generation as JSONL (the overrides are in the rule's command line)
    convert   the dump -> the generations contract (``chartrl.verl_backend.generations``): the same answers file
              the local backend writes, which ``chartrl shortcut filter`` then reads on either backend

Down-weighting is not offered here: verl 0.9.1 samples train prompts uniformly and reads no per-row weight, so a
verl config asking a series to train on a down-weighted split is refused (``chartrl.config.checks``).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from chartrl.config import Config, ConfigError, ModelConfig, PromptConfig, ShortcutFilterConfig, ToolsConfig
from chartrl.data.contract import read_split
from chartrl.errors import UsageError
from chartrl.evaluate.shortcut import control_rows, examined_rows
from chartrl.verl_backend.data import write_verl_dataset
from chartrl.verl_backend.generations import convert_dump
from chartrl.verl_backend.hydra import override
from chartrl.verl_backend.job import VerlJobError, override_values, run_verl, verl_entry
from chartrl.verl_backend.overrides import (
    GENERATION_REWARD,
    SINGLE_TURN_AGENT,
    actor_overrides,
    cluster_overrides,
    data_overrides,
    hydra_overrides,
    model_overrides,
    resolved,
    reward_overrides,
    rollout_overrides,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShortcutFiles:
    """Where a dataset's verl answers job reads and writes, under ``results/filter/{dataset}/verl/``."""

    folder: Path

    @classmethod
    def of(cls, dataset: str, workdir: str | Path) -> ShortcutFiles:
        return cls(resolved(workdir) / "results" / "filter" / dataset / "verl")

    @property
    def data_file(self) -> Path:
        return self.folder / "controls.parquet"

    @property
    def dump_dir(self) -> Path:
        return self.folder / "dumps"


def filter_settings(config: Config, dataset: str) -> ShortcutFilterConfig:
    settings = config.datasets[dataset].shortcut_filter if dataset in config.datasets else None
    if settings is None:
        with_filter = [name for name, d in config.datasets.items() if d.shortcut_filter is not None]
        raise ConfigError(
            f"dataset '{dataset}' sets no shortcut_filter; datasets with one: {', '.join(with_filter) or '(none)'}"
        )
    return settings


def shortcut_overrides(config: Config, dataset: str, workdir: str | Path = ".") -> list[str]:
    """The overrides of dataset ``dataset``'s answers job: verl's ``trainer.val_only`` with the starting policy on
    the control questions (one no-tool pass of ``rollout.max_new_tokens``), ``k`` samples each at the rollout
    temperature, dumped as JSONL. A val_only job updates nothing: the algorithm is plain GRPO without KL."""
    settings = filter_settings(config, dataset)
    workdir = resolved(workdir)
    files = ShortcutFiles.of(dataset, workdir)
    length = config.rollout.max_new_tokens
    rollout, val = "actor_rollout_ref.rollout", "actor_rollout_ref.rollout.val_kwargs"
    return [
        *model_overrides(config, workdir),
        *data_overrides(config, files.data_file, files.data_file, length, config.train.prompts_per_step),
        override("data.val_max_samples", -1),
        *rollout_overrides(config, length),
        override(f"{rollout}.agent.default_agent_loop", SINGLE_TURN_AGENT),
        override(f"{rollout}.agent.num_workers", config.verl.agent_num_workers),
        override(f"{val}.n", settings.k),
        override(f"{val}.do_sample", True),
        override(f"{val}.temperature", config.rollout.temperature),
        override(f"{val}.top_p", config.rollout.top_p),
        *actor_overrides(config),
        override("algorithm.adv_estimator", "grpo"),
        override("algorithm.use_kl_in_reward", False),
        override("actor_rollout_ref.actor.use_kl_loss", False),
        *reward_overrides(GENERATION_REWARD, {}),
        override("trainer.logger", ["console"]),
        override("trainer.project_name", config.mlflow.experiment),
        override("trainer.experiment_name", f"{dataset}/shortcut_answers"),
        *cluster_overrides(config),
        override("trainer.val_only", True),
        override("trainer.val_before_train", True),
        override("trainer.resume_mode", "disable"),
        override("trainer.validation_data_dir", str(files.dump_dir)),
        *config.verl.extra_overrides,
    ]


@dataclass
class ShortcutAnswersJob:
    dataset: str
    settings: ShortcutFilterConfig
    prompts: PromptConfig
    tools: ToolsConfig
    model: ModelConfig
    overrides: Sequence[str]
    data: Path
    """The train split (our contract)."""
    out: Path
    """results/filter/{dataset}/answers.parquet"""

    @property
    def files(self) -> ShortcutFiles:
        return ShortcutFiles(self.out.resolve().parent / "verl")


def check_overrides(job: ShortcutAnswersJob) -> dict[str, str]:
    """The overrides must be this dataset's answers job (``chartrl verl overrides`` cannot print them: use
    ``snakemake -n -p``); returns their values."""
    values = override_values(job.overrides)
    expected = {
        "data.val_files": str(job.files.data_file),
        "trainer.validation_data_dir": str(job.files.dump_dir),
        "trainer.val_only": "True",
        "actor_rollout_ref.rollout.val_kwargs.n": str(job.settings.k),
        "actor_rollout_ref.rollout.agent.default_agent_loop": SINGLE_TURN_AGENT,
    }
    wrong = [f"{k}={values.get(k)!r} (expected {v!r})" for k, v in expected.items() if values.get(k) != v]
    if wrong:
        raise UsageError(
            f"the overrides are not dataset {job.dataset}'s shortcut answers job: " + "; ".join(wrong) + ". The "
            "shortcut_answers rule writes them (chartrl.verl_backend.shortcut.shortcut_overrides)"
        )
    return values


def run_shortcut_answers_job(job: ShortcutAnswersJob, entry: Sequence[str] | None = None) -> int:
    """Prepare, run verl with ``trainer.val_only`` (``entry``: default ``verl_entry()``), convert; returns the
    number of answers written."""
    entry = verl_entry() if entry is None else entry
    values = check_overrides(job)
    rows = examined_rows(read_split(job.data), job.settings)
    controls = control_rows(rows, job.settings)
    write_verl_dataset(
        controls, job.files.data_file, with_tools=False, prompts=job.prompts, tools=job.tools, model=job.model
    )
    shutil.rmtree(job.files.dump_dir, ignore_errors=True)  # a dump of an earlier attempt must not be read as ours
    log.info(
        "%s: %d questions x %d controls written in verl's format", job.dataset, len(rows), len(job.settings.controls)
    )
    command = [*entry, *job.overrides, *hydra_overrides(job.files.folder / "hydra")]
    code = run_verl(command, dict(os.environ))
    if code != 0:
        raise VerlJobError(f"verl exited with code {code} answering {job.dataset}'s control questions; see the log")
    model = values["actor_rollout_ref.model.path"]
    records = convert_dump(
        job.files.dump_dir,
        controls,
        job.out,
        tools=[],
        max_calls=job.tools.max_calls_per_turn,
        tokenizer_path=model,
        image_dir=job.out.parent / "images",
        model=model,
        response_length=None,
    )
    log.info("%d answers without a usable chart written to %s", len(records), job.out)
    return len(records)
