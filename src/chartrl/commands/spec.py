"""The job spec a rule passes to a command as ``--spec``: JSON with the config a job reads and, for a series job,
the series it runs (and the train series an evaluation reads, ``of``).

Each command declares once, beside its code, what it reads (:class:`Reads`, in its module's ``READS``). The
workflow builds every job's spec from that declaration (``chartrl.workflow.job_spec``), so the spec, and with it
the job's Snakemake params, holds exactly what the job reads, and a change to anything else reruns nothing. The
command reads its spec with :func:`read_job_spec` against the same declaration: of a section it declares only some
keys of, any other key is :class:`Undeclared`, and reading it raises :class:`UndeclaredConfigKey` (a job would
otherwise run with that key's default, whatever the config says, and a change to it would rerun nothing).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from chartrl.config import (
    ConfigError,
    ShortcutFilterConfig,
    TrainSeries,
    config_schema,
    parse_reward_spec,
    validate_fragment,
    validate_section,
)
from chartrl.errors import ChartrlError, UsageError

FILTER_HOLDS = "the dataset's shortcut_filter settings with the dataset's name as id, as the filter rules write them"


@dataclass(frozen=True)
class Reads:
    """What ``chartrl <command>`` reads of the config, and what its rule adds to its spec."""

    command: str
    """The command line after ``chartrl`` (``generate``, ``verl train``)."""
    sections: tuple[str, ...] = ()
    """Sections read whole."""
    keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Section -> the keys read of it (the keys the schema requires of it come too)."""
    all_but: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Section -> the keys not read of it (every other key is read)."""
    entries: tuple[str, ...] = ()
    """What the rule adds that is not a config section: ``series`` (the series with its id), ``of`` (the train
    series an evaluation reads), ``filter``, ``dataset``, ``chosen``, ``keep_steps``."""
    with_ids: tuple[str, ...] = ()
    """The entries that must carry an ``id``."""
    holds: str = ""
    """What a wrong spec is told it must hold, and which rule writes it."""

    @property
    def section_names(self) -> tuple[str, ...]:
        return (*self.sections, *self.keys, *self.all_but)

    def keys_of(self, section: str, present: Mapping[str, Any]) -> tuple[str, ...] | None:
        """The keys of ``section`` this command reads, of those ``present``; None for a section read whole."""
        if section in self.keys:
            required = config_schema()["properties"][section].get("required", [])
            return tuple(dict.fromkeys([*required, *self.keys[section]]))
        if section in self.all_but:
            return tuple(key for key in present if key not in self.all_but[section])
        return None


def read_job_spec(text: str | None, reads: Reads) -> dict[str, Any]:
    """The job's spec, checked against what the command declares: its entries as given (``{}`` for one it leaves
    out), each declared section validated with its defaults filled (a job run by hand may be given no spec), and
    ``keep_steps`` when it names any (the checkpoint steps eval series read, which a train job never prunes). Of a
    section read in part, every key the command does not declare is :class:`Undeclared`."""
    try:
        spec = json.loads(text) if text else {}
    except json.JSONDecodeError as err:
        raise UsageError(f"--spec is not JSON: {err}") from err
    if not isinstance(spec, dict) or any("id" not in spec.get(entry, {}) for entry in reads.with_ids):
        raise UsageError(f"--spec must hold {reads.holds or 'an object of config sections'}")
    known = {*reads.section_names, *reads.entries, "keep_steps"}
    unknown = set(spec) - known
    if unknown:
        raise UsageError(
            f"--spec holds {', '.join(sorted(unknown))}, which chartrl {reads.command} does not read; it reads "
            f"{', '.join(sorted(known - {'keep_steps'}))}"
        )
    sections = {}
    for name in reads.section_names:
        section = validate_section(name, spec.get(name))
        declared = reads.keys_of(name, section)
        if declared is not None:
            undeclared = {key: Undeclared(reads.command, name, key) for key in section if key not in declared}
            section = {**section, **undeclared}
        sections[name] = section
    return {**{entry: spec.get(entry, {}) for entry in reads.entries}, **sections, **keep_steps_of(spec)}


class UndeclaredConfigKey(ChartrlError):
    """A command read a config key its declaration does not name: a bug of the command, found by running it."""


class Undeclared:
    """The value of a config key a command does not declare that it reads. Any use of it raises
    :class:`UndeclaredConfigKey` naming the key and where to declare it; only ``is None`` passes (a value that is
    then used still raises)."""

    __slots__ = ("command", "section", "key")

    def __init__(self, command: str, section: str, key: str):
        self.command, self.section, self.key = command, section, key

    def __repr__(self) -> str:
        return f"<{self.section}.{self.key}: not read by chartrl {self.command}>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # a protocol probe (copy, pickle, hasattr): not a read
            raise AttributeError(name)
        self.read()

    def read(self, *_args: Any, **_kwargs: Any) -> NoReturn:
        raise UndeclaredConfigKey(
            f"chartrl {self.command} read {self.section}.{self.key}, which it does not declare: add it to the Reads "
            f"of {self.command!r} (READS in its module, chartrl.commands), so that its rule gives the job the "
            "config's value and a change to it reruns the job"
        )


for _name in (
    "__bool__", "__int__", "__float__", "__index__", "__str__", "__format__", "__hash__", "__iter__", "__len__",
    "__contains__", "__getitem__", "__call__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
    "__neg__", "__abs__", "__round__",
    *(f"__{op}__" for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or")),
    *(f"__r{op}__" for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or")),
):  # fmt: skip
    setattr(Undeclared, _name, Undeclared.read)
del _name


def keep_steps_of(spec: dict[str, Any]) -> dict[str, list[int]]:
    """The job spec's ``keep_steps`` (the checkpoint steps eval series name), when it has any."""
    steps = spec.get("keep_steps") or []
    if not all(isinstance(step, int) and step > 0 for step in steps):
        raise UsageError(f"--spec keep_steps must be positive step numbers, not {steps!r}")
    return {"keep_steps": sorted(steps)} if steps else {}


def given_spec(text: str | None, spec: dict[str, Any]) -> dict[str, Any]:
    """What a job depends on, for its MLflow params and resume keys: its checked spec, each section the rule gave
    with only the keys it gave (a section read in part carries no other key). A section the spec leaves out
    entirely (a job run by hand) stays, with the defaults it ran with."""
    given = json.loads(text) if text else {}
    return {name: _given_keys(value, given.get(name)) for name, value in spec.items()}


def _given_keys(value: Any, given: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: item
            for key, item in value.items()
            if not isinstance(item, Undeclared) and (not isinstance(given, dict) or key in given)
        }
    return value


# What the entries of a spec hold, read the same way by every command that takes them.


def series_from(section: dict[str, Any], dataset: str) -> TrainSeries:
    """The train series of a spec's ``series`` entry (the resolved series with its id); ``dataset`` for one that
    names none."""
    if section.get("kind") != "train":
        raise ConfigError(f"series {section['id']} is a {section.get('kind')} series; only train series train")
    reward = parse_reward_spec(section["reward"], key=f"series.{section['id']}.reward")
    return TrainSeries(
        id=section["id"],
        generation=section["generation"],
        description=section.get("description", ""),
        tools=section["tools"],
        reward=reward,
        algorithm=section["algorithm"],
        dataset=section.get("dataset", dataset),
        shortcut_filter=bool(section.get("shortcut_filter", False)),
    )


def filter_settings(spec: dict[str, Any]) -> ShortcutFilterConfig:
    """The dataset's filter settings of a job's spec (validated, defaults filled)."""
    name = spec["filter"]["id"]
    settings = {k: v for k, v in spec["filter"].items() if k not in ("id", "enabled")}
    checked = validate_fragment(settings, "shortcut_filter", f"datasets.{name}.shortcut_filter")
    return ShortcutFilterConfig.from_dict(checked)
