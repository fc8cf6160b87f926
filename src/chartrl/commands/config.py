"""``chartrl config check``: validate the configuration without Snakemake; ``chartrl config reference``: write the
config reference (docs/config.md) from the schema."""

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


def cmd_reference(args: argparse.Namespace) -> int:
    from pathlib import Path

    from chartrl.commands.config_reference import load_schema_text, render_reference

    text = render_reference(load_schema_text(Path(args.schema).read_text()))
    if args.out is None:
        print(text, end="")
    elif args.check:
        current = Path(args.out).read_text() if Path(args.out).exists() else ""
        if current != text:
            raise ConfigError(
                f"{args.out} is not what {args.schema} renders to: run chartrl config reference --out {args.out}"
            )
        print(f"{args.out} is current")
    else:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}")
    return 0


def register(stages: argparse._SubParsersAction) -> None:
    config = stages.add_parser("config", help="check or show the resolved configuration")
    commands = config.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="validate config/config.yaml + config/series.yaml + overlays")
    check.add_argument("--configfile", action="append", default=[], help="an overlay, as for snakemake (repeatable)")
    check.add_argument("--root", default=".", help="repository root holding config/ (default: .)")
    check.add_argument("--show", action="store_true", help="print the resolved config (defaults filled) as JSON")
    check.set_defaults(func=cmd_check)
    reference = commands.add_parser("reference", help="write the config reference (every key) from the schema")
    reference.add_argument(
        "--schema", default="workflow/schemas/config.schema.yaml", help="the schema (default: %(default)s)"
    )
    reference.add_argument("--out", help="the Markdown file to write, e.g. docs/config.md (default: print it)")
    reference.add_argument("--check", action="store_true", help="write nothing; fail when --out is not current")
    reference.set_defaults(func=cmd_reference)
