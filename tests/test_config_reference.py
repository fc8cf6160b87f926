"""docs/config.md is the config reference rendered from the schema (every key, its type, default and meaning): it
fails here when the schema changed and the file was not regenerated, and the schema loads with no key twice (PyYAML
keeps the last of two silently)."""

from __future__ import annotations

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
