"""The report's test curves, tool-placebo control and answer rules: what they read, their panels and the figure.

- **Test curve** (``results/eval/{series}/test_curve.json``, rule ``test_curve``): greedy test accuracy of every
  checkpoint a train series kept, on the first ``evaluate.curve_rows`` test questions, with a bootstrap interval per
  point and the checkpoint each eval series of it picks marked: the eval points in context.
- **Tool-placebo control** (the ``test_placebo`` condition of each tool policy's ``test_accuracy.json``): the same
  greedy test, but each call that ran shows the unedited chart. The edit's effect is accuracy minus placebo
  accuracy on the same questions (a paired bootstrap); what survives the placebo comes from the second look.
- **Answer rules**: the year rule of relaxed accuracy (``chartrl.answers``) behind each number: each train series'
  reward, each scores file, each test-accuracy and test-curve file.

:func:`collect_section` adds ``test_curves``, ``tool_placebo`` and ``answer_rules`` to metrics.json,
:func:`panels` their panels (each filled or with a computed reason), :func:`curve_figure` the plotly figure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from chartrl.config import Config
from chartrl.evaluate.intervals import bootstrap_mean, bootstrap_paired_gap
from chartrl.report.helpers import HEADLINE, make_panel, read_json
from chartrl.rewards.registry import accuracy_signal

VERL_REASONS = {
    "test_curve": "test curve: not run on the verl backend (each kept checkpoint would need its own model merge and "
    "verl generation of the test split; the checkpoints the eval series name are tested, see Scored evaluation "
    "series)",
    "tool_placebo": "tool-placebo control: not run on the verl backend (it needs a second verl generation of the "
    "test split whose tools return the unedited chart)",
}
OLD_FILES_RULE = "strict"
"""The year rule of files written before the option existed (they do not record one)."""


def curve_series(config: Config) -> list[str]:
    """The train series an eval series reads, in config order: the ones with a test curve."""
    wanted = {s.of for s in config.eval_series}
    return [s.id for s in config.train_series if s.id in wanted]


def _by_type(items: Sequence[Mapping[str, Any]], config: Config) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {"all": {}}
    for item in items:
        out.setdefault(item["question_type"], {})[item["id"]] = item["score"]
        out["all"][item["id"]] = item["score"]
        if config.evaluate.headline_types is not None and config.evaluate.in_headline(item["question_type"]):
            out.setdefault(HEADLINE, {})[item["id"]] = item["score"]
    return out


def test_curves(results: Path, config: Config) -> dict[str, Any]:
    """Per curve series: each point's step, source and accuracy per question type with its bootstrap interval,
    and the step each eval series picks."""
    ev = config.evaluate
    out: dict[str, Any] = {"rows": ev.curve_rows, "series": {}}
    for sid in curve_series(config):
        data = read_json(results / "eval" / sid / "test_curve.json")
        if data is None:
            continue
        points = []
        for point in data["points"]:
            scores = _by_type(point["items"], config)
            intervals = {
                qtype: bootstrap_mean(
                    list(by_id.values()), samples=ev.bootstrap_samples, confidence=ev.confidence, seed=ev.seed
                )
                for qtype, by_id in sorted(scores.items())
            }
            points.append({"step": point["step"], "source": point["source"], "by_question_type": intervals})
        out["series"][sid] = {
            "points": points,
            "chosen": data["chosen"],
            "rows": data["rows"],
            "year_rule": data["year_rule"],
            "tools": data["with_tools"],
        }
    return out


def _test_accuracy_files(results: Path, config: Config) -> dict[str, Path]:
    files = {s.id: results / "eval" / s.id / "test_accuracy.json" for s in config.train_series}
    files["warmstart (tools)"] = results / "eval" / "warmstart" / "test_accuracy_tools_on.json"
    files["warmstart (no tool)"] = results / "eval" / "warmstart" / "test_accuracy_tools_off.json"
    return files


def tool_placebo(results: Path, config: Config) -> dict[str, Any]:
    """Per tool policy and question type: greedy test accuracy, the placebo's (unedited chart after each call) and
    the edit's effect (accuracy minus placebo, paired over the same questions), each with its interval; and the
    shuffled-image control's accuracy beside them."""
    ev = config.evaluate
    kw = {"samples": ev.bootstrap_samples, "confidence": ev.confidence, "seed": ev.seed}
    out: dict[str, Any] = {}
    for name, path in _test_accuracy_files(results, config).items():
        data = read_json(path)
        if data is None or "test_placebo" not in data:
            continue
        test, placebo = _by_type(data["test"]["items"], config), _by_type(data["test_placebo"]["items"], config)
        shuffled = _by_type(data["test_shuffled_images"]["items"], config) if "test_shuffled_images" in data else {}
        out[name] = {
            qtype: {
                "test": bootstrap_mean(list(test[qtype].values()), **kw),
                "placebo": bootstrap_mean(list(placebo.get(qtype, {}).values()), **kw),
                "edit_effect": bootstrap_paired_gap(test[qtype], placebo.get(qtype, {}), **kw),
                "shuffled_images": bootstrap_mean(list(shuffled.get(qtype, {}).values()), **kw),
            }
            for qtype in sorted(test)
        }
        out[name]["tool_call_rate"] = {
            "test": data["test"]["tool_call_rate"],
            "placebo": data["test_placebo"]["tool_call_rate"],
        }
    return out


def answer_rules(results: Path, config: Config) -> dict[str, Any]:
    """The year rule behind each number: each train series' reward (or what grades it instead), each scores file,
    each test-accuracy and test-curve file (files that record none predate the option: the strict rule)."""
    rewards = {}
    for series in config.train_series:
        signal = accuracy_signal(series.reward.name, series.reward.params)
        rule = series.reward.params.get("year_rule")
        rewards[series.id] = rule if signal == "rule" else f"{signal} ({rule} where no verdict)" if rule else signal
    scores = {}
    for series in config.eval_series:
        for scorer in series.scorers:
            data = read_json(results / "eval" / series.id / f"scores_{scorer}.json")
            if data is not None:
                scores.setdefault(series.id, {})[scorer] = data["aggregate"].get("year_rule", OLD_FILES_RULE)
    tests = {
        name: data.get("year_rule", OLD_FILES_RULE)
        for name, path in _test_accuracy_files(results, config).items()
        if (data := read_json(path)) is not None
    }
    curves = {
        sid: data["year_rule"]
        for sid in curve_series(config)
        if (data := read_json(results / "eval" / sid / "test_curve.json")) is not None
    }
    return {
        "evaluate": config.evaluate.year_rule,
        "rewards": rewards,
        "scores": scores,
        "test_accuracy": tests,
        "test_curves": curves,
    }


def collect_section(results: Path, config: Config) -> dict[str, Any]:
    """metrics.json's ``test_curves``, ``tool_placebo`` and ``answer_rules``."""
    results = Path(results)
    return {
        "test_curves": test_curves(results, config),
        "tool_placebo": tool_placebo(results, config),
        "answer_rules": answer_rules(results, config),
    }


def panels(metrics: Mapping[str, Any], config: Config) -> list[dict[str, Any]]:
    """The test curve, tool-placebo and answer-rules panels, each filled or saying why not."""

    verl = config.backend == "verl"
    wanted = curve_series(config)
    if verl:
        curve_reason = VERL_REASONS["test_curve"]
    elif not wanted:
        curve_reason = "test curve: the config has no eval series, so no train series has a checkpoint picked"
    else:
        curve_reason = f"test curve: no results/eval/{{series}}/test_curve.json (series {', '.join(wanted)})"
    tool_policies = [s.id for s in config.train_series if s.tools] + (
        ["warmstart (tools)"] if config.model.path is None else []
    )
    if verl:
        placebo_reason = VERL_REASONS["tool_placebo"]
    elif not any(s.tools for s in config.train_series):
        placebo_reason = "tool-placebo control: no train series in this config calls tools"
    else:
        placebo_reason = "tool-placebo control: no test_placebo in any results/eval/{series}/test_accuracy.json"
    return [
        make_panel(
            metrics,
            "test_curve",
            "Test curve: every kept checkpoint",
            [["test_curves", "series", sid, "points"] for sid in wanted],
            curve_reason,
        ),
        make_panel(
            metrics,
            "tool_placebo",
            "Tool-placebo control",
            [["tool_placebo", name] for name in tool_policies],
            placebo_reason,
        ),
        make_panel(
            metrics,
            "answer_rules",
            "Answer rules",
            [["answer_rules", key] for key in ("scores", "test_accuracy", "test_curves")],
            "answer rules: no scores, test-accuracy or test-curve file yet (the rewards' rules are listed below)",
        ),
    ]


def curve_figure(metrics: Mapping[str, Any]) -> str:
    """Accuracy (all question types) against step per curve series, with its interval; a star at the checkpoint
    each eval series picks. Empty text when no series has a curve."""
    import plotly.graph_objects as go

    series = metrics["test_curves"]["series"]
    if not series:
        return ""
    colors = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")
    figure = go.Figure()
    for index, (sid, curve) in enumerate(series.items()):
        color = colors[index % len(colors)]
        key = metrics.get("headline", {}).get("key", "all")
        points = [(p["step"], p["by_question_type"][key]) for p in curve["points"] if key in p["by_question_type"]]
        figure.add_trace(
            go.Scatter(
                x=[step for step, _ in points],
                y=[v["mean"] for _, v in points],
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [v["high"] - v["mean"] for _, v in points],
                    "arrayminus": [v["mean"] - v["low"] for _, v in points],
                },
                mode="lines+markers",
                name=sid,
                line={"color": color},
            )
        )
        at = {step: v["mean"] for step, v in points}
        chosen = [(eid, step) for eid, step in curve["chosen"].items() if step in at]
        figure.add_trace(
            go.Scatter(
                x=[step for _, step in chosen],
                y=[at[step] for _, step in chosen],
                mode="markers+text",
                marker={"symbol": "star", "size": 16, "color": color, "line": {"width": 1, "color": "#222"}},
                text=[eid for eid, _ in chosen],
                textposition="top center",
                name=f"{sid}: eval series' checkpoint",
            )
        )
    figure.update_layout(
        title="Greedy test accuracy of every kept checkpoint (star: the checkpoint an eval series picks)",
        height=420,
        template="plotly_white",
        xaxis_title="step",
        yaxis_title="accuracy (all question types)",
        yaxis_range=[0, 1.05],
    )
    return figure.to_html(full_html=False, include_plotlyjs=False)
