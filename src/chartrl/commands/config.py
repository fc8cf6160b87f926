"""``chartrl config check``: validate the configuration without Snakemake; ``chartrl config reference``: write the
config reference (docs/config.md) from the schema; ``chartrl config series``: write the README's series table from
the config."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from chartrl.commands.overlays import add_configfile_argument
from chartrl.commands.config_reference import load_schema_text, render_reference
from chartrl.commands.series_table import render_series_table, with_series_table
from chartrl.config import ConfigError, load_config, to_plain
from chartrl.tools.study_checks import tool_data_problems
from chartrl.verl_backend.checks import ignored_settings


def cmd_check(args: argparse.Namespace) -> int:
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
    text = render_reference(load_schema_text(Path(args.schema).read_text()))
    return written(text, args.out, args.check, f"what {args.schema} renders to", "chartrl config reference")


def cmd_series(args: argparse.Namespace) -> int:
    table = render_series_table(load_config(args.configfile, root=args.root))
    if args.out is None:
        print(table, end="")
        return 0
    current = Path(args.out).read_text()
    return written(with_series_table(current, table), args.out, args.check, "the config's series", "chartrl config series")


def written(text: str, out: str | None, check: bool, source: str, command: str) -> int:
    """Print ``text``, or write it to ``out``, or (``check``) fail unless ``out`` holds it already."""
    if out is None:
        print(text, end="")
    elif check:
        current = Path(out).read_text() if Path(out).exists() else ""
        if current != text:
            raise ConfigError(f"{out} is not {source}: run {command} --out {out}")
        print(f"{out} is current")
    else:
        Path(out).write_text(text)
        print(f"wrote {out}")
    return 0


def register(stages: argparse._SubParsersAction) -> None:
    config = stages.add_parser("config", help="check or show the resolved configuration")
    commands = config.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="validate config/config.yaml + config/series.yaml + overlays")
    add_configfile_argument(check)
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
    series = commands.add_parser("series", help="write the README's series table from the config (config/series.yaml)")
    add_configfile_argument(series)
    series.add_argument("--root", default=".", help="repository root holding config/ (default: .)")
    series.add_argument("--out", help="the file whose series table to replace, e.g. README.md (default: print it)")
    series.add_argument("--check", action="store_true", help="write nothing; fail when --out is not current")
    series.set_defaults(func=cmd_series)
