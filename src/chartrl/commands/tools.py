"""``chartrl tools apply|config|path-check``: run a tool call on a chart by hand; write the verl tool YAML; the
tool-path check of a dataset's charts (the tool_path_check rule)."""

from __future__ import annotations

import argparse
import json
import logging
import struct
from pathlib import Path

from chartrl.commands.spec import Reads, read_job_spec
from chartrl.config import PromptConfig, tools_config
from chartrl.data.contract import read_split
from chartrl.data.images import png_bytes
from chartrl.errors import ChartrlError, UsageError
from chartrl.files import write_atomically, write_json
from chartrl.model.policy import load_policy
from chartrl.rollout.tool_path import check_tool_path, raise_on_failures
from chartrl.threads import use_threads
from chartrl.tools.boxes import read_bboxes
from chartrl.tools.execute import run_tool_text
from chartrl.tools.pixels import as_rgb
from chartrl.tools.registry import select_tools
from chartrl.verl_backend.tool_config import write_tool_config


log = logging.getLogger(__name__)
READS = {
    # the tools offered and the prompt that lists their labels; the rollout's batch size for the second pass
    "tools path-check": Reads("tools path-check", sections=("prompts", "tools"), keys={"rollout": ("batch_size",)}),
}


def _read_chart(path: str):
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            image.load()
            return as_rgb(image)
    except FileNotFoundError as err:
        raise ChartrlError(f"--image {path}: no such file") from err
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, struct.error) as err:
        raise ChartrlError(f"--image {path}: not a readable image ({type(err).__name__}: {err})") from err


def _read_bboxes(path: str):
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, UnicodeDecodeError) as err:
        raise ChartrlError(f"--bboxes {path}: cannot read it ({err})") from err
    try:
        return read_bboxes(text)
    except ChartrlError as err:
        raise ChartrlError(f"--bboxes {path}: {err}") from err


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def cmd_apply(args: argparse.Namespace) -> int:
    try:
        names = select_tools(args.tools)
    except KeyError as err:
        raise UsageError(str(err.args[0])) from err
    chart = _read_chart(args.image)
    bboxes = _read_bboxes(args.bboxes)
    outcome = run_tool_text(args.call, chart, bboxes, names, max_calls=args.max_calls)
    edited = outcome.image if outcome.executed else chart
    data = png_bytes(edited)
    write_atomically(args.out, lambda tmp: tmp.write_bytes(data))
    observation = outcome.observation or "No <tool_call> in the text; the chart is unchanged."
    if args.json:
        applied = [item for result in outcome.results if result.ok for item in result.applied]
        report = {
            "ok": outcome.executed,
            "observation": observation,
            "applied": applied,
            "outcome": outcome.outcome,
            "error_kind": outcome.error_kind,
        }
        print(json.dumps(report, ensure_ascii=False))
    else:
        print(observation)
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    try:
        path = write_tool_config(args.out, args.tools, args.success_reward, args.error_reward)
    except KeyError as err:
        raise UsageError(str(err.args[0])) from err
    print(f"verl tool config written to {path}")
    return 0


def _split_argument(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or name not in ("train", "val", "test") or not path:
        raise argparse.ArgumentTypeError(f"expected SPLIT=PATH with SPLIT one of train, val, test; got {text!r}")
    return name, path


def cmd_path_check(args: argparse.Namespace) -> int:
    """The tool-path check (chartrl.rollout.tool_path): its JSON, then a failure naming every chart and tool that
    failed. Scripted calls, not the policy's."""
    sections = read_job_spec(args.spec, READS["tools path-check"])
    use_threads(args.threads)
    splits = {name: read_split(path) for name, path in args.split}
    policy = load_policy(args.model)
    result = check_tool_path(
        policy,
        splits,
        prompt_config=PromptConfig(**sections["prompts"]),
        tools=tools_config(sections["tools"]),
        batch_size=sections["rollout"]["batch_size"],
    )
    write_json(args.out, result)
    summary = {name: f"{c['executed']}/{c['charts']}" for name, c in result["tools"].items()}
    log.info("tool-path check, executed / charts per tool: %s", summary)
    raise_on_failures(result)
    return 0


def register(stages: argparse._SubParsersAction) -> None:
    tools = stages.add_parser("tools", help="the visual tools: apply a tool call to a chart, write the verl tool YAML")
    commands = tools.add_subparsers(dest="command", required=True)
    apply = commands.add_parser(
        "apply",
        help="apply the tool call in --call to a chart; exits 0 whether or not the call is valid",
        description="Parse --call as the model's text (<tool_call>{...}</tool_call>), run it on --image with the "
        "chart's --bboxes, write the edited chart (or the unchanged one when the call is invalid) to --out "
        "and print the observation the model would read.",
    )
    apply.add_argument("--image", required=True, help="the chart (PNG or any format PIL reads)")
    apply.add_argument(
        "--bboxes", required=True, help='JSON file in the bboxes contract: {"x_values": {label: [x1,y1,x2,y2]}, ...}'
    )
    apply.add_argument("--call", required=True, help="the model's text holding one <tool_call>...</tool_call>")
    apply.add_argument("--out", required=True, help="PNG to write")
    apply.add_argument("--json", action="store_true", help="print one JSON object instead of the observation")
    apply.add_argument("--tools", nargs="+", default=None, help="the tools offered (default: all)")
    apply.add_argument("--max-calls", type=_positive, default=1, help="tool calls allowed in the text (default: 1)")
    apply.set_defaults(func=cmd_apply)

    config = commands.add_parser("config", help="write the verl tool config YAML (tool_config_path)")
    config.add_argument("--out", required=True, help="the YAML to write")
    config.add_argument("--tools", nargs="+", default=None, help="tool names (default: all)")
    config.add_argument("--success-reward", type=float, default=0.0, help="verl step reward of a call that ran")
    config.add_argument("--error-reward", type=float, default=0.0, help="verl step reward of a failed call")
    config.set_defaults(func=cmd_config)

    check = commands.add_parser(
        "path-check",
        help="the tool-path check: a scripted call of each label tool on every chart it applies to (not the policy)",
        description="For every chart of the given splits and every configured label tool that applies to it, "
        "the call the tool prompt asks for, keeping the chart's first listed label, run through the rollout's "
        "tool turn and second pass (chartrl.rollout.tool_path). Writes --out, then fails naming each chart and "
        "tool that failed.",
    )
    check.add_argument("--model", required=True, help="the policy's model folder (its processor and vision tower)")
    check.add_argument(
        "--split", type=_split_argument, action="append", required=True, help="SPLIT=PATH of a split parquet"
    )
    check.add_argument("--out", required=True, help="JSON to write: per tool and split, charts, executed, failed")
    check.add_argument("--spec", default=None, help="JSON with the sections prompts, tools, rollout")
    check.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    check.set_defaults(func=cmd_path_check)
