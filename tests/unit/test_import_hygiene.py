"""guard/ is the pure core: it imports only a few stdlib modules and itself.

No network, no database, no logging, no environment, no clock, no randomness: those live in
chains/ and watcher/, which may import guard/, never the other way round. Every ``.py`` file
under guard/ is parsed (not imported) and each import checked against an allow-list, so a
forbidden import is caught even in code that never runs, including imports inside functions
and ``if TYPE_CHECKING:`` blocks.
"""

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.source_tree import parsed

GUARD = Path(__file__).resolve().parents[2] / "guard"

ALLOWED_STDLIB = frozenset(
    {
        "__future__",
        "abc",
        "base64",
        "collections",
        "collections.abc",
        "dataclasses",
        "decimal",
        "enum",
        "functools",
        "hashlib",
        "hmac",
        "itertools",
        "json",
        "math",
        "re",
        "typing",
    }
)
"""Exact module names guard/ may import (a parent does not allow its children)."""

ALLOWED_COMPUTATION = frozenset(
    {
        "sha3",  # keccak256 (safe-pysha3, C)
        "coincurve",  # secp256k1 public key recovery (ecrecover), libsecp256k1
        "py_arkworks_bls12381",  # BLS12-381 of sync-committee signatures (guard/consensus/bls.py)
    }
)
"""Pure computation libraries guard/ may use for receipt verification: no I/O, no clock."""

FORBIDDEN = frozenset(
    {
        "chains",
        "watcher",
        "web3",
        "eth_account",
        "sqlalchemy",
        "alembic",
        "apscheduler",
        "fastapi",
        "httpx",
        "requests",
        "logging",
        "os",
        "sys",
        "subprocess",
        "socket",
        "time",
        "datetime",
        "random",
        "secrets",
        "uuid",
        "threading",
        "asyncio",
    }
)
"""Top-level packages that must never appear, whatever the allow-list says."""


def guard_files() -> list[Path]:
    return sorted(GUARD.rglob("*.py"))


def imported_modules(tree: ast.Module, path: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) for every import statement in ``tree``."""
    package = ".".join(path.relative_to(GUARD.parent).with_suffix("").parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the file's own package
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            if module:
                yield node.lineno, module
            else:  # ``from .. import watcher`` out of the top package names top-level modules
                for alias in node.names:
                    yield node.lineno, alias.name


def dynamic_imports(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Calls that import by name at run time (``__import__``, ``importlib.import_module``)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in {"__import__", "exec", "eval"}:
            yield node.lineno, func.id
        elif isinstance(func, ast.Attribute) and func.attr == "import_module":
            yield node.lineno, "import_module"


def is_allowed(module: str) -> bool:
    top = module.split(".")[0]
    if top in FORBIDDEN:
        return False
    return module in ALLOWED_STDLIB or module in ALLOWED_COMPUTATION or top == "guard"


def test_there_are_guard_files() -> None:
    names = {path.name for path in guard_files()}
    assert {"types.py", "errors.py", "canonical.py", "settlement.py"} <= names


@pytest.mark.parametrize("path", guard_files(), ids=lambda p: str(p.relative_to(GUARD.parent)))
def test_guard_imports_only_the_stdlib_allow_list(path: Path) -> None:
    tree = parsed(path)
    where = path.relative_to(GUARD.parent)
    bad = [
        (line, f"imports {module!r}")
        for line, module in imported_modules(tree, path)
        if not is_allowed(module)
    ]
    bad += [
        (line, f"calls {how}() (dynamic import or code)") for line, how in dynamic_imports(tree)
    ]
    report = [f"{where}:{line}: {what}" for line, what in sorted(bad)]
    assert not report, "guard/ must stay pure:\n" + "\n".join(report)


# --- the checker itself -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "module"),
    [
        ("import os", "os"),
        ("import os.path", "os.path"),
        ("from os import environ", "os"),
        ("import logging as log", "logging"),
        ("from datetime import datetime", "datetime"),
        ("import time", "time"),
        ("import random", "random"),
        ("import socket", "socket"),
        ("from web3 import Web3", "web3"),
        ("import sqlalchemy", "sqlalchemy"),
        ("from chains.rpc import Client", "chains.rpc"),
        ("import watcher.store", "watcher.store"),
        ("import typing_extensions", "typing_extensions"),
        ("def f():\n    import os", "os"),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import watcher", "watcher"),
    ],
)
def test_checker_catches_forbidden_imports(source: str, module: str) -> None:
    path = GUARD / "example.py"
    found = [m for _, m in imported_modules(ast.parse(source), path) if not is_allowed(m)]
    assert found == [module]


@pytest.mark.parametrize(
    "source",
    [
        "from __future__ import annotations",
        "import hashlib, hmac, json, re",
        "from collections.abc import Mapping",
        "from typing import NewType",
        "from guard.errors import InvalidHash",
        "import guard.canonical",
        "from . import errors",
        "from .errors import InvalidHash",
    ],
)
def test_checker_accepts_allowed_imports(source: str) -> None:
    path = GUARD / "example.py"
    assert all(is_allowed(m) for _, m in imported_modules(ast.parse(source), path))


def test_checker_resolves_relative_imports_out_of_guard() -> None:
    path = GUARD / "example.py"
    modules = [m for _, m in imported_modules(ast.parse("from .. import watcher"), path)]
    assert modules == ["watcher"]
    assert not is_allowed("watcher")
    nested = GUARD / "proofs" / "mpt.py"
    modules = [m for _, m in imported_modules(ast.parse("from ..canonical import x"), nested)]
    assert modules == ["guard.canonical"]


def test_checker_catches_dynamic_imports() -> None:
    tree = ast.parse("import importlib\nimportlib.import_module('os')\n__import__('time')")
    assert [how for _, how in dynamic_imports(tree)] == ["import_module", "__import__"]
