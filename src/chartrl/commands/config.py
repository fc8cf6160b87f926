"""``chartrl config check``: validate the configuration without Snakemake."""

from __future__ import annotations

import argparse
import json

from chartrl.config import ConfigError, load_config, to_plain
from chartrl.tools.study_checks import tool_data_problems


def cmd_check(args: argparse.Namespace) -> int:
    from chartrl.verl_backend.checks import ignored_settings

    config = load_config(args.configfile, root=args.root)
    problems = tool_data_problems(config)
    if problems:
        raise ConfigError("the study cannot work as configured:\n  " + "\n  ".join(problems))
    if args.show:
        print(json.dumps(to_plain(config.resolved), indent=2))
    else:
        train = ", ".join(s.id for s in config.train_series)
        evals = ", ".join(s.id for s in config.eval_series)
        print(
            f"config OK: {len(config.series)} series (train: {train}; eval: {evals}); "
            f"datasets: {', '.join(config.datasets)}"
        )
    for line in ignored_settings(config):
        print(f"warning: not applied on verl: {line}")
    return 0


def register(stages: argparse._SubParsersAction) -> None:
    config = stages.add_parser("config", help="check or show the resolved configuration")
    commands = config.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="validate config/config.yaml + config/series.yaml + overlays")
    check.add_argument("--configfile", action="append", default=[], help="an overlay, as for snakemake (repeatable)")
    check.add_argument("--root", default=".", help="repository root holding config/ (default: .)")
    check.add_argument("--show", action="store_true", help="print the resolved config (defaults filled) as JSON")
    check.set_defaults(func=cmd_check)
