"""A verl run's metrics, exported from its MLflow run to ``results/runs/{series}/metrics.jsonl``: one JSON object
per step, like the local trainer's, so the report does not care which backend ran.

verl 0.9.1 (the v1 trainer, ``verl/trainer/ppo/v1/trainer_base.py``) logs, per training step, the batch's
statistics (``compute_data_metrics`` in ``verl/trainer/ppo/metric_utils.py``: ``critic/score/mean``,
``response_length/mean``, ``num_turns/mean``, ...) and the actor's (``actor/pg_loss``, ``actor/entropy``, ...),
but none of the reward's extra info: our reward's parts and protocol indicators reach the metrics only at
validation, where ``_val_metrics_update`` averages every numeric key our reward function returned per data source
and question, as ``val-core/<source>/<key>/mean@N`` (the core variable) or ``val-aux/<source>/<key>/mean@N``
(MLflow keys carry ``@`` as ``_at_``: verl's logger sanitises them).

Every key is kept; :data:`ALIASES` adds the keys the report reads under the local trainer's names. Validation
entries are read from ``mean@N`` for the largest N logged (one value per question, averaged over the questions
of a data source) and averaged over data sources; a ratio (tool success: executed calls over calls) is the ratio
of those averages, which is the local trainer's ratio whenever there is one data source.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chartrl.files import write_atomically

PROGRESS_KEY = "critic/score/mean"
"""A metric verl logs at every training step (the mean sequence score)."""


@dataclass(frozen=True)
class Alias:
    """One of the local trainer's keys computed from verl's: ``step`` (a training-step metric, copied) or
    ``val`` (a validation key of our reward function's extra info, ``over``: divided by another one)."""

    step: str | None = None
    val: str | None = None
    over: str | None = None
    why: str = ""


ALIASES: dict[str, Alias] = {
    "reward/overall": Alias(step="critic/score/mean", why="the mean sequence score: our reward's overall"),
    "rollout/response_length": Alias(
        step="response_length/mean",
        why="tokens of the response; verl counts the tool observation's tokens (loss mask 0) too, the local "
        "trainer only the sampled ones",
    ),
    "val/accuracy": Alias(val="accuracy", why="relaxed accuracy of the greedy validation answers"),
    "val/tool_call_ratio": Alias(val="protocol_tool_call", why="validation episodes with a tool call"),
    "val/tool_success": Alias(
        val="protocol_tool_executed", over="protocol_tool_call", why="calls that executed, over calls"
    ),
    "val/format_rate": Alias(val="protocol_well_formed", why="validation final turns in the answer format"),
    "val/correct_label_ratio": Alias(
        val="protocol_correct_label",
        over="protocol_labelled_call",
        why="calls keeping every label the question names, over calls on questions naming labels",
    ),
}
VAL_REWARD_PREFIX = "val_reward/"
"""Every other numeric key of our reward at validation (``overall`` and the reward's parts) is added as
``val_reward/<part>``: verl logs no training-step parts, so the report's reward-parts figure of a verl run reads
these (validation, greedy) instead of ``reward/<part>`` (training rollouts)."""
NOT_PARTS = {"score", "reward", "acc", "acc_success_only", "row_id"}
VAL_KEY = re.compile(r"^val-(?:core|aux)/(?P<source>[^/]+)/(?P<var>[^/]+)/mean(?:@|_at_)(?P<n>\d+)$")


def run_history(client, run_id: str) -> dict[int, dict[str, float]]:
    """step -> {key: value} for every metric of the run (the last value of a step wins)."""
    run = client.get_run(run_id)
    steps: dict[int, dict[str, float]] = {}
    for key in sorted(run.data.metrics):
        for metric in sorted(client.get_metric_history(run_id, key), key=lambda m: (m.step, m.timestamp)):
            steps.setdefault(int(metric.step), {})[key] = float(metric.value)
    return dict(sorted(steps.items()))


def validation_means(metrics: Mapping[str, float]) -> dict[str, float]:
    """variable -> its ``mean@N`` (largest N) averaged over data sources, for every validation variable logged."""
    best: dict[tuple[str, str], tuple[int, float]] = {}
    for key, value in metrics.items():
        match = VAL_KEY.match(key)
        if match:
            slot, n = (match.group("var"), match.group("source")), int(match.group("n"))
            if slot not in best or n > best[slot][0]:
                best[slot] = (n, value)
    by_var: dict[str, list[float]] = {}
    for (var, _), (_, value) in best.items():
        by_var.setdefault(var, []).append(value)
    return {var: sum(values) / len(values) for var, values in by_var.items()}


def with_aliases(metrics: Mapping[str, float]) -> dict[str, float]:
    """``metrics`` (one step of a verl run) with the local trainer's keys added (:data:`ALIASES`)."""
    out = dict(metrics)
    val = validation_means(metrics)
    for ours, alias in ALIASES.items():
        if alias.step is not None and alias.step in metrics:
            out[ours] = metrics[alias.step]
        elif alias.val is not None and alias.val in val:
            if alias.over is None:
                out[ours] = val[alias.val]
            elif alias.over in val:
                out[ours] = val[alias.val] / val[alias.over] if val[alias.over] else 0.0  # as the local trainer
    for var, value in val.items():
        if var not in NOT_PARTS and not var.startswith("protocol_"):
            out[VAL_REWARD_PREFIX + var] = value
    if "num_turns/mean" in metrics:  # tool calls per sample: verl's DeepEyes recipe reads num_turns / 2 - 1
        out["rollout/tool_calls"] = metrics["num_turns/mean"] / 2 - 1
        if "num_turns/max" in metrics:
            out["rollout/tool_calls_max"] = metrics["num_turns/max"] / 2 - 1
    return out


def export_metrics(tracking_uri: str, run_id: str, out: str | Path) -> list[dict[str, Any]]:
    """Write the run's history to ``out`` (JSON lines ``{"step": N, key: value, ...}``) and log the keys
    :func:`with_aliases` added into the run itself, at their steps, so MLflow shows a verl run under the local
    trainer's names too (a rerun finds them there and logs nothing twice); returns the lines."""
    import time

    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    history = run_history(client, run_id)
    lines = [{"step": step, **dict(sorted(with_aliases(metrics).items()))} for step, metrics in history.items()]
    now = int(time.time() * 1000)
    added = [
        Metric(key, value, now, line["step"])
        for line, metrics in zip(lines, history.values(), strict=True)
        for key, value in line.items()
        if key != "step" and key not in metrics
    ]
    for start in range(0, len(added), 1000):  # MLflow's batch limit
        client.log_batch(run_id, metrics=added[start : start + 1000])
    text = "".join(json.dumps(line) + "\n" for line in lines)
    write_atomically(out, lambda tmp: tmp.write_text(text))
    return lines


def val_history(lines: list[dict[str, Any]]) -> dict[int, float]:
    return {line["step"]: line["val/accuracy"] for line in lines if "val/accuracy" in line}


def trained_steps(lines: list[dict[str, Any]]) -> list[int]:
    """The training steps the exported history holds (validation-only steps are not training)."""
    return [line["step"] for line in lines if PROGRESS_KEY in line]


MEASURED = {
    "seconds_per_step": "timing_s/step",
    "tokens_per_gpu_second": "perf/throughput",
}
"""What a run measured, from verl's own metrics: a step's seconds (``compute_timing_metrics``) and its prompt and
response tokens per GPU-second over the whole step (``compute_throughout_metrics``: ``perf/throughput``)."""
PEAK_MEMORY = ("actor/perf/max_memory_allocated_gb", "actor/perf/max_memory_reserved_gb")
"""The FSDP worker's allocator peaks per GPU (``verl/workers/engine_workers.py``); vLLM's share is not in them."""


def measured_figures(lines: list[dict[str, Any]], longest: int) -> dict[str, float] | None:
    """The figures ``chartrl plan --tokens-per-gpu-second --fill`` takes, from a run's training steps: the median
    seconds per step and throughput over the steps after the first (which compiles and warms vLLM up; the only one
    when there is one), the median fill (``prompt_length/mean + response_length/mean`` over ``longest``, verl's
    prompt and response budget) and the peak memory per GPU over every step; None without a training step."""
    steps = [line for line in lines if PROGRESS_KEY in line]
    if not steps:
        return None
    settled = steps[1:] or steps

    def median(values: list[float]) -> float:
        ordered = sorted(values)
        middle = len(ordered) // 2
        return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2

    figures = {
        name: median([line[key] for line in settled if key in line])
        for name, key in MEASURED.items()
        if any(key in line for line in settled)
    }
    lengths = [
        (line["prompt_length/mean"] + line["response_length/mean"]) / longest
        for line in settled
        if "prompt_length/mean" in line and "response_length/mean" in line
    ]
    if lengths:
        figures["fill"] = median(lengths)
    for key in PEAK_MEMORY:
        found = [line[key] for line in steps if key in line]
        if found:
            figures[key.rsplit("/", 1)[1]] = max(found)
    return figures


def replan_arguments(figures: Mapping[str, float]) -> str:
    """The ``chartrl plan`` arguments that price a study at a run's measured figures (empty when it has none)."""
    if "tokens_per_gpu_second" not in figures:
        return ""
    words = [f"--tokens-per-gpu-second {figures['tokens_per_gpu_second']:.0f}"]
    if "fill" in figures:
        words.insert(0, f"--fill {figures['fill']:.2f}")
    return " ".join(words)
