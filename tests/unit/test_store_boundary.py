"""The store has a real boundary: nothing in watcher/ outside watcher/store/ (and the
migrations it runs) imports the database libraries, so no other part can query a table
or catch a driver's exception: database errors leave the store as watcher.store.errors
types (watcher/store/db.py). Imports inside functions and under TYPE_CHECKING count."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.source_tree import parsed

WATCHER = Path(__file__).resolve().parents[2] / "watcher"
DATABASE_LIBRARIES = ("sqlalchemy", "alembic", "psycopg", "sqlite3")
INSIDE = ("store", "migrations")


def _imported(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def test_no_module_outside_the_store_imports_a_database_library() -> None:
    bad = []
    for path in sorted(WATCHER.rglob("*.py")):
        if path.relative_to(WATCHER).parts[0] in INSIDE:
            continue
        for line, module in _imported(parsed(path)):
            if module.split(".")[0] in DATABASE_LIBRARIES:
                bad.append(f"watcher/{path.relative_to(WATCHER)}:{line} imports {module}")
    assert not bad, "only watcher/store/ talks to the database:\n" + "\n".join(bad)


def test_the_scan_sees_function_and_type_checking_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from sqlalchemy.engine import Engine\n"
        "def f():\n    import psycopg\n"
    )
    assert [m for _, m in _imported(ast.parse(source))] == [
        "typing",
        "sqlalchemy.engine",
        "psycopg",
    ]
