"""``chartrl reruns``: which jobs the next run would run, and why, one line each, read from Snakemake's own dry
run in the working directory: which chartrl file's code changed (``train e1: code: rollout/episodes.py
changed``), which config key (``score e4 rule: config: evaluate.year_rule standard -> strict``), which input is
rewritten by a job that reruns first (``generate e4: after train e1``), or that an output is missing.

A job's params hold what it depends on (chartrl.workflow): its ``spec`` (the config its command reads) and its
``code`` (the digest of every chartrl file it runs); Snakemake records them with each output it makes, and this
command compares the record with the job as it would run now.
"""

from __future__ import annotations

import argparse
import ast
import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from chartrl.commands.overlays import add_configfile_argument
from chartrl.errors import UsageError
from chartrl.fingerprint import changed_files

MAX_SHOWN = 60
"""Characters of a changed value shown."""
MAX_FILES = 5
"""Input files named one by one; more are counted."""
ADOPT = "results made before the code was fingerprinted: `snakemake --touch` adopts them (docs/running.md)"


def recorded_value(text: str) -> Any:
    """A param as Snakemake records it (its repr), read back; a JSON string (a spec, a fingerprint) as its data."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    if isinstance(value, str) and value.startswith("{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def is_code(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"code", "commands"}


def shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


def changed_keys(before: Any, after: Any, prefix: str = "") -> list[str]:
    """The dotted keys whose values differ between two specs, each with its old and new value."""
    if isinstance(before, dict) and isinstance(after, dict):
        lines = []
        for key in sorted(before.keys() | after.keys(), key=str):
            name = f"{prefix}.{key}" if prefix else str(key)
            if key not in before:
                lines.append(f"{name} added ({shown(after[key])})")
            elif key not in after:
                lines.append(f"{name} removed")
            else:
                lines += changed_keys(before[key], after[key], name)
        return lines
    return [] if before == after else [f"{prefix or 'value'} {shown(before)} -> {shown(after)}"]


def param_changes(old: Iterable[str], new: Iterable[str]) -> list[str]:
    """Why a job's params differ from those recorded with its output: ``old`` the recorded ones that no longer
    hold, ``new`` the job's own that were not recorded (Snakemake keeps each param's repr, unnamed). The files of
    its code that changed, the config keys of its spec that changed, and any other param."""
    olds = [recorded_value(text) for text in old]
    news = [recorded_value(text) for text in new]
    lines: list[str] = []
    old_code = next((value for value in olds if is_code(value)), None)
    old_specs = [value for value in olds if isinstance(value, dict) and not is_code(value)]
    for value in news:
        if is_code(value):
            if old_code is None:
                lines.append(f"code: no fingerprint recorded ({ADOPT})")
                continue
            lines += [f"code: {line}" for line in changed_files(old_code["code"], value["code"])]
            if old_code["commands"] != value["commands"]:
                lines.append(f"commands: {' | '.join(old_code['commands'])} -> {' | '.join(value['commands'])}")
        elif isinstance(value, dict):
            match = max(old_specs, key=lambda spec: len(spec.keys() & value.keys()), default={})
            lines += [f"config: {line}" for line in changed_keys(match, value)]
        else:
            lines.append(f"param: {shown(value)}")
    return lines


def job_label(job) -> str:
    return " ".join([job.rule.name, *(str(value) for value in job.wildcards_dict.values())])


def reasons(job, dag, producers: dict[str, Any]) -> list[str]:
    """Why Snakemake would run ``job`` (its DAG's reason), told in chartrl's terms."""
    reason = dag.reason(job)
    persistence = dag.workflow.persistence
    found: list[str] = []
    if reason.forced:
        found.append("forced")
    if reason.missing_output:
        found.append("no output yet" if len(reason.missing_output) == len(job.output) else "output missing")
    if reason.incomplete_output:
        found.append("its output is incomplete (a job that did not finish)")
    if reason.params_changed:  # the params recorded with the output, and the job's now, that differ
        found += param_changes(reason.params_changed.only_old, reason.params_changed.only_new)
    if reason.input_changed:
        recorded = set(persistence.input(job.output[0]) or [])
        now = {str(path) for path in job.input}
        found += files_line("input added", sorted(now - recorded))
        found += files_line("input no longer read", sorted(recorded - now))
    if reason.code_changed:
        found.append("the rule's command changed")
    if reason.software_stack_changed:
        found.append("its software environment changed")
    upstream = sorted({job_label(producers[str(path)]) for path in reason.updated_input_run if str(path) in producers})
    found += [f"after {label}" for label in upstream]
    if reason.updated_input:
        found += [f"input newer than its output: {path}" for path in sorted(map(str, reason.updated_input))]
    return found or ["(no reason given by Snakemake)"]


def files_line(what: str, paths: list[str]) -> list[str]:
    if not paths:
        return []
    if len(paths) <= MAX_FILES:
        return [f"{what}: {', '.join(paths)}"]
    return [f"{what}: {len(paths)} files ({', '.join(paths[:2])}, ...)"]


def planned_reruns(snakefile: Path, configfiles: list[Path], targets: list[str]) -> list[tuple[str, list[str]]]:
    """The jobs a run in the working directory would run, each with its reasons, from Snakemake's DAG (the calls
    ``snakemake -n`` makes, read through its workflow object: no public call hands out a job's reasons)."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.enums import Quietness
    from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, ResourceSettings

    with SnakemakeApi(OutputSettings(quiet={Quietness.ALL}, log_level_override=logging.WARNING)) as api:
        workflow_api = api.workflow(
            resource_settings=ResourceSettings(cores=1),
            config_settings=ConfigSettings(configfiles=configfiles),
            snakefile=snakefile,
            workdir=Path.cwd(),
        )
        workflow_api.dag(DAGSettings(targets=set(targets)))
        workflow = workflow_api._workflow
        workflow._prepare_dag(forceall=False, ignore_incomplete=False, lock_warn_only=True)
        workflow._build_dag()
        dag = workflow.dag
        producers = {str(path): job for job in dag.jobs for path in job.output}
        jobs = sorted(dag.needrun_jobs(), key=job_label)
        return [(job_label(job), reasons(job, dag, producers)) for job in jobs if job.rule.name != "all"]


def cmd_reruns(args: argparse.Namespace) -> int:
    snakefile = Path(args.snakefile)
    if not snakefile.is_file():
        raise UsageError(f"no Snakefile at {snakefile}: run chartrl reruns in the workflow's folder, or name it")
    planned = planned_reruns(snakefile, [Path(f) for f in args.configfile], args.targets)
    for label, why in planned:
        print(f"{label}: {'; '.join(why)}")
    print(f"{len(planned)} jobs would run" if planned else "nothing to be done")
    return 0


def register(stages: argparse._SubParsersAction) -> None:
    reruns = stages.add_parser(
        "reruns",
        help="which jobs the next run would run, and why: the code file or config key that changed",
        description="Snakemake's dry run in this folder, each job with what made it rerun: a file of the code it "
        "runs, a key of the config it reads, an input another job rewrites, a missing output.",
    )
    reruns.add_argument("targets", nargs="*", help="files or rules, as for snakemake (default: the whole study)")
    add_configfile_argument(reruns)
    reruns.add_argument("--snakefile", default="Snakefile", help="the workflow (default: ./Snakefile)")
    reruns.set_defaults(func=cmd_reruns)
