"""The report's section for a recipe overlay (config/geoqa_r1v.yaml, config/geoqa_mc.yaml): the figures each recipe
reports, for every eval series scored by a recipe's own scorer (``r1v``, ``multiple_choice``), before training
(``checkpoint: start``) and after: accuracy, the format rate (answers in the recipe's form) and the accuracy among
well-formed answers, each with its bootstrap interval; the recipe's published figures beside them
(``reference_values.test``); and per train series the degenerate groups (all rewards equal) its updates skipped.

:func:`collect_recipes` adds ``metrics["recipes"]`` only for a config with such a series (the study's report is
unchanged); :func:`recipe_panels` gives its panel, filled or saying why not.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chartrl.config import Config, to_plain
from chartrl.evaluate.intervals import bootstrap_mean
from chartrl.evaluate.matrix import RECIPE_SCORERS
from chartrl.report.helpers import make_panel


def recipe_series(config: Config) -> list[tuple[str, str]]:
    """(eval series, recipe scorer) for every eval series a recipe scorer reads, in config order."""
    return [(s.id, scorer) for s in config.eval_series for scorer in s.scorers if scorer in RECIPE_SCORERS]


def _interval(values: list[float], config: Config) -> dict[str, Any]:
    evaluate = config.evaluate
    return bootstrap_mean(
        values, samples=evaluate.bootstrap_samples, confidence=evaluate.confidence, seed=evaluate.seed
    )


def _figures(scores: Mapping[str, Any], config: Config) -> dict[str, Any]:
    items = [i for i in scores["items"] if i["accuracy"] is not None]
    formed = [i for i in items if i.get("format") == 1.0]
    return {
        "n": len(items),
        "well_formed": len(formed),
        "accuracy": _interval([i["accuracy"] for i in items], config),
        "format_rate": _interval([float(i.get("format") == 1.0) for i in items], config),
        "accuracy_well_formed": _interval([i["accuracy"] for i in formed], config),
    }


def _degenerate(results: Path, sid: str, prompts_per_step: int) -> dict[str, Any] | None:
    """Groups whose rewards were all equal, counted over the run's steps (``train/degenerate_fraction`` of each
    step times the step's groups); the local trainer leaves them out of the update (``train.exclude_degenerate``)."""
    path = results / "runs" / sid / "metrics.jsonl"
    if not path.is_file():
        return None
    steps = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    fractions = [m["train/degenerate_fraction"] for m in steps if "train/degenerate_fraction" in m]
    if not fractions:
        return None
    return {
        "steps": len(fractions),
        "groups": len(fractions) * prompts_per_step,
        "degenerate": round(sum(fractions) * prompts_per_step),
        "skipped_updates": sum(1 for m in steps if m.get("actor/skipped") == 1),
    }


def collect_recipes(results: Path, config: Config) -> dict[str, Any]:
    """``{"recipes": {"series": {sid: {...}}, "degenerate": {train sid: {...}}, "source": ...}}``, or ``{}`` when
    no eval series uses a recipe scorer."""
    wanted = recipe_series(config)
    if not wanted:
        return {}
    results = Path(results)
    out: dict[str, Any] = {"series": {}, "degenerate": {}, "source": config.reference_values.source}
    for sid, scorer in wanted:
        series = config.series[sid]
        path = results / "eval" / sid / f"scores_{scorer}.json"
        entry: dict[str, Any] = {"scorer": scorer, "of": series.of, "checkpoint": series.checkpoint}
        if path.is_file():
            entry.update(_figures(json.loads(path.read_text()), config))
        reference = config.reference_values.test.get(sid)
        if reference is not None:
            entry["reference"] = to_plain(reference)
        out["series"][sid] = entry
    for series in config.train_series:
        counted = _degenerate(results, series.id, config.train_of(series.id).prompts_per_step)
        if counted is not None:
            out["degenerate"][series.id] = {
                **counted,
                "exclude_degenerate": config.train_of(series.id).exclude_degenerate,
            }
    return {"recipes": out}


def recipe_panels(metrics: Mapping[str, Any], config: Config) -> list[dict[str, Any]]:
    wanted = recipe_series(config)
    if not wanted:
        return []
    data = [["recipes", "series", sid, "accuracy"] for sid, _ in wanted]
    missing = ", ".join(f"results/eval/{sid}/scores_{scorer}.json" for sid, scorer in wanted)
    note = None
    if config.backend == "verl":
        note = (
            "degenerate groups on verl: verl logs no per-group count, so none is shown; with grpo_mean or drgrpo "
            "(no std division) such a group's advantage is exactly 0 and adds no policy gradient"
        )
    return [
        make_panel(metrics, "recipes", "The recipe's figures: before and after training", data, f"no {missing}", note)
    ]
