"""The reader registry: one entry per ``datasets.<name>.source`` value, registered by its reader.

A reader module decorates its read function with :func:`dataset_source`, saying how to read one split (an iterator
of contract rows and rejects), which part of the dataset's config a split depends on (what the data rule passes as
its params, so Snakemake reruns exactly the splits a change touches), which local files it reads (the rule's
inputs), which label boxes its charts can have and how its local paths resolve. Every module of ``chartrl.data``
is imported with this one (see the end of the file), so a new source is its reader module and its entry in the
config schema (``$defs/dataset`` and the definition of its options), nothing else.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chartrl.config import DatasetConfig
from chartrl.data.contract import Rejected, Row

Reader = Callable[..., Iterator[Row | Rejected]]
SplitOptions = Callable[[dict[str, Any], str], dict[str, Any]]


def no_input_files(dataset: DatasetConfig, split: str, root: Path) -> list[Path]:
    return []


def no_boxes(dataset: DatasetConfig, split: str) -> frozenset[str]:
    return frozenset()


def absolute(path: str, root: Path) -> str:
    return str(path) if Path(path).is_absolute() else str((root / path).resolve())


def absolute_files(options: dict[str, Any], root: Path) -> dict[str, Any]:
    """Options with the per-split ``files`` (where the source has them) made absolute against ``root``."""
    if "files" in options:
        options = {**options, "files": {split: absolute(path, root) for split, path in options["files"].items()}}
    return options


@dataclass(frozen=True)
class Source:
    read: Reader
    """read(dataset, split, root=..., threads=...) -> rows and rejects."""
    split_options: SplitOptions
    """The options one split depends on."""
    input_files: Callable[[DatasetConfig, str, Path], list[Path]] = no_input_files
    """Local files one split reads (none for generated data or a hub id)."""
    box_axes: Callable[[DatasetConfig, str], frozenset[str]] = no_boxes
    """The bboxes axes (``x_values``, ``y_values``) whose label boxes the config says a split can have; what the
    focus tools need. Judged from the config alone, so a study is checked before its data exists."""
    resolve_paths: Callable[[dict[str, Any], Path], dict[str, Any]] = absolute_files
    """Options with relative local paths made absolute against the repository root (a hub id stays as it is)."""


SOURCES: dict[str, Source] = {}
"""Source name (``datasets.<name>.source``) -> how to read it: every reader module of this package, registered when
it is imported; :func:`registered_sources` imports them all first."""


def registered_sources() -> dict[str, Source]:
    """:data:`SOURCES` with every reader of this package registered. The readers are imported here, on the first
    lookup, not when this module is imported: a reader imports this module to register itself, so importing them
    all at this module's import would run a reader (say, one that reads another's records) while the reader that
    was imported first is still half-defined."""
    for module in pkgutil.iter_modules([str(Path(__file__).parent)]):
        importlib.import_module(f"{__package__}.{module.name}")
    return SOURCES


def dataset_source(name: str, split_options: SplitOptions, **details: Any) -> Callable[[Reader], Reader]:
    """Register the decorated read function as source ``name`` (the other :class:`Source` fields as keywords);
    a second registration under a taken name raises."""

    def register(read: Reader) -> Reader:
        if name in SOURCES:
            raise ValueError(f"dataset source {name!r} is already registered")
        SOURCES[name] = Source(read, split_options, **details)
        return read

    return register


def only_split(key: str) -> SplitOptions:
    """Narrow a per-split mapping (or list) under ``key`` to one split."""

    def narrow(options: dict[str, Any], split: str) -> dict[str, Any]:
        narrowed = dict(options)
        value = options.get(key)
        if isinstance(value, dict):
            narrowed[key] = {s: v for s, v in value.items() if s == split}
        elif isinstance(value, list):
            narrowed[key] = [s for s in value if s == split]
        return narrowed

    return narrow


def source_of(dataset: DatasetConfig) -> Source:
    sources = registered_sources()
    try:
        return sources[dataset.source]
    except KeyError:
        raise KeyError(f"unknown dataset source {dataset.source!r}; known: {', '.join(sorted(sources))}") from None


def resolve_paths(source: str, options: dict[str, Any], root: Path) -> dict[str, Any]:
    """Options with relative local paths made absolute against ``root`` (a hub id stays as it is)."""
    return registered_sources()[source].resolve_paths(dict(options), root)


def split_spec(dataset: DatasetConfig, split: str, root: Path | None = None) -> dict[str, Any]:
    """The resolved config one split job depends on (its Snakemake params): local paths as the config names them,
    or made absolute against ``root``."""
    spec = dataset.to_dict()
    options = source_of(dataset).split_options(spec["options"], split)
    spec["options"] = options if root is None else resolve_paths(dataset.source, options, root)
    spec["splits"] = [split]
    return spec
