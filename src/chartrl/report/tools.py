"""Tool success per tool: how often each configured tool was called and how often it ran on the chart's boxes, in
training and on test.

Training: the local trainer's per-step counts (``rollout/tools/{name}/calls``, ``.../executed`` and
``.../failed/{kind}`` in ``results/runs/{series}/metrics.jsonl``), summed over each tool series'
steps. Test: the calls of the test
rollouts, summed over every source that rolled out on the test split: each train series' greedy and sampled
test-accuracy rollouts (``test`` and ``test_sampled`` of ``results/eval/{series}/test_accuracy.json``; the
shuffled-image and placebo controls left out) and each eval series' generations
(``results/eval/{series}/generations.parquet``, both backends). A call is counted for a tool when its text names
it (``chartrl.rollout.statistics.called_tools``: a call whose JSON names no known tool counts for none), executed
when it ran without an error, else failed under its error kind (``chartrl.tools.ERROR_KINDS``, or ``turn_limit``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chartrl.config import Config
from chartrl.report.helpers import make_panel, read_json
from chartrl.report.order import in_order
from chartrl.rollout.statistics import add_tool_counts, empty_tool_count, tool_counts
from chartrl.tools.observations import AXIS_WORDS
from chartrl.tools.registry import tool_spec

TEST_CONDITIONS = ("test", "test_sampled")
"""The test-accuracy conditions whose calls are counted (the controls show other charts or unedited ones)."""


def training_counts(metrics_file: Path) -> dict[str, dict[str, Any]]:
    """Per tool, calls, executed calls and failed calls by error kind, summed over a run's training steps
    (``rollout/tools/{name}/calls``, ``.../executed``, ``.../failed/{kind}``)."""
    total: dict[str, dict[str, Any]] = {}
    if not metrics_file.is_file():
        return total
    for line in metrics_file.read_text().splitlines():
        if not line.strip():
            continue
        step: dict[str, dict[str, Any]] = {}
        for key, value in json.loads(line).items():
            parts = key.split("/")
            if parts[:2] != ["rollout", "tools"] or len(parts) < 4:
                continue
            count = step.setdefault(parts[2], empty_tool_count())
            if len(parts) == 4 and parts[3] in ("calls", "executed"):
                count[parts[3]] = int(value)
            elif len(parts) == 5 and parts[3] == "failed":
                count["failed"][parts[4]] = int(value)
        total = add_tool_counts(total, step)
    return total


def generation_counts(path: Path) -> dict[str, dict[str, Any]]:
    """Per tool, calls, executed calls and failed calls by error kind over every sample of a generations file."""
    import pyarrow.parquet as pq

    records = pq.read_table(path, columns=["tool_calls", "tool_error_kinds"]).to_pylist()
    texts = [text for r in records for text in json.loads(r["tool_calls"])]
    kinds = [kind for r in records for kind in json.loads(r["tool_error_kinds"])]
    return tool_counts(texts, kinds)


def _rates(counts: Mapping[str, Mapping[str, Any]], names: list[str]) -> dict[str, dict[str, Any]]:
    """Every configured tool (and any other that was called), with its failed calls by error kind and its success
    rate (executed / calls)."""
    rows = {}
    for name in names + sorted(set(counts) - set(names)):
        count = counts.get(name, {})
        calls, executed = count.get("calls", 0), count.get("executed", 0)
        rows[name] = {
            "calls": calls,
            "executed": executed,
            "failed": dict(sorted((count.get("failed") or {}).items())),
            "success": executed / calls if calls else None,
        }
    return rows


def collect_tools(results: Path, config: Config) -> dict[str, Any]:
    """``{"names", "training": {"total", "series", "called"}, "test": {"total", "sources", "called"}}``. ``series``
    and ``sources``: the counts of every file read (empty where no call named a tool); ``total``: every configured
    tool (and any other called) with its calls, executed calls, failed calls by kind and success, empty when no
    file was read (zero counts are measured, a missing file is not); ``called``: the tools called at least once.
    With ``evaluate.tool_path_check``, ``path_check``: the check's results (None when its file is missing), and
    ``test.not_executed``: why each label tool that no test call ran did not run (:func:`not_executed_on_test`)."""
    names = list(config.tools.names)
    training: dict[str, dict[str, dict[str, Any]]] = {}
    sources: dict[str, dict[str, dict[str, Any]]] = {}
    for series in in_order(s for s in config.train_series if s.tools):
        metrics_file = results / "runs" / series.id / "metrics.jsonl"
        if metrics_file.is_file():
            training[series.id] = training_counts(metrics_file)
        accuracy_file = results / "eval" / series.id / "test_accuracy.json"
        if accuracy_file.is_file():
            data = json.loads(accuracy_file.read_text())
            for condition in TEST_CONDITIONS:
                if condition in data:
                    sources[f"{series.id} ({condition})"] = data[condition].get("tools") or {}
    for series in in_order(config.eval_series):
        path = results / "eval" / series.id / "generations.parquet"
        if path.is_file():
            sources[f"{series.id} (generations)"] = generation_counts(path)
    out: dict[str, Any] = {"names": names}
    for part, read, key in (("training", training, "series"), ("test", sources, "sources")):
        total: dict[str, dict[str, Any]] = {}
        for counts in read.values():
            total = add_tool_counts(total, counts)
        out[part] = {
            "total": _rates(total, names) if read else {},
            key: read,
            "called": sorted(name for name, count in total.items() if count["calls"]),
        }
    if config.evaluate.tool_path_check:
        check = read_json(results / "tools" / "path_check.json")
        out["path_check"] = check
        if check is not None and out["test"]["total"]:
            out["test"]["not_executed"] = not_executed_on_test(out["test"]["total"], check, names)
    if not training:  # said in place, beside the empty columns
        out["training"]["why_empty"] = (
            "verl logs no per-tool counts of its training steps"
            if config.backend == "verl"
            else "no results/runs/{series}/metrics.jsonl of a tool series was read"
        )
    return out


def not_executed_on_test(
    total: Mapping[str, Mapping[str, Any]], check: Mapping[str, Any], names: list[str]
) -> dict[str, str]:
    """Per configured label tool that no test call ran, one sentence: how its calls ended (or that none named it),
    and the tool-path check's count of the test charts with boxes on the tool's axis that share a label with a train
    chart. The policy names the labels it learned on the train charts, so on a chart none of whose labels a train
    chart has, a call runs only if the policy copies an unseen label from the prompt's list."""
    seen = check.get("test_labels_seen_in_train") or {}
    out = {}
    for name in names:
        axis = tool_spec(name).axis
        count = total.get(name) or {}
        if axis is None or count.get("executed"):
            continue
        word = AXIS_WORDS[axis]
        charts = (seen.get(axis) or {}).get("charts", 0)
        sharing = (seen.get(axis) or {}).get("sharing_a_train_label", 0)
        failed = ", ".join(f"{kind} {n}" for kind, n in sorted((count.get("failed") or {}).items()))
        calls = count.get("calls", 0)
        said = (f"0 of its {calls} test calls ran" + (f" (failed: {failed})" if failed else "")) if calls else ""
        if not charts:
            out[name] = f"{said or 'no test call named it'}: no test chart has {word} boxes for it to run on."
        elif not calls:
            out[name] = (
                f"no test call named it; {sharing} of the test split's {charts} charts with {word} boxes share a "
                "label with a train chart."
            )
        elif not sharing:
            out[name] = (
                f"{said}: none of the test split's {charts} charts with {word} boxes has a label that a train chart "
                "has, so a call runs there only if the policy copies a label it never saw in training from the "
                "prompt's list."
            )
        else:
            out[name] = (
                f"{said}; {sharing} of the test split's {charts} charts with {word} boxes share a label with a "
                "train chart."
            )
    return out


def tool_panels(metrics: Mapping[str, Any], config: Config) -> list[dict[str, Any]]:
    if not config.tools.names or not any(s.tools for s in config.train_series):
        reason = "tool success per tool: no train series uses tools in this config"
    elif config.backend == "verl":
        reason = (
            "tool success per tool: no results/eval/{series}/generations.parquet (verl logs no per-tool counts of "
            "its training steps)"
        )
    else:
        reason = (
            "tool success per tool: no results/runs/{series}/metrics.jsonl of a tool series, and no "
            "results/eval/{series}/test_accuracy.json or generations.parquet"
        )
    data = [["tools", "training", "total"], ["tools", "test", "total"]]
    panels = [make_panel(metrics, "tools", "Tool success per tool", data, reason)]
    if config.evaluate.tool_path_check:
        missing = "the tool-path check: no results/tools/path_check.json (rule tool_path_check)"
        title = "Tool-path check (scripted calls, not the policy)"
        panels.append(make_panel(metrics, "tools/path_check", title, [["tools", "path_check", "tools"]], missing))
    return panels
