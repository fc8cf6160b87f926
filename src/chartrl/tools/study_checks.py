"""Checks that a study's tools have something to edit, before anything runs.

A focus tool (``focus_on_{x,y}_values_with_*``) edits the label boxes of a chart; on a chart without them every
call fails (``no_boxes``) and is punished, so a tool series trained on box-less data measures nothing. Which
datasets can carry boxes is said by their source (``chartrl.data.sources.Source.box_axes``), from the config alone:
a ChartQA copy read from the hub's parquet layout never has them, the original release has them from its
``annotations/`` folders or a ReFocus box file. The data stage then checks the share of questions that really
have boxes (``data.min_box_coverage``).
"""

from __future__ import annotations

from chartrl.config import Config
from chartrl.data.sources import source_of
from chartrl.tools.registry import tool_spec


def tool_data_problems(config: Config) -> list[str]:
    """One problem per dataset on which tool series train although none of the offered tools could edit it."""
    axes = {name: tool_spec(name).axis for name in config.tools.names}
    if any(axis is None for axis in axes.values()):
        return []  # zoom_in needs no boxes
    problems = []
    for dataset_name in config.tool_train_datasets():
        dataset = config.datasets[dataset_name]
        available = source_of(dataset).box_axes(dataset, "train")
        if set(axes.values()) & available:
            continue
        series = ", ".join(s.id for s in config.train_series if s.tools and s.dataset == dataset_name)
        problems.append(
            f"tool series {series} train on dataset '{dataset_name}' (source {dataset.source}), whose charts have no "
            f"{' or '.join(sorted(set(axes.values())))} label boxes, but every tool offered ({', '.join(axes)}) edits "
            f"label boxes: every call would fail (no_boxes). {_fix(dataset_name, dataset.source)}"
        )
    return problems


def _fix(name: str, source: str) -> str:
    if source == "chartqa_original":
        return (
            f"Unpack the ChartQA release with its annotations/ folders and set datasets.{name}.annotations: true, or "
            f"give datasets.{name}.refocus_boxes a ReFocus box file for the train split"
        )
    if source == "chartqa_hf":
        return (
            f"The hub's parquet layout carries no boxes: read the original release instead (datasets.{name}.source: "
            "chartqa_original with annotations: true, or refocus_boxes), or offer zoom_in (tools.names)"
        )
    return "Train the tool series on a dataset with bar charts and boxes, or offer zoom_in (tools.names)"
