"""The ``chartrl`` command line: the table of stages the CLI reads to load one stage's module for a job
(``chartrl.cli.STAGES``) names, for every stage, the module that adds it, and a stage's own parser reads a command
line as the whole parser does."""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import subprocess
import sys

import pytest

from chartrl import cli

from conftest import REPO

COMMANDS = REPO / "src" / "chartrl" / "commands"


def registering_modules() -> list[str]:
    """The modules of chartrl.commands that define ``register`` (read from the source)."""
    return sorted(
        path.stem
        for path in COMMANDS.glob("*.py")
        if any(
            isinstance(node, ast.FunctionDef) and node.name == "register" for node in ast.parse(path.read_text()).body
        )
    )


def stages_added_by(module: str) -> list[str]:
    parser = argparse.ArgumentParser()
    stages = parser.add_subparsers(dest="stage")
    importlib.import_module(f"chartrl.commands.{module}").register(stages)
    return list(stages.choices)


def test_the_stage_table_names_the_module_that_adds_each_stage():
    added = {stage: module for module in registering_modules() for stage in stages_added_by(module)}
    assert cli.STAGES == added, "chartrl.cli.STAGES: each stage with the module that adds it (new ones too)"
    assert set(cli.COMMAND_GROUPS) == set(registering_modules())


@pytest.mark.parametrize("stage", sorted(cli.STAGES))
def test_a_stages_own_parser_reads_it_as_the_whole_parser_does(stage):
    def subparser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        (choices,) = [a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        return choices[stage]

    def described(parser: argparse.ArgumentParser) -> list:
        """Each option and positional of a parser and of its sub-commands, with what it does with its value."""
        found = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                found += [(name, described(sub)) for name, sub in action.choices.items()]
            else:
                found.append((type(action).__name__, action.option_strings, action.dest, action.nargs,
                              repr(action.default), repr(action.choices), action.required))  # fmt: skip
        return found + [repr(sorted(parser._defaults.items(), key=lambda item: item[0]))]

    own, whole = subparser(cli.build_parser(stage)), subparser(cli.build_parser())
    assert described(own) == described(whole)
    assert own.format_help() == whole.format_help()


def test_a_job_loads_its_own_stages_module_alone():
    script = (
        "import json, sys, chartrl.cli\n"
        "chartrl.cli.build_parser(sys.argv[1])\n"
        "print(json.dumps(sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('chartrl.commands.'))))\n"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", script, "diagonal"], capture_output=True, text=True,
                                       check=True, timeout=120).stdout)  # fmt: skip
    assert [module for module in loaded if module in cli.COMMAND_GROUPS] == ["score"]
