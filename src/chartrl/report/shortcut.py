"""The report's shortcut-filter section: each filtered dataset's card (``results/filter/{dataset}/card.json``,
written by ``chartrl shortcut filter``) under ``metrics["shortcut_filter"]``, and its panel, filled or saying why
not (no dataset sets the filter, or its job left no card)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chartrl.config import Config
from chartrl.report.helpers import make_panel


def collect_shortcut(config: Config, results: Path) -> dict[str, Any]:
    """Dataset -> its filter card, with the train series that read the filtered split (``trained_on_by``)."""
    out = {}
    for name in config.filtered_datasets:
        path = Path(results) / "filter" / name / "card.json"
        if path.is_file():
            card = json.loads(path.read_text())
            card["trained_on_by"] = [s.id for s in config.train_series if s.dataset == name and s.shortcut_filter]
            out[name] = card
    return out


def shortcut_panels(metrics: Mapping[str, Any], config: Config) -> list[dict[str, Any]]:
    """One panel per filtered dataset (its card's tables), or one panel saying that no dataset is filtered."""

    datasets = config.filtered_datasets
    if not datasets:
        reason = (
            "shortcut filter: not run; no dataset that a train series trains on sets shortcut_filter "
            "(datasets.<name>.shortcut_filter in the config)"
        )
        return [make_panel(metrics, "shortcut_filter", "Shortcut filter", [["shortcut_filter"]], reason)]
    return [
        make_panel(
            metrics,
            f"shortcut_filter/{name}",
            f"Shortcut filter of {name}'s train split",
            [["shortcut_filter", name, "by_question_type"]],
            f"shortcut filter of {name}: no card (results/filter/{name}/card.json); its shortcut_filter job did not "
            "run or failed (see results/logs/filter/)",
        )
        for name in datasets
    ]
