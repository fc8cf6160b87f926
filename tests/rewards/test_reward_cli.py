"""``chartrl reward``: a person checks one case by hand; mistakes in the command line are named with their fix."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from chartrl.cli import main

from conftest import REPO


def run(capsys, *args):
    code = main(["reward", "--root", str(REPO), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_prints_the_reward_dict(capsys):
    code, out, _ = run(
        capsys,
        "--name", "v2_shaped",
        "--response", "<answer>42</answer>",
        "--truth", "42",
        "--meta", '{"tool_outcome": "executed", "tool_calls": 1, "response_tokens": 320}',
        "--param", "d_length=0.2",
    )  # fmt: skip
    assert code == 0
    result = json.loads(out)
    assert result["overall"] == pytest.approx(1 + 0.1 + 0.1 - 0.1) and result["length"] == pytest.approx(-0.1)


def test_judge_rewards_say_which_judge(capsys):
    code, out, err = run(capsys, "--name", "v1_judge", "--response", "<answer>45%</answer>", "--truth", "45")
    assert code == 0 and json.loads(out)["overall"] == 1.0
    assert "reference (not an LLM)" in err


BAD = [
    # (arguments, exit code, fragments of the message)
    (["--name", "v9"], 2, ["unknown reward 'v9'", "multiple_choice, r1v, v1_judge"]),  # unknown reward
    (["--name", "v2_shaped", "--param", "d_format=-1"], 2, ["reward.d_format", "-1", "minimum"]),  # out of range
    (["--name", "v3_gra", "--param", "accuracy=llm"], 2, ["reward.accuracy", '"llm"', "rule, judge, panel"]),  # enum
    (["--name", "v1_rule", "--param", "d_tool=0.1"], 2, ["d_tool", "allowed keys", "tool_bonus"]),  # not its param
    (["--name", "v1_rule", "--param", "tool_bonus"], 2, ["KEY=VALUE"]),  # no '='
    (["--name", "v1_rule", "--meta", "{oops"], 2, ["--meta is not valid JSON"]),  # bad JSON
    (["--name", "v1_rule", "--meta", '{"tools": 1}'], 2, ["unknown key(s) tools", "tool_outcome"]),  # unknown key
    (["--name", "v1_rule", "--meta", '{"tool_outcome": "maybe"}'], 2, ["tool_outcome", "executed"]),  # bad value
]


@pytest.mark.parametrize("args,code,fragments", BAD)
def test_bad_command_lines_are_named(capsys, args, code, fragments):
    result, _, err = run(capsys, "--response", "<answer>1</answer>", "--truth", "1", *args)
    assert result == code
    for fragment in fragments:
        assert fragment in err


@pytest.mark.slow
def test_as_a_command():
    done = subprocess.run(
        [sys.executable, "-m", "chartrl", "reward", "--name", "v1_rule", "--response", "<answer>42</answer>",
         "--truth", "42"],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0 and json.loads(done.stdout) == {"overall": 1.0, "accuracy": 1.0, "tool_bonus": 0.0}
