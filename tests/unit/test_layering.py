"""The shape of the code: no import cycle, imports only downwards, sizes that fit in a head.

Every ``.py`` file of guard/, chains/ and watcher/ is parsed (not imported) and every
``import`` statement in it counts, wherever it sits: at the top, inside a function, under
``if TYPE_CHECKING:``. A package's ``__init__.py`` is a module of its own (named after the
package), so ``from watcher.api import errors`` is an import of ``watcher.api.errors`` when
that is a submodule, and of ``watcher.api`` (its ``__init__``) otherwise: import submodules
by their full path and an ``__init__`` that re-exports them never closes a cycle.

The layers, lowest first (a module may import its own layer and the ones below):

* packages: ``guard`` ← ``chains`` ← ``watcher`` (guard/ imports neither, chains/ never
  watcher/; tests/unit/test_import_hygiene.py checks what else guard/ may import);
* inside watcher/: ``store`` (imports nothing of watcher/ but itself) ← ``config`` and
  the loose helper modules at the top of watcher/ (each may be imported by everything above
  store) ← ``engine``, ``delivery``, ``handoff``, ``receipts``, ``sources`` (the sources'
  poller decides and records as the chain engine does; config names no adapter) ← ``app``
  (the one wiring point) ← ``api``, ``cli``.

Sizes: no module over 400 lines, no class over 300, no function over 60 (decorators and
docstrings included), and at most 12 loose modules at the top of watcher/.

Parts meet through values and constructors, never through shared fields:

* no class in watcher/engine/ inherits from another project class (parts are composed; an
  error class may extend the project's error hierarchy);
* no module reads another object's private field (``x._y`` where ``x`` is not ``self`` or
  ``cls``; an alternate constructor's own fresh instance counts as its own), nor names a
  private field through ``getattr(..., "_y")``.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.source_tree import parsed

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("guard", "chains", "watcher")

PACKAGE_LAYER = {"guard": 0, "chains": 1, "watcher": 2}
"""guard ← chains ← watcher."""

WATCHER_LAYER = {
    "store": 0,
    "migrations": 0,  # Alembic's scripts: the store's schema history
    "config": 1,
    "sources": 2,
    "engine": 2,
    "delivery": 2,
    "handoff": 2,
    "receipts": 2,
    "workflows": 2,  # callers' workflows under the handoff guard: beside handoff
    "app": 3,
    "api": 4,
    "cli": 4,
    "mcp": 4,  # the MCP server: beside cli (cli's `mcp` command starts it)
    "client": 4,  # the library callers import: guard/ and the API's models only (docs/client.md)
}
"""The layer of each part of watcher/ (its first name under ``watcher.``)."""
LOOSE_LAYER = 1
"""A loose module at the top of watcher/ (logs, metrics, signer...): a helper beside config."""
PACKAGE_INIT_LAYER = 5
"""``watcher/__init__.py`` and ``watcher/__main__.py`` sit above everything: nothing imports
them (a submodule is imported by its full path)."""

MAX_MODULE_LINES = 400
MAX_CLASS_LINES = 300
MAX_FUNCTION_LINES = 60
MAX_LOOSE_WATCHER_MODULES = 12
MAX_CYCLES_SHOWN = 5
"""Cycles shown per group of modules that import one another (each through another one)."""


@dataclass(frozen=True)
class Module:
    """One parsed module."""

    name: str
    """Dotted name (a package's ``__init__.py`` is the package's name)."""
    path: Path
    is_package: bool
    tree: ast.Module


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` at ``line``."""

    source: str
    target: str
    line: int


def module_name(path: Path, root: Path) -> tuple[str, bool]:
    """(dotted name, is a package ``__init__``) of a file under ``root``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def load_modules(root: Path, packages: Iterable[str] = PACKAGES) -> dict[str, Module]:
    """Every module of ``packages`` under ``root``, parsed."""
    out: dict[str, Module] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            name, is_package = module_name(path, root)
            tree = parsed(path)
            out[name] = Module(name, path, is_package, tree)
    return out


def _absolute(module: Module, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    parts = package.split(".")
    base = parts[: len(parts) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports_of(module: Module, known: Mapping[str, Module]) -> Iterator[Edge]:
    """Every import of another known module, anywhere in ``module`` (functions and
    ``TYPE_CHECKING`` blocks included). ``import a.b.c`` imports ``a.b.c``;
    ``from a.b import c`` imports ``a.b.c`` when that is a module, else ``a.b``."""
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield Edge(module.name, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, node)
            for alias in node.names:
                sub = f"{base}.{alias.name}" if base else alias.name
                if sub in known:
                    yield Edge(module.name, sub, node.lineno)
                elif base in known:
                    yield Edge(module.name, base, node.lineno)


def import_graph(modules: Mapping[str, Module]) -> dict[str, list[Edge]]:
    """Each module's imports of the others (self-imports dropped, one edge per target)."""
    graph: dict[str, list[Edge]] = {}
    for name, module in modules.items():
        seen: dict[str, Edge] = {}
        for edge in imports_of(module, modules):
            if edge.target != name and edge.target not in seen:
                seen[edge.target] = edge
        graph[name] = sorted(seen.values(), key=lambda e: e.line)
    return graph


def tied_groups(graph: Mapping[str, list[Edge]], within: Iterable[str]) -> list[list[str]]:
    """The groups of modules among ``within`` that import one another, directly or not
    (strongly connected, more than one module; Tarjan's algorithm, iteratively)."""
    nodes = sorted(set(within))
    members = set(nodes)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for start in nodes:
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            targets = [e.target for e in graph.get(node, []) if e.target in members]
            if i < len(targets):
                work.append((node, i + 1))
                target = targets[i]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    group.append(top)
                    if top == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def cycles(graph: Mapping[str, list[Edge]], within: Iterable[str]) -> list[list[Edge]]:
    """One concrete cycle (a list of edges) per group of :func:`tied_groups`."""
    return [_cycle_in(graph, set(group), group[0]) for group in tied_groups(graph, within)]


def _cycle_in(graph: Mapping[str, list[Edge]], group: set[str], start: str) -> list[Edge]:
    """The shortest cycle through ``start`` inside ``group`` (breadth first)."""
    came: dict[str, Edge] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for edge in graph.get(node, []):
                if edge.target == start:
                    path = [edge]
                    while path[0].source != start:
                        path.insert(0, came[path[0].source])
                    return path
                if edge.target in group and edge.target not in came:
                    came[edge.target] = edge
                    following.append(edge.target)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # pragma: no cover


def describe(cycle: list[Edge], modules: Mapping[str, Module], root: Path) -> str:
    """One line per import of the cycle: where it is and what it imports."""
    steps = [
        f"  {modules[e.source].path.relative_to(root)}:{e.line} imports {e.target}" for e in cycle
    ]
    return f"import cycle of {len(cycle)} modules:\n" + "\n".join(steps)


def describe_group(
    group: list[str], graph: Mapping[str, list[Edge]], modules: Mapping[str, Module], root: Path
) -> str:
    """The group of modules tied together, and the shortest cycle through each of them."""
    members = set(group)
    seen: set[tuple[str, ...]] = set()
    parts = [f"{len(group)} modules import one another: {', '.join(group)}"]
    for start in group:
        cycle = _cycle_in(graph, members, start)
        key = tuple(sorted(e.source for e in cycle))
        if key not in seen:
            seen.add(key)
            parts.append(describe(cycle, modules, root))
        if len(seen) == MAX_CYCLES_SHOWN:
            parts.append("  (more cycles in this group not shown)")
            break
    return "\n".join(parts)


def layer_of(name: str) -> tuple[int, int | None]:
    """(package layer, layer inside watcher/ or None outside it) of a module."""
    parts = name.split(".")
    if parts[0] != "watcher":
        return PACKAGE_LAYER[parts[0]], None
    if len(parts) == 1 or parts[1] == "__main__":
        return PACKAGE_LAYER["watcher"], PACKAGE_INIT_LAYER
    return PACKAGE_LAYER["watcher"], WATCHER_LAYER.get(parts[1], LOOSE_LAYER)


WATCHER_LAYER_NAMES = {
    0: "store",
    1: "config, helpers",
    2: "engine, delivery, handoff, receipts, sources",
    3: "app",
    4: "api, cli",
    PACKAGE_INIT_LAYER: "the package itself",
}


def layer_label(name: str) -> str:
    """A layer in words, for messages."""
    inner = layer_of(name)[1]
    top = name.split(".")[0]
    return top if inner is None else f"{top} layer {inner}: {WATCHER_LAYER_NAMES[inner]}"


def part_of(name: str) -> str:
    """The part a module belongs to (``watcher.store``, ``chains``): a part may import
    itself whatever its layer."""
    parts = name.split(".")
    return ".".join(parts[:2]) if parts[0] == "watcher" and len(parts) > 1 else parts[0]


def layering_violations(
    graph: Mapping[str, list[Edge]],
    sources: Iterable[str],
    modules: Mapping[str, Module],
    root: Path,
) -> list[str]:
    """Each import, by a module of ``sources``, of a module of a higher layer."""
    out = []
    for name in sorted(sources):
        for edge in graph.get(name, []):
            if part_of(edge.target) == part_of(name):
                continue
            mine, theirs = layer_of(name), layer_of(edge.target)
            upward = theirs[0] > mine[0] or (
                theirs[0] == mine[0]
                and mine[1] is not None
                and theirs[1] is not None
                and theirs[1] > mine[1]
            )
            if upward:
                where = modules[name].path.relative_to(root)
                out.append(
                    f"{where}:{edge.line}: {name} ({layer_label(name)}) imports "
                    f"{edge.target} ({layer_label(edge.target)}), which is above it"
                )
    return out


def _span(node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines of a definition, from its first decorator to its last line."""
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return (node.end_lineno or node.lineno) - first + 1


def size_violations(modules: Iterable[Module], root: Path) -> list[str]:
    """Each module over 400 lines, class over 300, function over 60."""
    out = []
    for module in modules:
        where = module.path.relative_to(root)
        lines = len(module.path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            out.append(f"{where}: module of {lines} lines (at most {MAX_MODULE_LINES})")
        for node in ast.walk(module.tree):
            if isinstance(node, ast.ClassDef):
                limit, what = MAX_CLASS_LINES, "class"
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                limit, what = MAX_FUNCTION_LINES, "function"
            else:
                continue
            if _span(node) > limit:
                out.append(
                    f"{where}:{node.lineno}: {what} {node.name} of {_span(node)} lines "
                    f"(at most {limit})"
                )
    return out


def loose_modules(root: Path) -> list[str]:
    """The modules directly in watcher/ (``__init__`` and ``__main__`` are not loose)."""
    return sorted(
        p.name for p in (root / "watcher").glob("*.py") if p.stem not in {"__init__", "__main__"}
    )


# --- the tree as it is -------------------------------------------------------------------


@functools.cache
def modules() -> dict[str, Module]:
    """The project's modules, parsed on first use: not at import, which every pytest worker
    does while collecting (this file and test_app_wiring's), whichever runs the tests."""
    return load_modules(ROOT)


@functools.cache
def graph() -> dict[str, list[Edge]]:
    """The import graph of :func:`modules`, built on first use."""
    return import_graph(modules())


def names_in(*packages: str) -> list[str]:
    return [n for n in modules() if n.split(".")[0] in packages]


def test_every_package_is_parsed() -> None:
    assert {"guard.rlp", "chains.rpc", "chains.ws_transport", "watcher"} <= set(modules())
    assert modules()["guard"].is_package and not modules()["guard.rlp"].is_package


def cycle_report(packages: tuple[str, ...]) -> str:
    """Every tied group among ``packages``, described ("" when there is none)."""
    groups = tied_groups(graph(), names_in(*packages))
    return "\n\n".join(describe_group(g, graph(), modules(), ROOT) for g in groups)


def test_guard_and_chains_have_no_import_cycle() -> None:
    report = cycle_report(("guard", "chains"))
    assert not report, report


def test_guard_and_chains_import_only_downwards() -> None:
    bad = layering_violations(graph(), names_in("guard", "chains"), modules(), ROOT)
    assert not bad, "guard <- chains <- watcher:\n" + "\n".join(bad)


def test_guard_and_chains_fit_the_size_limits() -> None:
    bad = size_violations((modules()[n] for n in names_in("guard", "chains")), ROOT)
    assert not bad, "\n".join(bad)


def test_watcher_has_no_import_cycle() -> None:
    report = cycle_report(("watcher",))
    assert not report, report


def test_watcher_imports_only_downwards() -> None:
    bad = layering_violations(graph(), names_in("watcher"), modules(), ROOT)
    assert not bad, "inside watcher/: api, cli -> app -> engine, delivery, handoff, " + (
        "receipts, sources -> config, helpers -> store:\n" + "\n".join(bad)
    )


def test_watcher_fits_the_size_limits() -> None:
    bad = size_violations((modules()[n] for n in names_in("watcher")), ROOT)
    assert not bad, "\n".join(bad)


def test_watcher_has_at_most_a_dozen_loose_modules() -> None:
    loose = loose_modules(ROOT)
    assert len(loose) <= MAX_LOOSE_WATCHER_MODULES, (
        f"{len(loose)} loose modules at the top of watcher/ "
        f"(at most {MAX_LOOSE_WATCHER_MODULES}): {', '.join(loose)}"
    )


ERROR_BASE_MODULES = ("errors", "exceptions")
"""A project base from a module of one of these names is an error hierarchy: extending it
is how errors are specified, not a mixin."""

THIRD_PARTY_PRIVATE = {
    "_mapping": "SQLAlchemy's Row: its documented mapping view",
    "_actions": "argparse: no public list of a parser's arguments (shell completion)",
    "_choices_actions": "argparse: no public list of sub-commands (shell completion)",
}
"""Underscored names that are other libraries' interfaces, not a project object's field."""


def project_base_violations(modules: Iterable[Module], root: Path) -> list[str]:
    """Classes whose base is a project class (defined in the module or imported from
    guard/, chains/, watcher/), other than an error hierarchy."""
    out: list[str] = []
    for module in modules:
        local = {n.name for n in ast.walk(module.tree) if isinstance(n, ast.ClassDef)}
        imported: dict[str, str] = {}
        for node in ast.walk(module.tree):
            if (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and (node.module or "").split(".")[0] in PACKAGES
            ):
                for alias in node.names:
                    imported[alias.asname or alias.name] = node.module or ""
        for node in ast.walk(module.tree):
            if not isinstance(node, ast.ClassDef):
                continue
            for base in node.bases:
                name = base.id if isinstance(base, ast.Name) else None
                if name is None:
                    continue
                source = imported.get(name)
                if source is not None and source.rsplit(".", 1)[-1] in ERROR_BASE_MODULES:
                    continue
                if source is not None or name in local:
                    where = module.path.relative_to(root)
                    out.append(f"{where}:{node.lineno}: class {node.name}({name})")
    return out


def _own_instances(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names an alternate constructor binds to a fresh instance of its own class
    (``x = cls(...)`` or ``x = cls.__new__(cls)``)."""
    own: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            made_by_cls = (isinstance(func, ast.Name) and func.id == "cls") or (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "cls"
            )
            if made_by_cls:
                own |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return own


def private_read_violations(modules: Iterable[Module], root: Path) -> list[str]:
    """``x._y`` where ``x`` is neither ``self``/``cls``, an own fresh instance, nor an
    imported module; and ``getattr(x, "_y")`` anywhere."""
    out: list[str] = []
    for module in modules:
        where = module.path.relative_to(root)
        module_names = {
            (a.asname or a.name).split(".")[0]
            for n in ast.walk(module.tree)
            if isinstance(n, ast.Import)
            for a in n.names
        }
        own: set[str] = set()
        for node in ast.walk(module.tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                own |= _own_instances(node)
        allowed = {"self", "cls"} | own | module_names
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Attribute):
                name = node.attr
                if not name.startswith("_") or name.startswith("__"):
                    continue
                if name in THIRD_PARTY_PRIVATE:
                    continue
                if isinstance(node.value, ast.Name) and node.value.id in allowed:
                    continue
                out.append(f"{where}:{node.lineno}: reads {ast.unparse(node)}")
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in {"getattr", "hasattr", "setattr"}
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and str(node.args[1].value).startswith("_")
                and not str(node.args[1].value).startswith("__")
            ):
                out.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return out


def test_engine_classes_are_composed_not_inherited() -> None:
    bad = project_base_violations(
        (modules()[n] for n in names_in("watcher") if n.startswith("watcher.engine.")), ROOT
    )
    assert not bad, "compose the engine's parts; no project base class:\n" + "\n".join(bad)


def test_no_module_reads_another_objects_private_field() -> None:
    bad = private_read_violations((modules()[n] for n in names_in(*PACKAGES)), ROOT)
    assert not bad, "pass it as a value or make it public:\n" + "\n".join(bad)


# --- the checker itself, on trees written here ----------------------------------------------


def write_tree(root: Path, files: Mapping[str, str]) -> dict[str, Module]:
    """Write ``files`` (path -> source) under ``root`` and parse them."""
    for rel, source in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    return load_modules(root)


def cycle_names(modules: Mapping[str, Module]) -> list[list[str]]:
    return [[e.source for e in c] for c in cycles(import_graph(modules), modules)]


@pytest.mark.parametrize(
    "importer",
    [
        "from chains.b import x",
        "import chains.b",
        "from chains import b",
        "from . import b",
        "from .b import x",
        "def f() -> None:\n    from chains.b import x",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from chains.b import X",
    ],
)
def test_checker_finds_a_cycle_however_the_import_is_written(tmp_path: Path, importer: str) -> None:
    modules = write_tree(
        tmp_path,
        {"chains/__init__.py": "", "chains/a.py": importer, "chains/b.py": "import chains.a"},
    )
    assert cycle_names(modules) == [["chains.a", "chains.b"]]


def test_checker_counts_a_package_init_as_a_module(tmp_path: Path) -> None:
    """``from pkg import name`` (not a submodule) imports the ``__init__``: a cycle when the
    ``__init__`` imports the module back; a submodule by its full path does not."""
    tree = {
        "watcher/__init__.py": "",
        "watcher/api/__init__.py": "from watcher.api.routes import router\n",
        "watcher/api/errors.py": "",
        "watcher/api/routes.py": "from watcher.api import errors\nrouter = 1\n",
    }
    assert cycle_names(write_tree(tmp_path / "ok", tree)) == []
    tree["watcher/api/routes.py"] = "from watcher.api import ApiError\n"
    found = cycle_names(write_tree(tmp_path / "bad", tree))
    assert found == [["watcher.api", "watcher.api.routes"]]


def test_checker_names_every_step_of_a_longer_cycle(tmp_path: Path) -> None:
    modules = write_tree(
        tmp_path,
        {
            "chains/__init__.py": "",
            "chains/a.py": "import chains.b",
            "chains/b.py": "\n\nimport chains.c",
            "chains/c.py": "import chains.a",
            "chains/d.py": "import chains.a",
        },
    )
    (cycle,) = cycles(import_graph(modules), modules)
    text = describe(cycle, modules, tmp_path)
    assert text.splitlines() == [
        "import cycle of 3 modules:",
        "  chains/a.py:1 imports chains.b",
        "  chains/b.py:3 imports chains.c",
        "  chains/c.py:1 imports chains.a",
    ]


@pytest.mark.parametrize(
    ("importer", "imported", "upward"),
    [
        ("guard/a.py", "chains.x", True),
        ("guard/a.py", "watcher.store.x", True),
        ("chains/a.py", "watcher.config.x", True),
        ("chains/a.py", "guard.x", False),
        ("watcher/store/a.py", "watcher.config.x", True),
        ("watcher/store/a.py", "watcher.logs", True),
        ("watcher/store/a.py", "chains.x", False),
        ("watcher/config/a.py", "watcher.store.x", False),
        ("watcher/config/a.py", "watcher.sources.x", True),
        ("watcher/engine/a.py", "watcher.delivery.x", False),
        ("watcher/engine/a.py", "watcher.app", True),
        ("watcher/engine/a.py", "watcher.api.x", True),
        ("watcher/app.py", "watcher.engine.x", False),
        ("watcher/app.py", "watcher.cli.x", True),
        ("watcher/api/a.py", "watcher.app", False),
        ("watcher/api/a.py", "watcher.cli.x", False),
        ("watcher/logs.py", "watcher.engine.x", True),
        ("watcher/engine/a.py", "watcher.logs", False),
        ("watcher/store/a.py", "watcher", True),
    ],
)
def test_checker_knows_the_layers(
    tmp_path: Path, importer: str, imported: str, upward: bool
) -> None:
    target = imported.replace(".", "/") + ".py"
    files = {importer: f"import {imported}\n", target: ""}
    if imported == "watcher":
        files = {importer: "import watcher\n", "watcher/__init__.py": ""}
    modules = write_tree(tmp_path, files)
    source = module_name(tmp_path / importer, tmp_path)[0]
    bad = layering_violations(import_graph(modules), [source], modules, tmp_path)
    assert bool(bad) == upward, bad


def test_checker_measures_modules_classes_and_functions(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(60))
    long_class = "class Big:\n" + "\n".join(f"    y{i} = {i}" for i in range(300))
    modules = write_tree(
        tmp_path,
        {
            "guard/ok.py": f"def f() -> None:\n{chr(10).join(body.splitlines()[:59])}\n",
            "guard/fn.py": f"@staticmethod\ndef g() -> None:\n{body}\n",
            "guard/cls.py": long_class + "\n",
            "guard/mod.py": "\n" * 401,
        },
    )
    bad = size_violations(modules.values(), tmp_path)
    assert sorted(b.split(":")[0] for b in bad) == ["guard/cls.py", "guard/fn.py", "guard/mod.py"]
    assert any("function g of 62 lines" in b for b in bad)


def test_checker_finds_project_bases_but_not_error_hierarchies(tmp_path: Path) -> None:
    modules = write_tree(
        tmp_path,
        {
            "watcher/engine/parts.py": (
                "from watcher.engine.state import Shared\n"
                "from chains.errors import ChainError\n"
                "from typing import Protocol\n"
                "class Local: ...\n"
                "class Mixed(Shared): ...\n"
                "class Again(Local): ...\n"
                "class Fails(ChainError): ...\n"
                "class Shape(Protocol): ...\n"
            ),
        },
    )
    bad = project_base_violations(modules.values(), tmp_path)
    assert [b.split(": ", 1)[1] for b in bad] == ["class Mixed(Shared)", "class Again(Local)"]


def test_checker_finds_private_reads_of_other_objects(tmp_path: Path) -> None:
    modules = write_tree(
        tmp_path,
        {
            "watcher/engine/reads.py": (
                "import argparse\n"
                "class Box:\n"
                "    def __init__(self) -> None:\n"
                "        self._inner = 1\n"
                "    @classmethod\n"
                "    def made(cls) -> 'Box':\n"
                "        box = cls.__new__(cls)\n"
                "        box._inner = 2\n"
                "        return box\n"
                "    def peek(self, other: 'Box') -> int:\n"
                "        return other._inner + self._inner\n"
                "def scratch(w: object) -> object:\n"
                "    return getattr(w, '_reorged', None), argparse._SubParsersAction\n"
            ),
        },
    )
    bad = private_read_violations(modules.values(), tmp_path)
    assert sorted(b.split(": ", 1)[1] for b in bad) == [
        "getattr(w, '_reorged', None)",
        "reads other._inner",
    ]


# --- the API reads chains through their published status --------------------------------

ENGINE_OBJECTS = ("watcher.engine.chain_watcher", "watcher.engine.state", "watcher.app.chains")
"""The modules that define a chain's engine or the runner holding the engines: the API reads
a chain through its published snapshot (watcher/app/status.py), never through these."""


def engine_reaches(modules: Mapping[str, Module], graph: Mapping[str, list[Edge]]) -> list[str]:
    """Each place in watcher/api that imports an engine object's module or reads an
    attribute named ``watchers`` (the daemon's engines by chain)."""
    out = []
    for name in sorted(n for n in modules if n.startswith("watcher.api")):
        where = modules[name].path
        for edge in graph.get(name, []):
            if edge.target in ENGINE_OBJECTS:
                out.append(f"{where.name}:{edge.line}: imports {edge.target}")
        for node in ast.walk(modules[name].tree):
            if isinstance(node, ast.Attribute) and node.attr == "watchers":
                out.append(f"{where.name}:{node.lineno}: reads .watchers")
    return out


def test_api_reads_chains_from_their_status_never_from_an_engine() -> None:
    bad = engine_reaches(modules(), graph())
    assert not bad, "watcher/api reads the status board (watcher/app/status.py):\n" + "\n".join(bad)


def test_checker_finds_an_engine_reached_from_the_api(tmp_path: Path) -> None:
    modules = write_tree(
        tmp_path,
        {
            "watcher/engine/chain_watcher.py": "class ChainWatcher: ...\n",
            "watcher/app/status.py": "",
            "watcher/api/ok.py": "from watcher.app import status\n",
            "watcher/api/typed.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from watcher.engine.chain_watcher import ChainWatcher\n"
            ),
            "watcher/api/reads.py": "def f(deps):\n    return deps.watchers['x'].head\n",
        },
    )
    bad = engine_reaches(modules, import_graph(modules))
    assert bad == [
        "reads.py:2: reads .watchers",
        "typed.py:3: imports watcher.engine.chain_watcher",
    ]
