"""`chartrl tools apply` and `chartrl tools config`: valid and invalid calls exit 0 with the observation (or one
JSON object), broken input files exit non-zero with a message."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import yaml
from PIL import Image

from chartrl.cli import main
from chartrl.tools import TOOLS, ToolCall, apply_tool_call, format_tool_call

from tool_charts import synthetic_bar_charts


@pytest.fixture
def chart_files(tmp_path):
    chart = synthetic_bar_charts()[0]
    image, bboxes = tmp_path / "chart.png", tmp_path / "bboxes.json"
    chart.image.save(image)
    bboxes.write_text(json.dumps(chart.bboxes))
    return chart, image, bboxes


def apply(image, bboxes, call: str, out, *extra: str) -> int:
    return main(
        ["tools", "apply", "--image", str(image), "--bboxes", str(bboxes), "--call", call, "--out", str(out), *extra]
    )


@pytest.mark.parametrize(
    "make_call,observation,changes",
    [
        # a valid call: the edited chart is written
        (lambda labels: format_tool_call("focus_on_x_values_with_mask", {"x_values": labels[:1]}), "Masked all", True),
        # a label the chart does not have: exit 0, the error line, the chart unchanged
        (
            lambda labels: format_tool_call("focus_on_x_values_with_mask", {"x_values": ["Atlantis"]}),
            "Error: unknown x value",
            False,
        ),
        # malformed JSON
        (lambda labels: "<tool_call>{oops</tool_call>", "Error: the tool call is not valid JSON", False),
        # no call at all
        (lambda labels: "The answer is 3.", "No <tool_call> in the text", False),
    ],
)
def test_apply_prints_the_observation_and_writes_the_chart(
    chart_files, tmp_path, capsys, make_call, observation, changes
):
    chart, image, bboxes = chart_files
    out = tmp_path / "out.png"
    assert apply(image, bboxes, make_call(chart.labels), out) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(observation) and printed.count("\n") == 1
    written = np.asarray(Image.open(out))
    assert (not np.array_equal(written, np.asarray(chart.image))) == changes
    if changes:
        expected = apply_tool_call(
            chart.image, chart.bboxes, ToolCall("focus_on_x_values_with_mask", {"x_values": chart.labels[:1]})
        )
        assert np.array_equal(written, np.asarray(expected.image))


def test_apply_json(chart_files, tmp_path, capsys):
    chart, image, bboxes = chart_files
    call = format_tool_call("focus_on_x_values_with_draw", {"x_values": [chart.labels[1].lower()]})
    assert apply(image, bboxes, call, tmp_path / "a.png", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report == {
        "ok": True,
        "observation": f"Drew a box around x value {chart.labels[1]}.",
        "applied": [chart.labels[1]],
        "outcome": "executed",
        "error_kind": None,
    }
    assert (
        apply(image, bboxes, format_tool_call("zoom_in", {"bbox_2d": [0.5, 0.5, 0.4, 1]}), tmp_path / "b.png", "--json")
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["applied"] == [] and report["outcome"] == "failed"
    assert report["error_kind"] == "bad_box" and report["observation"].startswith("Error: bbox_2d")


@pytest.mark.parametrize(
    "broken,message",
    [
        # the chart does not exist
        ("image_missing", "no such file"),
        # the chart is not an image
        ("image_garbage", "not a readable image"),
        # the bboxes file does not exist
        ("bboxes_missing", "cannot read it"),
        # the bboxes file is not JSON
        ("bboxes_garbage", "bboxes are not valid JSON"),
        # JSON, but not the bboxes contract
        ("bboxes_wrong", "bboxes.x_values['a']: box [1, 2] is not a list of four numbers"),
    ],
)
def test_broken_input_files_are_errors(chart_files, tmp_path, capsys, broken, message):
    _, image, bboxes = chart_files
    if broken == "image_missing":
        image = tmp_path / "nope.png"
    elif broken == "image_garbage":
        image.write_bytes(b"not a png")
    elif broken == "bboxes_missing":
        bboxes = tmp_path / "nope.json"
    elif broken == "bboxes_garbage":
        bboxes.write_text("{x_values:")
    else:
        bboxes.write_text(json.dumps({"x_values": {"a": [1, 2]}}))
    out = tmp_path / "out.png"
    assert apply(image, bboxes, format_tool_call("zoom_in", {"bbox_2d": [0, 0, 1, 1]}), out) == 1
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_config_writes_the_verl_yaml(tmp_path, capsys):
    out = tmp_path / "tools.yaml"
    assert main(["tools", "config", "--out", str(out)]) == 0
    assert [t["tool_schema"]["function"]["name"] for t in yaml.safe_load(out.read_text())["tools"]] == list(TOOLS)
    assert main(["tools", "config", "--out", str(out), "--tools", "zoom_in", "--error-reward", "-1"]) == 0
    (entry,) = yaml.safe_load(out.read_text())["tools"]
    assert entry["config"]["error_reward"] == -1.0
    # an unknown tool name is a usage error listing the known ones
    assert main(["tools", "config", "--out", str(out), "--tools", "zoom"]) == 2
    assert "unknown tool 'zoom'; known tools: focus_on_x_values_with_draw" in capsys.readouterr().err


@pytest.mark.slow
def test_the_installed_command_exits_0_on_an_invalid_call(chart_files, tmp_path):
    _, image, bboxes = chart_files
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "chartrl",
            "tools",
            "apply",
            "--image",
            str(image),
            "--bboxes",
            str(bboxes),
            "--call",
            "<tool_call>",
            "--out",
            str(tmp_path / "o.png"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0 and run.stdout.startswith("Error: <tool_call> is never closed")


def test_a_lone_surrogate_in_the_call_prints_as_its_escape(chart_files, tmp_path, capsys):
    # the JSON escape "\ud800" decodes to a lone surrogate, which no UTF-8 stream takes; it is shown escaped
    _, image, bboxes = chart_files
    call = '<tool_call>{"name": "focus_on_x_values_with_mask", "arguments": {"x_values": ["\\ud800"]}}</tool_call>'
    assert apply(image, bboxes, call, tmp_path / "out.png", "--json") == 0
    out = capsys.readouterr().out
    out.encode("utf-8")
    report = json.loads(out)
    assert report["error_kind"] == "unknown_label" and "\\ud800" in report["observation"]
