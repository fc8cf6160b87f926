"""``chartrl reward``: score one response by hand with any reward, and print the reward dict as JSON.

    chartrl reward --name v2_shaped --response '<answer>42</answer>' --truth 42 \
        --meta '{"tool_outcome": "executed", "response_tokens": 300}' --param d_length=0.2

Params are validated against the config schema's reward definition (errors name the key, the value and what is
allowed). Judge-based rewards use the ``judge:`` section of the config (the offline reference judge by default);
which judge gave the verdict is printed on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import yaml

from chartrl.commands.overlays import add_configfile_argument
from chartrl.config import load_config
from chartrl.errors import UsageError
from chartrl.rewards import METADATA_FIELDS, REWARDS, RewardInput, accuracy_signal, build_reward


def parse_params(pairs: list[str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--param {pair!r} is not KEY=VALUE (e.g. --param d_format=0.2)")
        params[key.strip()] = yaml.safe_load(value) if value.strip() else value
    return params


def parse_meta(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as err:
        raise UsageError(f"--meta is not valid JSON: {err}") from err
    if not isinstance(meta, dict):
        raise UsageError('--meta must be a JSON object, e.g. \'{"tool_outcome": "executed"}\'')
    unknown = sorted(set(meta) - set(METADATA_FIELDS))
    if unknown:
        raise UsageError(f"--meta has unknown key(s) {', '.join(unknown)}; allowed keys: {', '.join(METADATA_FIELDS)}")
    return meta


def cmd_reward(args: argparse.Namespace) -> int:
    if args.name not in REWARDS:
        raise UsageError(f"unknown reward {args.name!r}; valid rewards: {', '.join(sorted(REWARDS))}")
    params = parse_params(args.param)
    try:
        item = RewardInput(response=args.response, ground_truth=args.truth, **parse_meta(args.meta))
    except (TypeError, ValueError) as err:
        raise UsageError(f"--meta: {err}") from err
    needs_judge = accuracy_signal(args.name, params) in ("judge", "panel")
    judge_config = load_config(args.configfile, root=args.root).judge if needs_judge else None
    reward = build_reward(args.name, params, judge_config)  # type: ignore[arg-type]  # None only without a judge
    [result] = reward([item])
    if reward.judge is not None:
        print(f"judged by '{reward.judge.name}': {reward.judge.kind}", file=sys.stderr)
    print(json.dumps(result, indent=2))
    return 0


def register(stages: argparse._SubParsersAction) -> None:
    reward = stages.add_parser("reward", help="score one response with a reward and print the reward dict as JSON")
    reward.add_argument("--name", required=True, help="reward name (chartrl.rewards.REWARDS)")
    reward.add_argument("--response", required=True, help="the final assistant turn, e.g. '<answer>42</answer>'")
    reward.add_argument("--truth", required=True, help="the ground-truth answer")
    reward.add_argument(
        "--meta",
        help="JSON object of metadata: question, subset, data_source, tool_outcome, tool_calls, response_tokens, id",
    )
    reward.add_argument(
        "--param", action="append", default=[], metavar="KEY=VALUE", help="a reward parameter (repeatable)"
    )
    add_configfile_argument(reward, help="config overlays for the judge")
    reward.add_argument("--root", default=".", help="repository root holding config/ (default: .)")
    reward.set_defaults(func=cmd_reward)
