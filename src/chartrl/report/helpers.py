"""What the report's modules share: a panel and whether metrics.json holds its numbers, the reasons and file
names panels give, the files the stages wrote (read where they exist; on the verl backend, the test accuracy read
from eval series' generations), and the binomial interval of a 0/1 accuracy. Every other module of
``chartrl.report`` may import it; it imports none of them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from chartrl.config import Config, EvalSeries
from chartrl.data.contract import read_split
from chartrl.evaluate.accuracy import generation_test_records, summarise


HEADLINE = "headline"
"""The headline test accuracy's row among the question types: the types ``evaluate.headline_types`` names."""


def published_missing(path: str, job: str) -> str:
    """Why a scores or test file that should carry published-rule scores has none (``job``: the rule that writes
    it)."""
    return f"{path} has no published score (written by an older chartrl): rerun its {job} job"


def headline_key(config: Config) -> str:
    """Where a test table holds the headline accuracy: ``headline`` when the config names its types, else ``all``."""
    return "all" if config.evaluate.headline_types is None else HEADLINE


def _get(metrics: Mapping[str, Any], path: Sequence[str]) -> Any:
    node: Any = metrics
    for part in path:
        if not isinstance(node, Mapping):
            return None
        # keys compared as text: metrics.json turns the integer keys of the collected metrics (seeds) into strings
        node = next((value for key, value in node.items() if str(key) == str(part)), None)
    return node


def has_data(metrics: Mapping[str, Any], paths: Sequence[Sequence[str]]) -> bool:
    """Does any of ``paths`` into ``metrics`` hold something (a non-empty list or mapping, or a number)?"""
    for path in paths:
        value = _get(metrics, path)
        if isinstance(value, Mapping | list | tuple) and value or isinstance(value, int | float | str):
            return True
    return False


def make_panel(
    metrics: Mapping[str, Any],
    pid: str,
    title: str,
    data: list[list[str]],
    reason: str | None,
    note: str | None = None,
) -> dict[str, Any]:
    """One panel of the report (``chartrl.report.panels`` describes the contract): filled when ``metrics`` holds
    something at one of the ``data`` paths, else showing ``reason`` in its place."""
    filled = has_data(metrics, data)
    return {
        "id": pid,
        "title": title,
        "filled": filled,
        "data": data,
        "reason": None if filled else reason,
        "note": note,
    }


def run_files(members: Sequence[str]) -> str:
    """The metrics files of the train series ``members``, for a reason that names what was looked for."""
    return ", ".join(f"results/runs/{sid}/metrics.jsonl" for sid in members)


def no_generations_reason(config: Config, missing: Sequence[str]) -> str:
    """Why the series ``missing`` have no test results, on the config's backend."""
    if config.backend == "verl":
        return (
            f"{', '.join(missing)}: no test generations (on the verl backend a train series is tested only through "
            "an eval series of it on the evaluate split)"
        )
    return f"{', '.join(missing)}: no results/eval/{{series}}/test_accuracy.json"


def read_json(path: Path) -> Any | None:
    """The JSON file at ``path``, or None where it does not exist."""
    return json.loads(path.read_text()) if path.is_file() else None


def split_rows(results: Path, dataset: str, split: str) -> int | None:
    """The rows of a dataset's split, from its data card (None without a card)."""
    card = read_json(results / "data" / dataset / "card.json")
    return (card or {}).get("splits", {}).get(split, {}).get("rows")


def binary_interval(mean: float, n: int, confidence: float) -> tuple[float, float]:
    """The percentile bootstrap interval of a mean of ``n`` 0/1 scores, exactly (resampling the questions of a
    0/1 accuracy is a binomial draw, so its quantiles are the binomial's): what ``bootstrap_mean`` converges to."""
    from scipy.stats import binom

    tail = (1 - confidence) / 2
    return float(binom.ppf(tail, n, mean)) / n, float(binom.ppf(1 - tail, n, mean)) / n


def eval_series_of_generations(config: Config) -> dict[str, list[EvalSeries]]:
    """Generating series -> every eval series that scores its generations."""
    groups: dict[tuple, list[EvalSeries]] = {}
    for series in config.eval_series:
        groups.setdefault((series.of, str(series.checkpoint), series.dataset, series.split), []).append(series)
    return {members[0].id: members for members in groups.values()}


def verl_test_accuracy(results: Path, config: Config) -> tuple[dict[str, Any], dict[str, str]]:
    """On the verl backend there is no ``test_accuracy`` rule (it rolls out with the local policy): each train
    series' test accuracy per question type comes from the test generations of an eval series of it on the
    evaluate split, its last checkpoint if one names it, else the checkpoint an eval series names (the study
    evaluates named steps: e1 at 65), read as the local rule reads its rollouts
    (``chartrl.evaluate.accuracy``); the generations contract is the same on both backends. Returns the
    ``test`` condition of each series found and, per series, the eval series whose generations it read."""
    import pyarrow.parquet as pq

    dataset, split = config.resolved["evaluate"]["dataset"], config.resolved["evaluate"]["split"]
    owners = eval_series_of_generations(config)
    sources = {}
    last_first = sorted(
        owners.items(), key=lambda item: str(item[1][0].checkpoint) not in ("last", str(config.train.steps))
    )
    for owner, members in last_first:
        first = members[0]
        if (first.dataset, first.split) == (dataset, split):
            if (results / "eval" / owner / "generations.parquet").is_file():
                sources.setdefault(first.of, owner)
    split_file = results / "data" / dataset / f"{split}.parquet"
    if not sources or not split_file.is_file():
        return {}, {}
    rows = read_split(split_file)
    raw = {}
    for sid, owner in sources.items():
        generations = pq.read_table(results / "eval" / owner / "generations.parquet").to_pylist()
        records = generation_test_records(generations, rows, config.evaluate.year_rule)
        raw[sid] = {"test": {**summarise(records), "items": records, "generations": owner}}
    return raw, sources
