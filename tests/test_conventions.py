"""Snakemake conventions a user expects, read from the rule files and the documentation: every rule has a log and
a benchmark, the judge-bound score rule declares its memory and retries, and every documented command passes the
workflow profile (Snakemake does not find it on its own beside a root Snakefile)."""

from __future__ import annotations

import re

import pytest

from conftest import REPO

RULE = re.compile(r"^( *)(?:rule|checkpoint) (\w+):\n((?:\1 {4}.*\n|\s*\n)*)", re.MULTILINE)


def rules() -> dict[str, str]:
    """Every rule's body by name (a rule defined once per backend is checked in both forms)."""
    found: dict[str, str] = {}
    for path in sorted((REPO / "rules").glob("*.smk")):
        for match in RULE.finditer(path.read_text()):
            found[f"{path.name}:{match.group(2)}:{match.start()}"] = match.group(3)
    return found


def test_the_rule_files_hold_every_rule():
    names = {key.split(":")[1] for key in rules()}
    assert {"data_split", "data_card", "train", "generate", "score", "diagonal", "report"} <= names


@pytest.mark.parametrize("rule", sorted(rules()))
def test_every_rule_has_a_log_and_a_benchmark(rule):
    body = rules()[rule]
    assert re.search(r"^\s+log:", body, re.MULTILINE), f"{rule} has no log:"
    assert re.search(r"^\s+benchmark:\s*\n\s+\"results/benchmarks/", body, re.MULTILINE), f"{rule} has no benchmark:"


def test_the_judge_bound_score_rule_declares_memory_and_retries():
    [body] = [body for key, body in rules().items() if key.split(":")[1] == "score"]
    assert re.search(r"^\s+retries: [1-9]", body, re.MULTILINE)
    assert re.search(r"^\s+resources:\s*\n\s+mem_mb=", body, re.MULTILINE)


def documented_commands() -> list[tuple[str, str]]:
    """``snakemake`` commands that run the workflow (``--cores``, or a dry run of a config), as the docs and comments
    write them."""
    files = [REPO / "README.md", REPO / "Makefile", *sorted((REPO / "config").glob("*.yaml"))]
    files += sorted((REPO / "workflow" / "profiles").glob("*/*.yaml"))
    commands = []
    for path in files:
        for line in path.read_text().splitlines():
            for command in re.findall(r"snakemake (?:[^`#\n]*)", line):
                if "--cores" in command or (re.search(r" -n\b", command) and "--configfile" in command):
                    commands.append((path.name, command))
    return commands


def test_every_documented_run_passes_a_profile():
    commands = documented_commands()
    assert len(commands) > 10
    for where, command in commands:
        assert "--workflow-profile" in command or "--profile" in command, f"{where}: {command}"


def test_test_modules_have_distinct_names():
    """pytest imports test modules by basename (the folders have no __init__.py): two files of one name stop the
    suite at collection."""
    names: dict[str, list[str]] = {}
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        names.setdefault(path.name, []).append(str(path.relative_to(REPO)))
    assert {name: paths for name, paths in names.items() if len(paths) > 1} == {}
