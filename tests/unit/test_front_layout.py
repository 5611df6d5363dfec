"""The shape of the HTTP API and the CLI: routers and command groups stand alone.

Parsed, not imported (every ``import`` counts, inside functions too): a router module of
watcher/api/ (one that defines ``router``) imports no other router and nothing imports a
router but watcher/api/server.py; a command group of watcher/cli/ imports no other group;
and no module of either package imports a private (``_name``) from another module.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.source_tree import parsed

ROOT = Path(__file__).resolve().parents[2]


def _modules(package: str) -> dict[str, ast.Module]:
    """Dotted name → parsed tree of every module of ``watcher/<package>/`` (subpackages too)."""
    base = ROOT / "watcher" / package
    found = {}
    for path in sorted(base.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = parsed(path)
    return found


def _imports(tree: ast.Module) -> list[tuple[str, str | None]]:
    """(module, name or None) of every import in ``tree``; ``from P import m`` of a
    submodule counts as an import of ``P.m``."""
    out: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out += [(node.module, alias.name) for alias in node.names]
    return out


def _targets(tree: ast.Module, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``tree`` imports."""
    hit = set()
    for module, name in _imports(tree):
        if name is not None and f"{module}.{name}" in known:
            hit.add(f"{module}.{name}")
        elif module in known:
            hit.add(module)
    return hit


def _defines(tree: ast.Module, function: str) -> bool:
    return any(isinstance(n, ast.FunctionDef) and n.name == function for n in tree.body)


def test_routers_import_no_other_router() -> None:
    api = _modules("api")
    routers = {name for name, tree in api.items() if _defines(tree, "router")}
    assert {"watcher.api.settlements", "watcher.api.chains", "watcher.api.health"} <= routers
    bad = [
        f"{name} imports {target}"
        for name, tree in api.items()
        for target in sorted(_targets(tree, routers))
        if name != "watcher.api.server" and target != name
    ]
    assert not bad, bad


def test_command_groups_import_no_other_group() -> None:
    cli = _modules("cli")
    groups = {name for name, tree in cli.items() if _defines(tree, "add_commands")}
    assert {"watcher.cli.daemon", "watcher.cli.settlements", "watcher.cli.receipts"} <= groups
    bad = [
        f"{name} imports {target}"
        for name, tree in cli.items()
        for target in sorted(_targets(tree, groups))
        if name != "watcher.cli.main" and target != name
    ]
    assert not bad, bad


def test_no_private_name_is_imported_across_modules() -> None:
    bad = [
        f"{name} imports {module}.{imported}"
        for package in ("api", "cli")
        for name, tree in _modules(package).items()
        for module, imported in _imports(tree)
        if module.startswith("watcher.") and imported is not None and imported.startswith("_")
    ]
    assert not bad, bad
