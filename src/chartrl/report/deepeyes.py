"""The report's DeepEyes section: the figures verl's DeepEyes recipe reads, for every train series trained with the
``deepeyes`` reward (none in the embedded default, whose report is unchanged).

- accuracy before and after training: greedy validation accuracy at the first and the last validation step
  (binomial intervals: no per-question validation results are logged), and on test the eval series' accuracy
  under each of its scorers beside the starting policy's (the warm-started model with tools, local backend), each
  with its bootstrap interval over questions;
- tool calls per sample: the distribution of calls per test answer (0, 1, 2, ...) and its mean with a bootstrap
  interval, from the eval series' generations (both backends write the same contract);
- tool calls per step: ``rollout/tool_calls`` of the training metrics (the local trainer logs it with several tool
  turns; a verl run's export computes it from ``num_turns/mean`` as the recipe does, ``num_turns / 2 - 1``), else the
  share of rollouts with a call (one tool turn: at most one call each), with the tool bonus paid and the reward.

:func:`collect_deepeyes` builds ``metrics["deepeyes"]``; :func:`deepeyes_panels` its panel, filled or saying why not.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chartrl.config import Config
from chartrl.evaluate.intervals import bootstrap_mean
from chartrl.report.helpers import binary_interval, make_panel

REWARD = "deepeyes"
STEP_KEYS = {
    "tool_calls": "rollout/tool_calls",
    "tool_call_ratio": "rollout/tool_call_ratio",
    "tool_bonus": "reward/tool_bonus",
    "reward": "reward/overall",
}


def deepeyes_series(config: Config) -> list[str]:
    return [s.id for s in config.train_series if s.reward.name == REWARD]


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def _interval(scores: list[float], config: Config) -> dict[str, Any]:
    ev = config.evaluate
    return bootstrap_mean(scores, samples=ev.bootstrap_samples, confidence=ev.confidence, seed=ev.seed)


def _validation(lines: list[dict[str, Any]], config: Config) -> dict[str, Any] | None:
    points = [(line["step"], line["val/accuracy"]) for line in lines if "val/accuracy" in line]
    if not points:
        return None
    n = config.train.val_rows

    def point(step: int, value: float) -> dict[str, Any]:
        low, high = binary_interval(value, n, config.evaluate.confidence)
        return {"step": step, "accuracy": value, "low": low, "high": high, "n": n}

    return {"before": point(*points[0]), "after": point(*points[-1]), "interval": "binomial"}


def _per_step(lines: list[dict[str, Any]]) -> dict[str, Any]:
    steps = [
        {"step": line["step"], **{name: line[key] for name, key in STEP_KEYS.items() if key in line}}
        for line in lines
        if "rollout/tool_calls" in line or "rollout/tool_call_ratio" in line  # training steps, not validation-only
    ]
    counted = any("tool_calls" in s for s in steps)
    return {
        "steps": steps,
        "calls": "rollout/tool_calls (mean calls per rollout)"
        if counted
        else "rollout/tool_call_ratio (one tool turn: at most one call per rollout, so the share is the mean)",
    }


def _generations(results: Path, config: Config, train_id: str) -> tuple[str, Path] | None:
    for series in config.eval_series:
        path = results / "eval" / series.id / "generations.parquet"
        if series.of == train_id and path.is_file():
            return series.id, path
    return None


def _per_sample(path: Path, config: Config) -> dict[str, Any]:
    import pyarrow.parquet as pq

    rows = pq.read_table(path, columns=["tool_calls"]).to_pylist()
    counts = [len(json.loads(r["tool_calls"] or "[]")) for r in rows]
    return {
        "distribution": {str(k): v for k, v in sorted(Counter(counts).items())},
        "mean": _interval([float(c) for c in counts], config),
        "answers": len(counts),
    }


def _test(results: Path, config: Config, train_id: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    evals = [s for s in config.eval_series if s.of == train_id]
    for series in evals:
        for scorer in series.scorers:
            path = results / "eval" / series.id / f"scores_{scorer}.json"
            if not path.is_file():
                continue
            data = json.loads(path.read_text())
            # items without a verdict (judge failures) carry no accuracy and stay out, as in the scores file
            scores = [float(i["accuracy"]) for i in data.get("items", []) if i.get("accuracy") is not None]
            out[f"{series.id}/{scorer}"] = {
                "series": series.id,
                "scorer": scorer,
                "dataset": series.dataset,
                "checkpoint": series.checkpoint,
                **_interval(scores, config),
            }
    start = results / "eval" / "warmstart" / "test_accuracy_tools_on.json"
    same_data = any(s.dataset == config.evaluate.dataset for s in evals)  # the start is tested on evaluate.dataset
    if start.is_file() and same_data:  # the starting policy, tools on (local backend: the warm-started tiny model)
        items = json.loads(start.read_text())["test"]["items"]
        out["start/rule"] = {
            "series": "warm-started model (tools on)",
            "scorer": "rule",
            "dataset": config.evaluate.dataset,
            "checkpoint": 0,
            **_interval([float(i["score"]) for i in items], config),
        }
    return out


def collect_deepeyes(results: Path, config: Config) -> dict[str, Any]:
    """``{"series": {train_id: {"validation", "per_step", "per_sample", "test"}}, "confidence"}``, or {} when no
    train series uses the deepeyes reward."""
    ids = deepeyes_series(config)
    if not ids:
        return {}
    results = Path(results)
    out: dict[str, Any] = {"confidence": config.evaluate.confidence, "backend": config.backend, "series": {}}
    for sid in ids:
        lines = _lines(results / "runs" / sid / "metrics.jsonl")
        generations = _generations(results, config, sid)
        entry: dict[str, Any] = {
            "validation": _validation(lines, config),
            "per_step": _per_step(lines),
            "test": _test(results, config, sid),
        }
        if generations is not None:
            entry["per_sample"] = {"generations": generations[0], **_per_sample(generations[1], config)}
        out["series"][sid] = entry
    return out


def deepeyes_panels(metrics: Mapping[str, Any], config: Config) -> list[dict[str, Any]]:
    ids = deepeyes_series(config)
    if not ids:
        return []
    section = metrics.get("deepeyes") or {}
    panels = []
    for sid in ids:
        entry = (section.get("series") or {}).get(sid) or {}
        before_after = [["deepeyes", "series", sid, "test"]] if entry.get("test") else []
        if entry.get("validation"):
            before_after.append(["deepeyes", "series", sid, "validation"])
        panels.append(
            make_panel(
                metrics,
                f"deepeyes/{sid}/accuracy",
                f"{sid}: accuracy before and after training",
                before_after,
                f"{sid}: no validation accuracy in results/runs/{sid}/metrics.jsonl and no scores of an eval series "
                f"of {sid} under results/eval/",
            )
        )
        panels.append(
            make_panel(
                metrics,
                f"deepeyes/{sid}/tool_calls",
                f"{sid}: tool calls per sample and per step",
                [["deepeyes", "series", sid, "per_step", "steps"]]
                + ([["deepeyes", "series", sid, "per_sample", "distribution"]] if entry.get("per_sample") else []),
                f"{sid}: no training step in results/runs/{sid}/metrics.jsonl logged rollout/tool_calls or "
                "rollout/tool_call_ratio",
                None if entry.get("per_sample") else f"{sid}: no eval series' generations, so no per-sample counts",
            )
        )
    return panels
