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


def test_tool_counts_name_each_call_and_count_those_that_ran_and_why_the_others_failed():
    calls = [
        (_call(MASK_X, "x_values", ["2019"]), ""),  # ran
        (_call(MASK_X, "x_values", ["nope"]), "unknown_label"),  # the tool refused the label
        (_call(DRAW_Y, "y_values", ["A"]), ""),
        ('<tool_call>\n{"name": "%s", "arguments": {"x_values": 2019}}\n</tool_call>' % MASK_X, "bad_arguments"),
        (_call(MASK_X, "x_values", ["2019"]), "turn_limit"),  # no turn left to run it
        ("<tool_call>\n{not json\n</tool_call>", "bad_json"),  # names no tool: counted for none
        ('<tool_call>\n{"name": "crop", "arguments": {}}\n</tool_call>', "unknown_tool"),  # no known tool: none
    ]
    counts = tool_counts([text for text, _ in calls], [kind for _, kind in calls])
    assert counts == {
        DRAW_Y: {"calls": 1, "executed": 1, "failed": {}},
        MASK_X: {"calls": 4, "executed": 1, "failed": {"unknown_label": 1, "bad_arguments": 1, "turn_limit": 1}},
    }
    more = {MASK_X: {"calls": 2, "executed": 1, "failed": {"unknown_label": 1}}}
    assert add_tool_counts(counts, more)[MASK_X] == {
        "calls": 6,
        "executed": 2,
        "failed": {"unknown_label": 2, "bad_arguments": 1, "turn_limit": 1},
    }
    # counts written before failures were counted by kind add their calls and executed calls
    old = {MASK_X: {"calls": 1, "executed": 1}}
    assert add_tool_counts({}, old) == {MASK_X: {"calls": 1, "executed": 1, "failed": {}}}


def test_the_trainer_logs_each_tools_failed_calls_by_kind_and_the_report_reads_them_back(tmp_path):
    """What a training step logs (``rollout/tools/{name}/...``, also its MLflow metrics) is what the report sums."""
    from types import SimpleNamespace

    from chartrl.train.trainer import tool_metrics

    episodes = [
        SimpleNamespace(tool_call_texts=[_call(MASK_X, "x_values", ["2019"])], tool_error_kinds=[""]),
        SimpleNamespace(tool_call_texts=[_call(MASK_X, "x_values", ["nope"])], tool_error_kinds=["unknown_label"]),
        SimpleNamespace(tool_call_texts=[], tool_error_kinds=[]),
    ]
    metrics = tool_metrics(episodes, "rollout")
    assert metrics == {
        f"rollout/tools/{MASK_X}/calls": 2.0,
        f"rollout/tools/{MASK_X}/executed": 1.0,
        f"rollout/tools/{MASK_X}/failed/unknown_label": 1.0,
    }
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 1, **metrics}) + "\n")
    assert training_counts(tmp_path / "metrics.jsonl") == {
        MASK_X: {"calls": 2, "executed": 1, "failed": {"unknown_label": 1}}
    }


def test_training_counts_sum_the_steps_and_generation_counts_read_every_sample(tmp_path):
    lines = [
        {
            "step": 1,
            f"rollout/tools/{MASK_X}/calls": 3.0,
            f"rollout/tools/{MASK_X}/executed": 2.0,
            f"rollout/tools/{MASK_X}/failed/unknown_label": 1.0,
        },
        {
            "step": 2,
            f"rollout/tools/{MASK_X}/calls": 2.0,
            f"rollout/tools/{MASK_X}/executed": 1.0,
            f"rollout/tools/{MASK_X}/failed/unknown_label": 1.0,
            f"val/tools/{DRAW_Y}/calls": 5.0,
            "rollout/tool_call_ratio": 0.5,
        },
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert training_counts(tmp_path / "metrics.jsonl") == {
        MASK_X: {"calls": 5, "executed": 3, "failed": {"unknown_label": 2}}
    }
    table = pa.table(
        {
            "tool_calls": [json.dumps([_call(DRAW_Y, "y_values", ["A"])]), json.dumps([])],
            "tool_error_kinds": [json.dumps(["unknown_label"]), json.dumps([])],
        }
    )
    pq.write_table(table, tmp_path / "generations.parquet")
    assert generation_counts(tmp_path / "generations.parquet") == {
        DRAW_Y: {"calls": 1, "executed": 0, "failed": {"unknown_label": 1}}
    }


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
    assert tools["training"]["total"][MASK_X] == {"calls": 4, "executed": 3, "failed": {}, "success": 0.75}
    assert tools["test"]["total"][MASK_X] == {"calls": 2, "executed": 2, "failed": {}, "success": 1.0}
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
    assert tools["test"]["total"][MASK_X] == {"calls": 1, "executed": 1, "failed": {}, "success": 1.0}
    assert tools["training"]["total"] == {} and "verl logs no per-tool counts" in tools["training"]["why_empty"]
    assert "why_empty" not in collect_tools(tmp_path, default_config)["test"]


def test_a_label_tool_no_test_call_ran_is_given_its_reason_from_the_tool_path_check():
    """The reason rests on the check's count of the test charts with boxes on the tool's axis that share a label
    with a train chart (a policy naming learned labels runs a tool on the others only by copying an unseen one)."""
    from chartrl.report.tools import not_executed_on_test

    total = {
        MASK_X: {"calls": 3, "executed": 2, "failed": {}},
        DRAW_Y: {"calls": 4, "executed": 0, "failed": {"unknown_label": 4}},
        "focus_on_y_values_with_mask": {"calls": 0, "executed": 0, "failed": {}},
    }
    names = [MASK_X, DRAW_Y, "focus_on_y_values_with_mask", "zoom_in"]
    cases = [  # (the check's count on y, what the reason of DRAW_Y says)
        ({"charts": 3, "sharing_a_train_label": 0}, "none of the test split's 3 charts with y value boxes has a label"),
        ({"charts": 3, "sharing_a_train_label": 1}, "; 1 of the test split's 3 charts with y value boxes share"),
        (None, ": no test chart has y value boxes for it to run on."),
    ]
    for y_count, says in cases:
        check = {"test_labels_seen_in_train": {"x_values": {"charts": 5, "sharing_a_train_label": 5}}}
        if y_count:
            check["test_labels_seen_in_train"]["y_values"] = y_count
        why = not_executed_on_test(total, check, names)
        assert set(why) == {DRAW_Y, "focus_on_y_values_with_mask"}  # x ran; zoom_in takes no labels
        assert why[DRAW_Y].startswith("0 of its 4 test calls ran (failed: unknown_label 4)"), why[DRAW_Y]
        assert says in why[DRAW_Y], why[DRAW_Y]
        assert why["focus_on_y_values_with_mask"].startswith("no test call named it"), why  # no call at all


def test_the_tool_path_check_is_a_panel_of_its_own_only_where_the_config_runs_it(tmp_path, default_config):
    import dataclasses

    from chartrl.report.tools import tool_panels

    assert not [p for p in tool_panels({}, default_config) if p["id"] == "tools/path_check"]
    checking = dataclasses.replace(
        default_config, evaluate=dataclasses.replace(default_config.evaluate, tool_path_check=True)
    )
    (tmp_path / "tools").mkdir()
    check = {"tools": {MASK_X: {"charts": 2, "executed": 2, "failed": 0}}, "test_labels_seen_in_train": {}}
    (tmp_path / "tools" / "path_check.json").write_text(json.dumps(check))
    metrics = {"tools": collect_tools(tmp_path, checking)}
    assert metrics["tools"]["path_check"] == check
    [panel] = [p for p in tool_panels(metrics, checking) if p["id"] == "tools/path_check"]
    assert panel["filled"] and "not the policy" in panel["title"]
    nothing = {"tools": collect_tools(tmp_path / "none", checking)}
    [empty] = [p for p in tool_panels(nothing, checking) if p["id"] == "tools/path_check"]
    assert not empty["filled"] and "results/tools/path_check.json" in empty["reason"]
