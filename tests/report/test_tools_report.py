"""Tool success per tool: the counts per tool name from call texts, from a run's training metrics and from test
generations, and the report's panel."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from chartrl.report.tools import collect_tools, generation_counts, training_counts
from chartrl.rollout.statistics import add_tool_counts, tool_counts


def _call(name: str, axis: str, labels: list[str]) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": {axis: labels}}) + "\n</tool_call>"


MASK_X = "focus_on_x_values_with_mask"
DRAW_Y = "focus_on_y_values_with_draw"


def test_tool_counts_name_each_call_and_count_those_that_ran():
    texts = [_call(MASK_X, "x_values", ["2019"]), _call(MASK_X, "x_values", ["nope"]), _call(DRAW_Y, "y_values", ["A"])]
    texts.append("<tool_call>\n{not json\n</tool_call>")  # names no tool: counted for none
    counts = tool_counts(texts, ["", "unknown_label", "", "invalid_json"])
    assert counts == {DRAW_Y: {"calls": 1, "executed": 1}, MASK_X: {"calls": 2, "executed": 1}}
    assert add_tool_counts(counts, {MASK_X: {"calls": 1, "executed": 1}})[MASK_X] == {"calls": 3, "executed": 2}


def test_training_counts_sum_the_steps_and_generation_counts_read_every_sample(tmp_path):
    lines = [
        {"step": 1, f"rollout/tools/{MASK_X}/calls": 3.0, f"rollout/tools/{MASK_X}/executed": 2.0},
        {
            "step": 2,
            f"rollout/tools/{MASK_X}/calls": 1.0,
            f"rollout/tools/{MASK_X}/executed": 1.0,
            f"val/tools/{DRAW_Y}/calls": 5.0,
            "rollout/tool_call_ratio": 0.5,
        },
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert training_counts(tmp_path / "metrics.jsonl") == {MASK_X: {"calls": 4, "executed": 3}}
    table = pa.table(
        {
            "tool_calls": [json.dumps([_call(DRAW_Y, "y_values", ["A"])]), json.dumps([])],
            "tool_error_kinds": [json.dumps(["unknown_label"]), json.dumps([])],
        }
    )
    pq.write_table(table, tmp_path / "generations.parquet")
    assert generation_counts(tmp_path / "generations.parquet") == {DRAW_Y: {"calls": 1, "executed": 0}}


def test_the_report_lists_every_configured_tool_in_training_and_on_test(tmp_path, default_config):
    """The embedded default's tool series: each configured tool with its calls, executed calls and success."""
    tool_series = [s.id for s in default_config.train_series if s.tools]
    runs = tmp_path / "runs" / tool_series[0]
    runs.mkdir(parents=True)
    line = {"step": 1, f"rollout/tools/{MASK_X}/calls": 4.0, f"rollout/tools/{MASK_X}/executed": 3.0}
    (runs / "metrics.jsonl").write_text(json.dumps(line) + "\n")
    evaluated = tmp_path / "eval" / tool_series[0]
    evaluated.mkdir(parents=True)
    data = {"test": {"tools": {MASK_X: {"calls": 2, "executed": 2}}}, "test_shuffled_images": {"tools": {}}}
    (evaluated / "test_accuracy.json").write_text(json.dumps(data))
    tools = collect_tools(tmp_path, default_config)
    assert list(tools["training"]["total"]) == list(default_config.tools.names)
    assert tools["training"]["total"][MASK_X] == {"calls": 4, "executed": 3, "success": 0.75}
    assert tools["test"]["total"][MASK_X] == {"calls": 2, "executed": 2, "success": 1.0}
    assert tools["training"]["called"] == tools["test"]["called"] == [MASK_X]
    assert list(tools["test"]["sources"]) == [f"{tool_series[0]} (test)"]
    # a run without any of the files has no counts (not zeros)
    empty = collect_tools(tmp_path / "none", default_config)
    assert empty["training"]["total"] == empty["test"]["total"] == {}


def test_on_verl_the_empty_training_columns_say_why(tmp_path, default_config):
    """verl logs no per-tool counts of its training steps: the test columns come from the generations, and the
    report says in place why the training columns are empty."""
    import dataclasses

    evaluated = tmp_path / "eval" / default_config.eval_series[0].id
    evaluated.mkdir(parents=True)
    table = pa.table({"tool_calls": [json.dumps([_call(MASK_X, "x_values", ["A"])])], "tool_error_kinds": ['[""]']})
    pq.write_table(table, evaluated / "generations.parquet")
    tools = collect_tools(tmp_path, dataclasses.replace(default_config, backend="verl"))
    assert tools["test"]["total"][MASK_X] == {"calls": 1, "executed": 1, "success": 1.0}
    assert tools["training"]["total"] == {} and "verl logs no per-tool counts" in tools["training"]["why_empty"]
    assert "why_empty" not in collect_tools(tmp_path, default_config)["test"]
