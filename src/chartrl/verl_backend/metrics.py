"""A verl run's metrics, exported from its MLflow run to ``results/runs/{series}/metrics.jsonl``: one JSON object
per step, like the local trainer's, so the report does not care which backend ran.

verl logs its own names (``critic/score/mean``, ``actor/pg_loss``, ``val-aux/<data source>/<part>/mean@N``, with
``@`` written ``_at_`` in MLflow keys). Every key is kept; the keys the report reads are added under the local
trainer's names:

- ``reward/overall``: ``critic/score/mean`` (the mean sequence score: our reward's overall);
- ``val/accuracy``: the mean over data sources of the validation ``accuracy`` part (``mean@N`` for the largest
  N), i.e. the relaxed accuracy of greedy answers on the validation questions, as the local trainer's.

A step logged twice (verl resumed from a checkpoint older than the last logged step) keeps its last value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chartrl.files import write_atomically

PROGRESS_KEY = "critic/score/mean"
"""A metric verl logs at every training step (the mean sequence score)."""
ALIASES = {"reward/overall": PROGRESS_KEY}
VAL_ACCURACY = re.compile(r"^val-(?:core|aux)/(?P<source>[^/]+)/accuracy/mean(?:@|_at_)(?P<n>\d+)$")


def run_history(client, run_id: str) -> dict[int, dict[str, float]]:
    """step -> {key: value} for every metric of the run (the last value of a step wins)."""
    run = client.get_run(run_id)
    steps: dict[int, dict[str, float]] = {}
    for key in sorted(run.data.metrics):
        for metric in sorted(client.get_metric_history(run_id, key), key=lambda m: (m.step, m.timestamp)):
            steps.setdefault(int(metric.step), {})[key] = float(metric.value)
    return dict(sorted(steps.items()))


def with_aliases(metrics: Mapping[str, float]) -> dict[str, float]:
    out = dict(metrics)
    for ours, theirs in ALIASES.items():
        if theirs in metrics:
            out[ours] = metrics[theirs]
    best: dict[str, tuple[int, float]] = {}
    for key, value in metrics.items():
        match = VAL_ACCURACY.match(key)
        if match:
            n = int(match.group("n"))
            if match.group("source") not in best or n > best[match.group("source")][0]:
                best[match.group("source")] = (n, value)
    if best:
        out["val/accuracy"] = sum(value for _, value in best.values()) / len(best)
    return out


def export_metrics(tracking_uri: str, run_id: str, out: str | Path) -> list[dict[str, Any]]:
    """Write the run's history to ``out`` (JSON lines ``{"step": N, key: value, ...}``); returns the lines."""
    from mlflow.tracking import MlflowClient

    history = run_history(MlflowClient(tracking_uri=tracking_uri), run_id)
    lines = [{"step": step, **dict(sorted(with_aliases(metrics).items()))} for step, metrics in history.items()]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    write_atomically(out, lambda tmp: tmp.write_text(text))
    return lines


def val_history(lines: list[dict[str, Any]]) -> dict[int, float]:
    return {line["step"]: line["val/accuracy"] for line in lines if "val/accuracy" in line}


def trained_steps(lines: list[dict[str, Any]]) -> list[int]:
    """The training steps the exported history holds (validation-only steps are not training)."""
    return [line["step"] for line in lines if PROGRESS_KEY in line]
