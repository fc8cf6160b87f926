"""What a job's code fingerprint holds (chartrl.fingerprint): a module's digest ignores comments, docstrings and
formatting and follows every statement, constant and default; the import closure follows every import that can
run, function-local ones included, and the packages on the way, but not a registry's imports by name or an import
under TYPE_CHECKING; a package's templates count, the prompt templates only where a job names them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chartrl import fingerprint
from chartrl.fingerprint import (
    changed_files,
    code_fingerprint,
    import_closure,
    load_facts_cache,
    normalised_source,
    save_facts_cache,
    template_files,
)

BASE = '''"""A module."""

import os

LIMIT = 3  # the most


def scale(value, factor=2):
    """Scale a value."""
    return value * factor + LIMIT
'''

# (the edited module, whether its digest must differ from BASE's)
EDITS = [
    (BASE.replace("# the most", "# the most, say"), False),  # a comment
    (BASE.replace('"""Scale a value."""', '"""Scale a value by a factor."""'), False),  # a docstring
    (BASE.replace('"""A module."""', ""), False),  # the module's docstring gone
    (BASE.replace("value * factor + LIMIT", "(value * factor\n            + LIMIT)"), False),  # formatting
    (BASE.replace("import os\n", "import os  # noqa\n\n\n"), False),  # blank lines and a comment
    (BASE + '\n"""A note after the code."""\n', False),  # a bare string statement
    (BASE.replace("def scale(value, factor=2):\n", "def scale(value, factor=2):\n    # why\n"), False),
    (BASE.replace("LIMIT = 3", "LIMIT = 4"), True),  # a constant
    (BASE.replace("factor=2", "factor=3"), True),  # a default
    (BASE.replace("value * factor", "value + factor"), True),  # an operator
    (BASE.replace("import os\n", "import os\nimport sys\n"), True),  # an import
    (BASE.replace('    """Scale a value."""\n', '    """Scale a value."""\n    print(value)\n'), True),  # a statement
]


@pytest.mark.parametrize(("edited", "differs"), EDITS)
def test_a_digest_follows_statements_not_comments_docstrings_or_formatting(edited, differs):
    assert (normalised_source(edited) != normalised_source(BASE)) == differs


def test_a_function_that_is_only_a_docstring_is_a_function_that_passes():
    assert normalised_source('def f():\n    """Nothing yet."""\n') == normalised_source("def f():\n    pass\n")


def tree(root: Path, files: dict[str, str]) -> Path:
    """A package ``chartrl`` under ``root`` with ``files`` (paths relative to it)."""
    package = root / "chartrl"
    for name, text in {"__init__.py": "", **files}.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    fingerprint.module_files.cache_clear()
    return package


TREE = {
    "cli.py": "from chartrl.commands import train\n",
    "commands/__init__.py": "",
    "commands/train.py": "from chartrl.rewards import registry\n\n\ndef run():\n    from chartrl.trainer import fit\n",
    "rewards/__init__.py": (
        "import importlib\nimport pkgutil\n\nfrom chartrl.rewards import definitions\n\n"
        "for m in pkgutil.iter_modules(definitions.__path__):\n"
        "    importlib.import_module(f'chartrl.rewards.definitions.{m.name}')\n"
    ),
    "rewards/registry.py": "from . import inputs\nfrom ..answers import extract\n",
    "rewards/inputs.py": "",
    "rewards/definitions/__init__.py": "",
    "rewards/definitions/v2.py": "from chartrl.rewards.registry import register\n",
    "answers.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from chartrl.report import page\n",
    "trainer.py": "import torch\n",
    "report/__init__.py": "",
    "report/page.py": "",
    "report/templates/page.html.jinja": "<html>",
    "prompts/__init__.py": "",
    "prompts/tool_use.jinja": "Use a tool.",
    "prompts/no_tool.jinja": "Answer.",
}


def test_the_closure_follows_every_import_that_can_run_and_the_packages_on_the_way(tmp_path):
    package = tree(tmp_path, TREE)
    assert import_closure(["chartrl.cli"], package) == [
        "chartrl",
        "chartrl.answers",  # from ..answers (relative), in rewards.registry
        "chartrl.cli",
        "chartrl.commands",  # the package above commands.train
        "chartrl.commands.train",
        "chartrl.rewards",  # runs when rewards.registry is imported; its imports by name are not followed
        "chartrl.rewards.definitions",
        "chartrl.rewards.inputs",  # from . import inputs
        "chartrl.rewards.registry",
        "chartrl.trainer",  # a function-local import
    ]  # not chartrl.report.page: imported under TYPE_CHECKING only; not rewards.definitions.v2: by name


def test_a_registry_entry_is_added_by_name_with_what_it_imports(tmp_path):
    package = tree(tmp_path, TREE)
    closure = import_closure(["chartrl.cli", "chartrl.rewards.definitions.v2"], package)
    assert "chartrl.rewards.definitions.v2" in closure
    with pytest.raises(KeyError, match="chartrl.rewards.definitions.v9"):
        import_closure(["chartrl.rewards.definitions.v9"], package)


def test_templates_count_with_their_package_and_prompt_templates_only_by_name(tmp_path):
    package = tree(tmp_path, TREE)
    templates = template_files(["tool_use", "nope"], package)
    found = code_fingerprint(["chartrl.report.page", "chartrl.prompts"], templates, package)
    assert set(found) == {
        "__init__.py",
        "report/__init__.py",
        "report/page.py",
        "report/templates/page.html.jinja",  # a template of the report package
        "prompts/__init__.py",
        "prompts/tool_use.jinja",  # named; no_tool.jinja is not, and "nope" is no template
    }
    before = found["report/templates/page.html.jinja"]
    (package / "report/templates/page.html.jinja").write_text("<html lang='en'>")
    after = code_fingerprint(["chartrl.report.page"], (), package)["report/templates/page.html.jinja"]
    assert after != before  # a template by its bytes


def test_a_changed_file_is_named(tmp_path):
    package = tree(tmp_path, TREE)
    before = code_fingerprint(["chartrl.cli"], (), package)
    (package / "rewards" / "inputs.py").write_text("FIELDS = ('a',)\n")
    (package / "answers.py").write_text("# a comment only\n" + TREE["answers.py"])
    (package / "trainer.py").write_text("import torch\n\n\ndef fit():\n    from chartrl import extra\n")
    (package / "extra.py").write_text("")
    fingerprint.module_files.cache_clear()
    after = code_fingerprint(["chartrl.cli"], (), package)
    assert changed_files(before, after) == ["rewards/inputs.py changed", "trainer.py changed", "extra.py added"]


def test_the_cache_of_parsed_modules_gives_what_a_parse_gives(tmp_path, monkeypatch):
    package = tree(tmp_path, TREE)
    monkeypatch.setattr(fingerprint, "FACTS_CACHE", {})
    fresh = code_fingerprint(["chartrl.cli"], (), package)
    cache = tmp_path / "facts.json"
    save_facts_cache(cache, package)
    assert len(json.loads(cache.read_text())) == len(fingerprint.FACTS_CACHE)
    monkeypatch.setattr(fingerprint, "FACTS_CACHE", {})
    load_facts_cache(cache)
    loaded = dict(fingerprint.FACTS_CACHE)
    assert code_fingerprint(["chartrl.cli"], (), package) == fresh and fingerprint.FACTS_CACHE == loaded
    # keyed by content: an edited module is parsed again, whatever the cache holds
    (package / "trainer.py").write_text("import numpy\n")
    assert code_fingerprint(["chartrl.cli"], (), package)["trainer.py"] != fresh["trainer.py"]
    cache.write_text("not json")
    load_facts_cache(cache)  # an unreadable cache adds nothing and fails nothing


def test_the_package_itself_walks(tmp_path):
    """The real package: every job's entry point is there, and no module imports one that does not exist."""
    closure = import_closure(["chartrl.cli", "chartrl.commands.train"])
    assert {"chartrl.cli", "chartrl.commands.train", "chartrl.rewards.registry", "chartrl.config"} <= set(closure)
    assert not any(name.startswith("chartrl.rewards.definitions.") for name in closure)
    assert not any(name.startswith("chartrl.verl_backend") for name in closure)  # the local trainer's closure
