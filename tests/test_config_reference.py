"""docs/config.md is the config reference rendered from the schema (every key, its type, default and meaning): it
fails here when the schema changed and the file was not regenerated, and the schema loads with no key twice (PyYAML
keeps the last of two silently)."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from chartrl.commands.config_reference import load_schema_text, render_reference

from conftest import REPO

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"
REFERENCE = REPO / "docs" / "config.md"


def test_the_reference_is_current():
    assert REFERENCE.read_text() == render_reference(load_schema_text(SCHEMA.read_text())), (
        "docs/config.md is not what the schema renders to: run `chartrl config reference --out docs/config.md`"
    )


def test_the_schema_holds_no_key_twice():
    load_schema_text(SCHEMA.read_text())
    with pytest.raises(Exception, match="duplicate key 'a'"):
        load_schema_text("x:\n  a: 1\n  a: 2\n")


def test_every_key_with_a_default_is_in_the_reference():
    """Every property the schema gives a description or a default is a row of some table."""
    schema = yaml.safe_load(SCHEMA.read_text())
    keys: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            for key, child in (node.get("properties") or {}).items():
                if isinstance(child, dict) and ("description" in child or "default" in child):
                    keys.add(key)
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(schema)
    rows = set(re.findall(r"^\| `([^`]+)` \|", REFERENCE.read_text(), re.MULTILINE))
    top = set(re.findall(r"^\| \[`([^`]+)`\]", REFERENCE.read_text(), re.MULTILINE))
    assert keys - rows - top == set()


README = REPO / "README.md"
FIFTEENTH = '  e15: {generation: v2, kind: eval, description: "e6 on test, panel scorer", of: e6, scorers: [panel]}\n'
"""A series added by one line of config/series.yaml."""


def test_the_readmes_series_table_is_the_configs():
    from chartrl.commands.series_table import render_series_table, with_series_table
    from chartrl.config import load_config

    text = README.read_text()
    assert text == with_series_table(text, render_series_table(load_config(root=REPO))), (
        "README.md's series table is not config/series.yaml's: run `chartrl config series --out README.md`"
    )


@pytest.mark.slow
def test_a_series_added_by_one_line_is_in_the_readme_and_the_dag(tmp_path):
    """One line in config/series.yaml: the config checks, the documented command puts it in the README's table, and
    the DAG plans its jobs."""
    import shutil
    import subprocess
    import sys

    from planned_jobs import planned_jobs

    copy = tmp_path / "chartrl"
    for item in ("Snakefile", "rules", "workflow", "config", "envs", "README.md", "tests/planned_jobs.py"):
        source, target = REPO / item, copy / item
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, target)
    (copy / "tests" / "fixtures").symlink_to(REPO / "tests" / "fixtures")
    with (copy / "config" / "series.yaml").open("a") as series:
        series.write(FIFTEENTH)
    chartrl = [sys.executable, "-m", "chartrl", "config"]
    for command in (["check", "--root", str(copy)], ["series", "--root", str(copy), "--out", str(copy / "README.md")]):
        result = subprocess.run([*chartrl, *command], capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
    assert "| e15 | v2 | eval of e6 |  | panel scorer |  | e6 on test, panel scorer |" in (copy / "README.md").read_text()
    script = copy / "tests" / "planned_jobs.py"
    result = subprocess.run([sys.executable, str(script), str(tmp_path / "work")], input="[[]]", capture_output=True,
                            text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    [plan] = json.loads(result.stdout.splitlines()[-1])
    assert {"generate|series=e15", "score|scorer=panel, series=e15"} <= set(plan)  # its checkpoint: e6's last
