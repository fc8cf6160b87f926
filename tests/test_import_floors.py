"""The import floors: every ``chartrl`` import points down the layering below, and no packages import each other in
a circle. Read from the source with ``ast`` (nothing is imported), top-level and function-local imports alike,
absolute and relative.

A package may import its own modules, and the packages of a lower floor or of its own floor as long as that makes
no circle. A new top-level module or package has to be given a floor here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "chartrl"

FLOORS: tuple[frozenset[str], ...] = tuple(
    frozenset(floor)
    for floor in (
        {"errors", "files", "progress", "prompts", "forkserver", "installation"},  # the last two: standard library
        {"config"},  # a package: schema, sections, checks (source and backend checks register from their own code)
        {"data", "answers", "tracking", "launch", "ray_head"},  # answers: extraction and relaxed accuracy
        {"tools", "judge"},
        {"rollout", "model"},
        {"warmstart"},
        {"rewards", "train", "evaluate"},
        {"verl_backend"},  # everything verl-specific
        {"report"},
        {"commands", "cli", "__main__"},
    )
)
"""The layering from the bottom up: top-level modules and packages of ``chartrl`` by floor."""

ONLY_IMPORTED_BY = {"verl_backend": frozenset({"commands"})}
"""Packages that only the named packages may import: verl is reached from the commands alone."""

ALLOWED: set[tuple[str, str]] = set()
"""(file under chartrl/, imported module): known exceptions, each with the reason beside it. Empty: keep it so."""


@dataclass(frozen=True)
class Import:
    path: str
    """The importing file, relative to the ``chartrl`` folder."""
    line: int
    module: str
    """The imported module, absolute (``chartrl.rollout.episodes``)."""

    @property
    def importer(self) -> str:
        return top_level(self.path.removesuffix(".py").replace("/", "."))

    @property
    def imported(self) -> str:
        return top_level(self.module.removeprefix("chartrl."))

    def __str__(self) -> str:
        return f"chartrl/{self.path}:{self.line} imports {self.module}"


def top_level(dotted: str) -> str:
    return dotted.split(".")[0]


def module_name(root: Path, path: Path) -> tuple[str, str]:
    """The dotted name of the module at ``path`` and the package its relative imports start from."""
    parts = ["chartrl", *path.relative_to(root).with_suffix("").parts]
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), ".".join(parts[:-1])
    return ".".join(parts), ".".join(parts[:-1])


def imports(root: Path) -> Iterator[Import]:
    """Every import of a ``chartrl`` module by a file under ``root`` (the ``chartrl`` folder)."""
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        _, package = module_name(root, path)
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            for module in imported_modules(node, package, root):
                if module == "chartrl" or module.startswith("chartrl."):
                    yield Import(relative, node.lineno, module)


def imported_modules(node: ast.AST, package: str, root: Path) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        module = ".".join([*base, node.module] if node.module else base)
    else:
        module = node.module or ""
    if module != "chartrl":
        return [module]
    # ``from chartrl import prompts``: the names are the modules (the package's __init__ defines nothing to import)
    return [f"chartrl.{alias.name}" for alias in node.names]


def floor_of(package: str, floors: Sequence[frozenset[str]]) -> int | None:
    return next((i for i, floor in enumerate(floors) if package in floor), None)


def problems(
    found: Iterable[Import],
    floors: Sequence[frozenset[str]] = FLOORS,
    only_imported_by: dict[str, frozenset[str]] = ONLY_IMPORTED_BY,
    allowed: set[tuple[str, str]] = ALLOWED,
) -> list[str]:
    """One line per import that points up a floor or into a package reserved for others, per import that closes a
    circle between packages, per package without a floor, and per allowed exception that no longer exists."""
    found = list(found)
    out: list[str] = []
    edges: dict[tuple[str, str], list[Import]] = {}
    used_exceptions = set()
    for item in found:
        importer, imported = item.importer, item.imported
        if importer == imported:
            continue
        if (item.path, item.module) in allowed:
            used_exceptions.add((item.path, item.module))
            continue
        low, high = floor_of(imported, floors), floor_of(importer, floors)
        for name, floor in ((importer, high), (imported, low)):
            if floor is None:
                out.append(f"{item}: package {name!r} has no floor; give it one in FLOORS")
        if low is not None and high is not None and low > high:
            out.append(f"{item}: points up, from {importer} (floor {high}) to {imported} (floor {low})")
        if imported in only_imported_by and importer not in only_imported_by[imported]:
            allowed_by = ", ".join(sorted(only_imported_by[imported]))
            out.append(f"{item}: only {allowed_by} may import {imported}")
        edges.setdefault((importer, imported), []).append(item)
    for (importer, imported), circle in circles(set(edges)).items():
        for item in edges[(importer, imported)]:
            out.append(f"{item}: part of the circle {' -> '.join([*circle, circle[0]])}")
    for path, module in sorted(allowed - used_exceptions):
        out.append(f"chartrl/{path} no longer imports {module}: remove it from ALLOWED")
    return out


def circles(edges: set[tuple[str, str]]) -> dict[tuple[str, str], list[str]]:
    """Each edge that lies on a circle, with the shortest such circle (starting at the edge's importer). An edge is
    on a circle when its two ends are in one strongly connected group (Tarjan's algorithm)."""
    graph: dict[str, list[str]] = {}
    for a, b in sorted(edges):
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    group_of: dict[str, int] = {}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            while (member := stack.pop()) != node:
                group_of[member] = index[node]
            group_of[node] = index[node]

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return {
        (a, b): [a, *_shortest_path(b, a, graph)[:-1]]
        for a, b in sorted(edges)
        if a != b and group_of[a] == group_of[b]
    }


def _shortest_path(start: str, end: str, graph: dict[str, list[str]]) -> list[str]:
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        if node == end:
            return paths[node]
        for nxt in graph[node]:
            if nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                queue.append(nxt)
    raise AssertionError(f"no path from {start} to {end} in one strongly connected group")


def test_every_import_points_down_and_no_packages_import_each_other_in_a_circle():
    found = list(imports(SRC))
    assert len(found) > 100  # the walk sees the code
    assert problems(found) == []


# ---------------------------------------------------------------------------------------------------------------
# The checker itself, on tiny trees: it must not pass silently.
# ---------------------------------------------------------------------------------------------------------------

TINY_FLOORS = (frozenset({"base"}), frozenset({"left", "right"}), frozenset({"top"}))


def tiny_tree(root: Path, files: dict[str, str]) -> Path:
    package = root / "chartrl"
    for name, text in {"__init__.py": "", **files}.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return package


def tiny_problems(root: Path, files: dict[str, str], **options) -> list[str]:
    package = tiny_tree(root, files)
    return problems(imports(package), floors=TINY_FLOORS, only_imported_by={}, allowed=set(), **options)


def test_a_tree_whose_imports_point_down_passes(tmp_path):
    files = {
        "base.py": "import json\n",
        "left/__init__.py": "from chartrl import base\n",
        "left/a.py": "from . import b\nfrom .b import thing\nfrom chartrl.left.b import thing\n",
        "left/b.py": "def f():\n    from chartrl.right import r\n",
        "right/__init__.py": "",
        "right/r.py": "from ..base import x\n",
        "top.py": "import chartrl.left.a\nfrom chartrl.right.r import y\n",
    }
    assert tiny_problems(tmp_path, files) == []


def test_an_upward_import_is_named_with_its_file_line_and_module(tmp_path):
    files = {
        "base.py": "import os\n\n\ndef later():\n    from chartrl.top import x\n",  # function-local
        "left/__init__.py": "",
        "left/a.py": "from ..top import y\n",  # relative
        "top.py": "",
    }
    assert tiny_problems(tmp_path, files) == [
        "chartrl/base.py:5 imports chartrl.top: points up, from base (floor 0) to top (floor 2)",
        "chartrl/left/a.py:1 imports chartrl.top: points up, from left (floor 1) to top (floor 2)",
    ]


def test_a_circle_on_one_floor_is_named(tmp_path):
    files = {
        "left/__init__.py": "",
        "left/a.py": "from chartrl.right import r\n",
        "right/__init__.py": "",
        "right/r.py": "def f():\n    import chartrl.left.a\n",
    }
    assert tiny_problems(tmp_path, files) == [
        "chartrl/left/a.py:1 imports chartrl.right: part of the circle left -> right -> left",
        "chartrl/right/r.py:2 imports chartrl.left.a: part of the circle right -> left -> right",
    ]


def test_a_package_without_a_floor_and_a_reserved_package_are_named(tmp_path):
    package = tiny_tree(tmp_path, {"top.py": "from chartrl import extra\n", "left.py": "import chartrl.right\n"})
    found = problems(
        imports(package), floors=TINY_FLOORS, only_imported_by={"right": frozenset({"top"})}, allowed=set()
    )
    assert found == [
        "chartrl/left.py:1 imports chartrl.right: only top may import right",
        "chartrl/top.py:1 imports chartrl.extra: package 'extra' has no floor; give it one in FLOORS",
    ]


def test_allowed_exceptions_pass_until_they_are_gone(tmp_path):
    package = tiny_tree(tmp_path, {"base.py": "from chartrl.top import x\n", "top.py": ""})
    allowed = {("base.py", "chartrl.top"), ("top.py", "chartrl.base")}
    assert problems(imports(package), floors=TINY_FLOORS, only_imported_by={}, allowed=allowed) == [
        "chartrl/top.py no longer imports chartrl.base: remove it from ALLOWED"
    ]
