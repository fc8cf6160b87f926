"""What code a job runs, by content: the chartrl modules a command imports, each fingerprinted by its normalised
source, so that a job reruns when code it runs changes and never for a comment, a docstring, a reformatting, a
``touch`` or a checkout moved elsewhere.

- :func:`import_closure`: the chartrl modules that importing some modules runs, read from the source with ``ast``
  (nothing is imported): every ``import`` and ``from ... import`` of a chartrl module, at module level or inside a
  function, absolute or relative, and the ``__init__`` of every package on the way (Python runs them). Imports under
  ``if TYPE_CHECKING:`` never run and do not count. A registry that loads its entries by name (``importlib`` over a
  folder: the reward definitions, the dataset readers, the judge backends) is not followed: a job depends on the
  entries its config selects, which the workflow names beside the command (``chartrl.workflow``).
- :func:`normalised_source`: a module's syntax tree without its docstrings and other bare string statements,
  without line numbers: comments, docstrings and formatting drop out; a changed statement, constant or default
  does not.
- :func:`code_fingerprint`: module file -> digest for a closure, plus the files that are not Python in the folders
  of its packages (the report's templates, the chat template, verl's agent-loop YAML), digested as they are. Two
  kinds of file are left out: the prompt templates, which ``chartrl.prompts`` renders by name, count for the
  jobs whose config names them (:func:`template_files`); the config schema, in the top folder, counts for none
  (its defaults reach a job through the job's spec).

Third-party code is not fingerprinted: the lock file pins it, and Snakemake's software-env trigger covers an
environment that changes.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

PACKAGE = "chartrl"
ROOT = Path(__file__).resolve().parent
"""The folder of the chartrl package whose code the jobs run (the one this module belongs to)."""
TEMPLATES = "prompts"
"""The folder of the templates ``chartrl.prompts`` renders by name (``<name>.jinja``)."""
DIGEST_LENGTH = 12
"""Hex characters of each digest kept (48 bits: a collision between two versions of one file is not a concern)."""


def normalised_source(text: str, filename: str = "<source>") -> str:
    """The module's syntax tree as text, without docstrings, bare string statements and positions."""
    return normalised_tree(ast.parse(text, filename=filename))


def normalised_tree(tree: ast.Module) -> str:
    """:func:`normalised_source` of a parsed module (its docstrings are taken out of ``tree``)."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if not isinstance(body, list) or not body or not isinstance(body[0], ast.stmt):
                continue
            kept = [statement for statement in body if not _is_bare_string(statement)]
            if len(kept) != len(body):
                setattr(node, field, kept or [ast.Pass()])
    return ast.dump(tree, include_attributes=False)


def _is_bare_string(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:DIGEST_LENGTH]


@cache
def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> its file, for every module of the package at ``root`` (a package by its
    ``__init__.py``)."""
    files = {}
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = [PACKAGE, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        files[".".join(parts)] = path
    return files


@dataclass(frozen=True)
class ModuleFacts:
    """What one module's source says: its digest and the imports it runs (absolute; ``names`` None for ``import
    base``, the imported names for ``from base import ...``)."""

    digest: str
    imports: tuple[tuple[str, tuple[str, ...] | None], ...]


FACTS_CACHE: dict[tuple[str, str], ModuleFacts] = {}
"""(module name, SHA-256 of the file's bytes) -> its facts. Keyed by content, so an entry is the answer a fresh
parse would give: it saves the parse (about 2 ms a module) and never decides a rerun. Filled by
:func:`module_facts`; :func:`load_facts_cache` and :func:`save_facts_cache` keep it in a file between runs."""


def module_facts(path: Path, name: str) -> ModuleFacts:
    data = path.read_bytes()
    key = (name, hashlib.sha256(data).hexdigest())
    facts = FACTS_CACHE.get(key)
    if facts is None:
        facts = FACTS_CACHE[key] = _read_facts(data.decode(), path, name)
    return facts


def _read_facts(text: str, path: Path, name: str) -> ModuleFacts:
    tree = ast.parse(text, filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    imports: set[tuple[str, tuple[str, ...] | None]] = set()
    for node in _running_imports(tree):
        if isinstance(node, ast.Import):
            imports.update((alias.name, None) for alias in node.names)
        else:
            imports.add((_absolute(node, package), tuple(alias.name for alias in node.names)))
    return ModuleFacts(digest(normalised_tree(tree).encode()), tuple(sorted(imports, key=repr)))


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    base = parts[: len(parts) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def _running_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: anywhere in the tree but under ``if TYPE_CHECKING:``."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_modules(name: str, root: Path = ROOT) -> set[str]:
    """The chartrl modules module ``name`` imports itself (not transitively), with the packages on the way."""
    files = module_files(root)
    found: set[str] = set()
    for base, names in module_facts(files[name], name).imports:
        targets = [base] if names is None else [f"{base}.{n}" if f"{base}.{n}" in files else base for n in names]
        for target in targets:
            found.update(_with_packages(target, files))
    found.discard(name)
    return found


def _with_packages(target: str, files: dict[str, Path]) -> Iterator[str]:
    """``target`` (when it is a chartrl module) and every chartrl package above it: importing it runs them all."""
    parts = target.split(".")
    if parts[0] != PACKAGE:
        return
    for end in range(1, len(parts) + 1):
        prefix = ".".join(parts[:end])
        if prefix in files:
            yield prefix


def import_closure(modules: Iterable[str], root: Path = ROOT) -> list[str]:
    """Every chartrl module that importing ``modules`` runs, sorted: each of them, the packages above them and,
    transitively, what they import. An unknown module name raises."""
    files = module_files(root)
    todo = []
    for name in modules:
        if name not in files:
            raise KeyError(f"{name!r} is not a module of {root}")
        todo.extend(_with_packages(name, files))
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(imported_modules(name, root) - seen)
    return sorted(seen)


def data_files(folder: Path, root: Path = ROOT) -> list[Path]:
    """The files of a package's folder that are not Python, with those of its subfolders that hold no Python (a
    package's templates); none for the top folder (the config schema) and the prompt templates (see the module's
    docstring)."""
    if folder in (root, root / TEMPLATES):
        return []
    found = []
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.suffix not in (".py", ".pyc"):
            found.append(path)
        elif path.is_dir() and path.name != "__pycache__" and not any(path.rglob("*.py")):
            found.extend(p for p in sorted(path.rglob("*")) if p.is_file())
    return found


def template_files(names: Iterable[str], root: Path = ROOT) -> list[str]:
    """The prompt templates of ``names`` that exist, as :func:`code_fingerprint` takes files (a name that is no
    template, or a config value that names none, adds nothing)."""
    return sorted({f"{TEMPLATES}/{name}.jinja" for name in names if (root / TEMPLATES / f"{name}.jinja").is_file()})


def code_fingerprint(modules: Iterable[str], files: Iterable[str] = (), root: Path = ROOT) -> dict[str, str]:
    """File (relative to the package folder) -> digest, for the closure of ``modules``, its packages' other files
    (templates) and ``files`` (relative to the package folder: the prompt templates a job's config names): what a
    job running those modules depends on. A module's digest is of its normalised source, another file's of its
    bytes."""
    names = module_files(root)
    digests = {names[name]: module_facts(names[name], name).digest for name in import_closure(modules, root)}
    for folder in {path.parent for path in digests}:
        digests.update({path: digest(path.read_bytes()) for path in data_files(folder, root)})
    digests.update({root / file: digest((root / file).read_bytes()) for file in files})
    return {path.relative_to(root).as_posix(): digests[path] for path in sorted(digests)}


def changed_files(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What differs between two fingerprints, one phrase per file: ``rollout/episodes.py changed``, ``... added``
    (a module the job now imports), ``... removed``."""
    lines = [f"{path} changed" for path in sorted(before.keys() & after.keys()) if before[path] != after[path]]
    lines += [f"{path} added" for path in sorted(after.keys() - before.keys())]
    lines += [f"{path} removed" for path in sorted(before.keys() - after.keys())]
    return lines


def load_facts_cache(path: Path) -> None:
    """Add the entries of a cache file written by :func:`save_facts_cache` (a missing or unreadable file adds
    none: the cache only saves time)."""
    try:
        entries = json.loads(path.read_text())
        for name, sha, module_digest, imports in entries:
            facts = tuple((base, None if names is None else tuple(names)) for base, names in imports)
            FACTS_CACHE[(name, sha)] = ModuleFacts(module_digest, facts)
    except (OSError, ValueError, TypeError):
        return


def save_facts_cache(path: Path, root: Path = ROOT) -> None:
    """Write the cache's entries of the modules as they are now (atomically; entries of older versions go)."""
    current = {(name, hashlib.sha256(file.read_bytes()).hexdigest()) for name, file in module_files(root).items()}
    entries = [
        [name, sha, facts.digest, [[base, None if names is None else list(names)] for base, names in facts.imports]]
        for (name, sha), facts in sorted(FACTS_CACHE.items())
        if (name, sha) in current
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(entries))
    temporary.replace(path)
