"""The import floors: every ``chartrl`` import points down the layering below, no packages or modules import each
other in a circle, and no module imports another's private name. Read from the source with ``ast`` (nothing is
imported), top-level and function-local imports alike, absolute and relative.

Between packages: a package may import its own modules, and the packages of a lower floor or of its own floor as
long as that makes no circle. A new top-level module or package has to be given a floor in ``FLOORS``.

Inside a package: its modules stand on floors of their own (``MODULE_FLOORS``, from the bottom up; a folder of
modules inside it, such as ``rewards/definitions``, stands on one floor with all its modules), and the same rule holds: a
module imports modules of its package on a lower floor, or on its own floor without a circle. The package's
``__init__`` stands above them all (it may hand their names on; none of them imports it). A new module has to be
given a floor there (a module added to such a folder has its folder's).

Private names: a name that starts with ``_`` (dunders aside) stays in its module: no ``from m import _name`` and no
``m._name`` on an imported module, from any other module. A name two modules share is public.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "chartrl"

FLOORS: tuple[frozenset[str], ...] = tuple(
    frozenset(floor)
    for floor in (
        # forkserver, installation, fingerprint: the standard library only; threads: and torch
        {"errors", "files", "progress", "prompts", "forkserver", "installation", "threads", "fingerprint"},
        {"config"},  # a package: schema, sections, checks (source and backend checks register from their own code)
        {"data", "answers", "tracking", "launch", "ray_head"},  # answers: extraction and relaxed accuracy
        {"tools", "judge"},
        {"rollout", "model"},
        {"warmstart"},
        {"rewards", "train", "evaluate"},
        {"verl_backend"},  # everything verl-specific
        {"report"},
        {"commands", "cli", "__main__", "workflow"},  # workflow: what the Snakemake rules read of chartrl
    )
)
"""The layering from the bottom up: top-level modules and packages of ``chartrl`` by floor."""


def _floors(*floors: str) -> tuple[frozenset[str], ...]:
    """Floors from the bottom up, each given as its module names separated by spaces."""
    return tuple(frozenset(floor.split()) for floor in floors)


MODULE_FLOORS: dict[str, tuple[frozenset[str], ...]] = {
    "commands": _floors(
        "spec config_reference overlays runs series_table",  # what other commands read
        "config data evaluate generate launch model plan report reward rollout score shortcut tools train warmstart",
        "rerank reruns verl warmstart_check",  # commands built on other commands
    ),
    "config": _floors("schema", "sections", "checks", "load"),
    "data": _floors(
        "contract errors bands geometry",  # the row contract, and what readers build on
        "images sources hub",  # image handling, the source registry, the hub loader
        "chartqa synthchart zoomchart geoqa deepeyes stage",  # the readers, and the stage that reads a split
    ),
    "evaluate": _floors(
        "checkpoints generate habits intervals matrix published_metric score accuracy",
        "diagonal rerank shortcut curve",  # built on scores, generations and accuracy
    ),
    "judge": _floors("base cache verdict", "panel prompt reference usage", "openai_judge", "prm"),
    "model": _floors("vision positions", "batching memo tokenizer", "policy prefix tiny"),
    "prompts": _floors(),
    "report": _floors(
        "helpers order validation",  # what the sections share: panels, intervals, files read, series order
        "collapse comparisons deepeyes finding hypotheses recipes rerank shortcut testcurves tools figures gallery",
        "collect panels",  # every section's numbers, every section's panels
        "build",  # the page
    ),
    "rewards": _floors("inputs symbolic terms", "registry", "shaping scorers", "definitions"),  # definitions: a folder
    "rollout": _floors(
        "cache checks conversation statistics", "kv_reuse generations", "sampling", "episodes", "tool_path"
    ),
    "tools": _floors(
        "boxes calls observations pixels",
        "labels zoom focus",
        "registry",
        "protocol study_checks",
        "execute",
    ),
    "train": _floors("algorithms batch checkpoints resume schedule", "trainer"),
    "verl_backend": _floors(
        "architectures checkpoints checks driver hydra metrics snapshot tool_config trajectory",
        "generations memory overrides rewards tools",
        "gpu_hours",  # the time model, priced from the overrides' per-pass caps
        "agent_loop budget data",
        "job",
        "evaluation shortcut",  # jobs built on the training job's overrides
    ),
    "warmstart": _floors("check supervised"),
}
"""Per package of ``chartrl``, its modules by floor from the bottom up (file names without ``.py``)."""

ONLY_IMPORTED_BY = {"verl_backend": frozenset({"commands", "workflow"})}
"""Packages that only the named packages may import: verl is reached from the commands (and the workflow, which
writes the verl jobs' overrides) alone."""

ALLOWED: set[tuple[str, str]] = set()
"""(file under chartrl/, imported module): known exceptions, each with the reason beside it. Empty: keep it so."""


@dataclass(frozen=True)
class Import:
    path: str
    """The importing file, relative to the ``chartrl`` folder."""
    line: int
    module: str
    """The imported module, absolute (``chartrl.rollout.episodes``): the deepest module file the import names."""
    name: str | None = None
    """The name taken from ``module`` (``from module import name``, or ``module.name``), when it is not a module."""

    @property
    def importer(self) -> str:
        return top_level(self.path.removesuffix(".py").replace("/", "."))

    @property
    def imported(self) -> str:
        return top_level(self.module.removeprefix("chartrl."))

    @property
    def importing_module(self) -> str:
        """The importing module, absolute (a package's ``__init__`` named as ``chartrl.config.__init__``)."""
        return "chartrl." + self.path.removesuffix(".py").replace("/", ".")

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
    """Every import of a ``chartrl`` module by a file under ``root`` (the ``chartrl`` folder), and every private
    name of another module it reaches as an attribute (``module._name``)."""
    modules = {module_name(root, path)[0] for path in root.rglob("*.py")}
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        _, package = module_name(root, path)
        tree = ast.parse(path.read_text(), filename=str(path))
        bound: dict[str, str] = {}  # a name in this file -> the chartrl module it is bound to
        for node in ast.walk(tree):
            for module, name, alias in imported(node, package, modules):
                if module == "chartrl" or module.startswith("chartrl."):
                    yield Import(relative, node.lineno, module, name)
                    if name is None and alias:
                        bound[alias] = module
        attributes = sorted(
            (node for node in ast.walk(tree) if isinstance(node, ast.Attribute) and is_private(node.attr)),
            key=lambda node: (node.lineno, node.col_offset),
        )
        for node in attributes:
            owner = dotted(node.value) or ""
            module = bound.get(owner) or (owner if owner in modules else None)
            if module:
                yield Import(relative, node.lineno, module, node.attr)


def imported(node: ast.AST, package: str, modules: set[str]) -> list[tuple[str, str | None, str | None]]:
    """(module, name or None, the name it is bound to here) for each name an import statement binds."""
    if isinstance(node, ast.Import):
        # ``import chartrl.a.b`` binds ``chartrl``, through which ``chartrl.a.b`` is reached
        return [(alias.name, None, alias.asname or alias.name) for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        module = ".".join([*base, node.module] if node.module else base)
    else:
        module = node.module or ""
    out: list[tuple[str, str | None, str | None]] = []
    for alias in node.names:
        # ``from chartrl.report import panels``: the name is a module (``chartrl``'s __init__ defines no names)
        if f"{module}.{alias.name}" in modules or module == "chartrl":
            out.append((f"{module}.{alias.name}", None, alias.asname or alias.name))
        else:
            out.append((module, alias.name, None))
    return out


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` of an expression made of names and attributes only."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and (base := dotted(node.value)):
        return f"{base}.{node.attr}"
    return None


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def floor_of(package: str, floors: Sequence[frozenset[str]]) -> int | None:
    return next((i for i, floor in enumerate(floors) if package in floor), None)


def problems(
    found: Iterable[Import],
    floors: Sequence[frozenset[str]] = FLOORS,
    only_imported_by: dict[str, frozenset[str]] = ONLY_IMPORTED_BY,
    allowed: set[tuple[str, str]] = ALLOWED,
    module_floors: Mapping[str, Sequence[frozenset[str]]] = MODULE_FLOORS,
) -> list[str]:
    """One line per import that points up a floor or into a package reserved for others, per import that closes a
    circle between packages or between modules, per private name taken from another module, per package or module
    without a floor, and per allowed exception that no longer exists."""
    found = list(found)
    out: list[str] = []
    edges: dict[tuple[str, str], list[Import]] = {}
    module_edges: dict[tuple[str, str], list[Import]] = {}
    used_exceptions = set()
    for item in found:
        importer, imported = item.importer, item.imported
        if item.name is not None and is_private(item.name):
            out.append(f"chartrl/{item.path}:{item.line} takes the private name {item.name} of {item.module}")
        if item.module not in (item.importing_module, item.importing_module.removesuffix(".__init__")):
            module_edges.setdefault((item.importing_module.removesuffix(".__init__"), item.module), []).append(item)
        if importer == imported:
            out.extend(inside_package(item, module_floors))
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
    for (importer, imported), circle in circles(set(module_edges)).items():
        for item in module_edges[(importer, imported)]:
            out.append(f"{item}: part of the circle of modules {' -> '.join([*circle, circle[0]])}")
    for path, module in sorted(allowed - used_exceptions):
        out.append(f"chartrl/{path} no longer imports {module}: remove it from ALLOWED")
    return list(dict.fromkeys(out))


def inside_package(item: Import, module_floors: Mapping[str, Sequence[frozenset[str]]]) -> list[str]:
    """What is wrong with an import between two modules of one package: one without a floor, or one pointing up
    (to a higher floor, or to the package's ``__init__`` from one of its modules)."""
    package = item.importer
    importer = item.importing_module.removeprefix(f"chartrl.{package}").removeprefix(".") or "__init__"
    imported = item.module.removeprefix(f"chartrl.{package}").removeprefix(".") or "__init__"
    if package not in module_floors:
        if "/" not in item.path:  # a top-level module importing itself by name: nothing inside it
            return []
        return [f"{item}: package {package!r} has no module floors; give it some in MODULE_FLOORS"]
    floors = module_floors[package]
    out = []
    ranks = {}
    for name in (importer, imported):
        ranks[name] = len(floors) if name == "__init__" else floor_of(name.split(".")[0], floors)
        if ranks[name] is None:
            out.append(f"{item}: module {package}.{name} has no floor; give it one in MODULE_FLOORS[{package!r}]")
    high, low = ranks[importer], ranks[imported]
    if high is not None and low is not None and low > high:
        out.append(f"{item}: points up inside {package}, from {importer} (floor {high}) to {imported} (floor {low})")
    return out


def missing_modules(root: Path, module_floors: Mapping[str, Sequence[frozenset[str]]] = MODULE_FLOORS) -> list[str]:
    """Modules without a floor in their package and floors naming modules that are gone."""
    out = []
    for package, floors in module_floors.items():
        folder = root / package
        present = {path.stem for path in folder.glob("*.py")} - {"__init__"}
        present |= {path.parent.name for path in folder.glob("*/__init__.py")}  # a folder stands on one floor
        named = set().union(*floors) if floors else set()
        out += [f"chartrl/{package}/{name}.py has no floor in MODULE_FLOORS" for name in sorted(present - named)]
        out += [f"MODULE_FLOORS[{package!r}] names {name}, which is not a module" for name in sorted(named - present)]
    for folder in sorted(path.parent for path in root.glob("*/__init__.py")):
        if folder.name not in module_floors:
            out.append(f"package {folder.name!r} has no module floors; give it some in MODULE_FLOORS")
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


def test_every_import_points_down_with_no_circle_and_no_private_name():
    found = list(imports(SRC))
    assert len(found) > 100  # the walk sees the code
    assert problems(found) == []


def test_every_module_of_a_package_has_a_floor():
    assert missing_modules(SRC) == []


# ---------------------------------------------------------------------------------------------------------------
# The checker itself, on tiny trees: it must not pass silently.
# ---------------------------------------------------------------------------------------------------------------

TINY_FLOORS = (frozenset({"base"}), frozenset({"left", "right"}), frozenset({"top"}))
TINY_MODULE_FLOORS = {"left": _floors("b", "a"), "right": _floors("r")}


def tiny_tree(root: Path, files: dict[str, str]) -> Path:
    package = root / "chartrl"
    for name, text in {"__init__.py": "", **files}.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return package


def tiny_problems(root: Path, files: dict[str, str], **options) -> list[str]:
    package = tiny_tree(root, files)
    options = {"floors": TINY_FLOORS, "only_imported_by": {}, "allowed": set(), "module_floors": TINY_MODULE_FLOORS}
    return problems(imports(package), **options)


def test_a_tree_whose_imports_point_down_passes(tmp_path):
    files = {
        "base.py": "import json\n",
        "left/__init__.py": "from chartrl import base\nfrom .a import thing\n",
        "left/a.py": "from . import b\nfrom .b import thing\nfrom chartrl.left.b import thing\n",
        "left/b.py": "def f():\n    from chartrl.right import r\n",
        "right/__init__.py": "",
        "right/r.py": "from ..base import x\nfrom __future__ import annotations\n__all__ = r.__name__\n",
        "top.py": "import chartrl.left.a\nfrom chartrl.right.r import y, __version__\n",
    }
    assert tiny_problems(tmp_path, files) == []
    assert missing_modules(tmp_path / "chartrl", TINY_MODULE_FLOORS) == []


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


def test_an_upward_import_inside_a_package_is_named(tmp_path):
    files = {
        "left/__init__.py": "from chartrl.left import a\n",
        "left/a.py": "",
        "left/b.py": "def f():\n    from . import a\n    from chartrl.left import thing\n",  # a, and the __init__
    }
    assert tiny_problems(tmp_path, files) == [
        "chartrl/left/b.py:2 imports chartrl.left.a: points up inside left, from b (floor 0) to a (floor 1)",
        "chartrl/left/b.py:3 imports chartrl.left: points up inside left, from b (floor 0) to __init__ (floor 2)",
    ]


def test_a_circle_on_one_floor_is_named(tmp_path):
    files = {
        "left/__init__.py": "",
        "left/a.py": "from chartrl.right import r\n",
        "right/__init__.py": "",
        "right/r.py": "def f():\n    import chartrl.left.a\n",
    }
    assert tiny_problems(tmp_path, files) == [
        "chartrl/left/a.py:1 imports chartrl.right.r: part of the circle left -> right -> left",
        "chartrl/right/r.py:2 imports chartrl.left.a: part of the circle right -> left -> right",
        "chartrl/left/a.py:1 imports chartrl.right.r: part of the circle of modules chartrl.left.a -> chartrl.right.r"
        " -> chartrl.left.a",
        "chartrl/right/r.py:2 imports chartrl.left.a: part of the circle of modules chartrl.right.r -> chartrl.left.a"
        " -> chartrl.right.r",
    ]


def test_a_circle_of_modules_inside_one_floor_of_a_package_is_named(tmp_path):
    module_floors = {"left": _floors("a b")}
    package = tiny_tree(
        tmp_path, {"left/__init__.py": "", "left/a.py": "from .b import x\n", "left/b.py": "import chartrl.left.a\n"}
    )
    found = problems(
        imports(package), floors=TINY_FLOORS, only_imported_by={}, allowed=set(), module_floors=module_floors
    )
    assert found == [
        "chartrl/left/a.py:1 imports chartrl.left.b: part of the circle of modules chartrl.left.a -> chartrl.left.b"
        " -> chartrl.left.a",
        "chartrl/left/b.py:1 imports chartrl.left.a: part of the circle of modules chartrl.left.b -> chartrl.left.a"
        " -> chartrl.left.b",
    ]


def test_a_private_name_taken_from_another_module_is_named(tmp_path):
    files = {
        "base.py": "def _own():\n    pass\n",
        "left/__init__.py": "",
        "left/a.py": "from chartrl.base import _own\n",
        "left/b.py": "from chartrl import base\nimport chartrl.base as other\n\nbase._own()\nother._own\n",
        "right/__init__.py": "",
        "right/r.py": "import chartrl.base\n\nchartrl.base._own()\n",
    }
    assert tiny_problems(tmp_path, files) == [
        "chartrl/left/a.py:1 takes the private name _own of chartrl.base",
        "chartrl/left/b.py:4 takes the private name _own of chartrl.base",
        "chartrl/left/b.py:5 takes the private name _own of chartrl.base",
        "chartrl/right/r.py:3 takes the private name _own of chartrl.base",
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


def test_a_module_without_a_floor_and_a_floor_without_its_module_are_named(tmp_path):
    package = tiny_tree(tmp_path, {"left/__init__.py": "", "left/a.py": "", "left/c.py": "", "right/__init__.py": ""})
    assert missing_modules(package, {"left": _floors("a b")}) == [
        "chartrl/left/c.py has no floor in MODULE_FLOORS",
        "MODULE_FLOORS['left'] names b, which is not a module",
        "package 'right' has no module floors; give it some in MODULE_FLOORS",
    ]


def test_allowed_exceptions_pass_until_they_are_gone(tmp_path):
    package = tiny_tree(tmp_path, {"base.py": "from chartrl.top import x\n", "top.py": ""})
    allowed = {("base.py", "chartrl.top"), ("top.py", "chartrl.base")}
    assert problems(imports(package), floors=TINY_FLOORS, only_imported_by={}, allowed=allowed) == [
        "chartrl/top.py no longer imports chartrl.base: remove it from ALLOWED"
    ]


# ---------------------------------------------------------------------------------------------------------------
# What the CLI, the workflow and the config layer load (docs/development.md, "Imports").
# ---------------------------------------------------------------------------------------------------------------

HEAVY = (
    "torch", "torchvision", "transformers", "peft", "verl", "vllm", "ray", "mlflow", "matplotlib", "plotly",
    "datasets", "hydra", "omegaconf", "openai", "scipy", "snakemake",
)  # fmt: skip
"""Libraries imported only inside the functions that use them: each costs a tenth of a second or more to import,
or brings the GPU stack."""


def test_the_cli_and_the_workflow_load_no_heavy_library():
    """Every command module (the CLI's parser) and chartrl.workflow, as a `snakemake -n` imports them: none of the
    heavy libraries is loaded."""
    script = (
        "import json, sys\n"
        "import chartrl.cli, chartrl.workflow\n"
        "chartrl.cli.build_parser()\n"
        "chartrl.workflow.command_module('train')\n"
        f"print(json.dumps(sorted(name for name in {HEAVY!r} if name in sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout) == [], "import these inside the functions that use them (docs/development.md)"


def test_the_config_layer_imports_no_heavy_library_even_in_a_function():
    found = []
    for path in sorted((SRC / "config").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            found += [f"chartrl/config/{path.name}:{node.lineno} imports {n}" for n in names if top_level(n) in HEAVY]
    assert found == []


def test_the_rules_import_chartrl_through_its_workflow_module_alone():
    """The rules run every job through the chartrl CLI and read what they plan with from chartrl.workflow."""
    repo = SRC.parents[1]
    imports = [
        f"{path.relative_to(repo)}: {line.strip()}"
        for path in [repo / "Snakefile", *sorted((repo / "rules").rglob("*.smk"))]
        for line in path.read_text().splitlines()
        if re.match(r"\s*(from|import)\s+chartrl\b", line)
    ]
    assert [line.split(": ", 1)[1].split("  #")[0] for line in imports] == ["from chartrl import workflow as chartrl"]
