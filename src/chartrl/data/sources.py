"""The reader registry: one entry per ``datasets.<name>.source`` value.

Each source says how to read one split (an iterator of contract rows and rejects), which part of the dataset's
config a split depends on (what the data rule passes as its params, so Snakemake reruns exactly the splits a
change touches) and which local files it reads (the rule's inputs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chartrl.config import DatasetConfig
from chartrl.data import chartqa, geoqa, synthchart
from chartrl.data.contract import Rejected, Row

Reader = Callable[..., Iterator[Row | Rejected]]


@dataclass(frozen=True)
class Source:
    read: Reader
    """read(dataset, split, root=..., threads=...) -> rows and rejects."""
    split_options: Callable[[dict[str, Any], str], dict[str, Any]]
    """The options one split depends on."""
    input_files: Callable[[DatasetConfig, str, Path], list[Path]]
    """Local files one split reads (none for generated data or a hub id)."""
    box_axes: Callable[[DatasetConfig, str], frozenset[str]] = lambda *_: frozenset()
    """The bboxes axes (``x_values``, ``y_values``) whose label boxes the config says a split can have; what the
    focus tools need. Judged from the config alone, so a study is checked before its data exists."""


def _only_split(key: str) -> Callable[[dict[str, Any], str], dict[str, Any]]:
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


def _chartqa_original_split_options(options: dict[str, Any], split: str) -> dict[str, Any]:
    narrowed = _only_split("require_boxes")(_only_split("splits")(options, split), split)
    return _only_split("refocus_boxes")(narrowed, chartqa.source_split(options, split))


def _chartqa_original_inputs(dataset: DatasetConfig, split: str, root: Path) -> list[Path]:
    base = root / dataset.options["path"]
    folder = chartqa.source_split(dataset.options, split)
    files = [base / folder / pattern.format(split=folder) for _, pattern in chartqa.SUBSET_FILES]
    refocus = dataset.options["refocus_boxes"].get(folder)
    return files + ([base / refocus] if refocus else [])


def _chartqa_hf_inputs(dataset: DatasetConfig, split: str, root: Path) -> list[Path]:
    local = root / dataset.options["path"]
    return sorted(p for p in local.rglob("*.parquet")) if local.is_dir() else []


def _geoqa_inputs(dataset: DatasetConfig, split: str, root: Path) -> list[Path]:
    return [root / dataset.options["files"][split]]


def _synthchart_box_axes(dataset: DatasetConfig, split: str) -> frozenset[str]:
    return frozenset(
        synthchart.BOX_AXIS_OF_STYLE[s] for s in dataset.options["styles"] if s in synthchart.BOX_AXIS_OF_STYLE
    )


def _chartqa_original_box_axes(dataset: DatasetConfig, split: str) -> frozenset[str]:
    """Bar charts get boxes from the release's annotations (declared with ``annotations: true``) or a ReFocus box
    file for the split's folder: x values for vertical bars, y values for horizontal ones."""
    options = dataset.options
    declared = options["annotations"] or chartqa.source_split(options, split) in options["refocus_boxes"]
    return frozenset(("x_values", "y_values")) if declared else frozenset()


SOURCES: dict[str, Source] = {
    "synthchart": Source(synthchart.read_synthchart, synthchart.narrow_options, lambda *_: [], _synthchart_box_axes),
    "chartqa_original": Source(
        chartqa.read_chartqa_original,
        _chartqa_original_split_options,
        _chartqa_original_inputs,
        _chartqa_original_box_axes,
    ),
    "chartqa_hf": Source(chartqa.read_chartqa_hf, _only_split("splits"), _chartqa_hf_inputs),
    "geoqa_r1v": Source(geoqa.read_geoqa_r1v, _only_split("files"), _geoqa_inputs),
    "geoqa_mc": Source(geoqa.read_geoqa_mc, _only_split("files"), _geoqa_inputs),
}


def source_of(dataset: DatasetConfig) -> Source:
    try:
        return SOURCES[dataset.source]
    except KeyError:
        raise KeyError(f"unknown dataset source {dataset.source!r}; known: {', '.join(sorted(SOURCES))}") from None


def _absolute(path: str, root: Path) -> str:
    return str(path) if Path(path).is_absolute() else str((root / path).resolve())


def resolve_paths(source: str, options: dict[str, Any], root: Path) -> dict[str, Any]:
    """Options with relative local paths made absolute against ``root`` (a hub id stays as it is)."""
    options = dict(options)
    if source == "chartqa_original" or (source == "chartqa_hf" and (root / options["path"]).exists()):
        options["path"] = _absolute(options["path"], root)
    if "files" in options:
        options["files"] = {split: _absolute(path, root) for split, path in options["files"].items()}
    return options


def split_spec(dataset: DatasetConfig, split: str, root: Path) -> dict[str, Any]:
    """The resolved config one split job depends on (its Snakemake params), local paths made absolute."""
    spec = dataset.to_dict()
    spec["options"] = resolve_paths(dataset.source, source_of(dataset).split_options(spec["options"], split), root)
    spec["splits"] = [split]
    return spec
