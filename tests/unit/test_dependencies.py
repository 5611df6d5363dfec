"""What the package declares is what the code imports, and the two locks agree with it.

A daemon user installs ``finality-watcher[daemon]`` without Stripe, RQ, Celery or the
PostgreSQL driver. So every third-party module guard/, chains/ and watcher/ import must be a
declared dependency of the base or the ``[daemon]`` extra (not only something web3 happens to
bring today); another extra's package may be imported only by that extra's own modules (their
file names spell it: ``stripe_source.py``, ``otel_tracing.py``); and importing any module must
never load one of those (an adapter is loaded by its kind, when a ``[[sources]]`` table uses
it), unless the import is optional (in a ``try`` that catches ImportError). Files are parsed,
not imported: for the first rule every import counts, in functions and under ``TYPE_CHECKING``
too; for the last one, what runs at import time. ``pyproject.toml`` declares ranges (the slim
base's imports are checked at run time by tests/unit/test_slim_install.py); the locked version
of each satisfies its range, or a constrained install fails; the dev tools are pinned exactly.
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from tests.support.source_tree import parsed

ROOT = Path(__file__).resolve().parents[2]
OWN = frozenset({"guard", "chains", "watcher"})
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]


def canonical(name: str) -> str:
    """A distribution name as PEP 503 compares it (``Eth_Utils`` is ``eth-utils``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


SELF = canonical(PROJECT["name"])


def requirement(spec: str) -> tuple[str, SpecifierSet]:
    """(canonical name, version range) of a requirement."""
    parsed = Requirement(spec)
    return canonical(parsed.name), parsed.specifier


def declared(specs: list[str]) -> dict[str, SpecifierSet]:
    """An extra's own requirements (``finality-watcher[daemon]`` inside another extra is the
    daemon's, checked there)."""
    return {name: spec for name, spec in map(requirement, specs) if name != SELF}


BASE = declared(PROJECT["dependencies"])
EXTRAS = {extra: declared(specs) for extra, specs in PROJECT["optional-dependencies"].items()}
CORE = {**BASE, **EXTRAS["daemon"]}
"""What every module of the package may import: the slim base and the daemon."""


def lock(name: str) -> dict[str, str]:
    """The pins (exact versions) of one lock file (comments skipped)."""
    lines = (ROOT / name).read_text().splitlines()
    pins = (line.split("==") for line in lines if line.strip() and not line.startswith("#"))
    return {canonical(name): version.strip() for name, version in pins}


def top_level_imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, top-level module) of every absolute import in one file."""
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split(".")[0]


def source_files() -> list[Path]:
    return sorted(p for top in sorted(OWN) for p in (ROOT / top).rglob("*.py"))


def extras_of(path: Path) -> set[str]:
    """The extras a file belongs to: those its name spells (``stripe_source.py`` → stripe)."""
    words = set(path.stem.split("_"))
    return {extra for extra in EXTRAS if extra in words}


def test_every_third_party_import_is_declared_where_it_is_used() -> None:
    distributions = importlib.metadata.packages_distributions()
    problems: list[str] = []
    for path in source_files():
        allowed = dict(CORE)
        for extra in extras_of(path):
            allowed.update(EXTRAS[extra])
        for line, module in top_level_imports(path):
            if module in OWN or module in sys.stdlib_module_names or module == "__future__":
                continue
            names = {canonical(d) for d in distributions.get(module, [])}
            where = f"{path.relative_to(ROOT)}:{line}"
            if not names:
                problems.append(f"{where}: {module!r} is installed by no distribution")
            elif not names & allowed.keys():
                owners = sorted(x for x, deps in EXTRAS.items() if names & deps.keys())
                problems.append(
                    f"{where}: imports {module!r} ({', '.join(sorted(names))}), "
                    + (
                        f"which only the extra(s) {owners} declare"
                        if owners
                        else "not a declared dependency"
                    )
                )
    assert not problems, "\n".join(problems)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


OPTIONAL = frozenset({"ImportError", "ModuleNotFoundError"})
"""A ``try`` catching one of these makes its imports optional: absent, the module goes on."""


def import_time_nodes(path: Path) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that run when ``path`` is imported: in the module and class
    bodies and their ``if``/``try``/``with`` blocks; not in functions (they run when called),
    not under ``if TYPE_CHECKING:`` (never at run time)."""

    def walk(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                yield node
            elif isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    yield from walk(node.body)
                yield from walk(node.orelse)
            elif isinstance(node, ast.Try):
                optional = any(
                    h.type is not None and ast.unparse(h.type) in OPTIONAL for h in node.handlers
                )
                for block in ([] if optional else node.body, node.orelse, node.finalbody):
                    yield from walk(block)
                for handler in node.handlers:
                    yield from walk(handler.body)
            elif isinstance(node, ast.With | ast.ClassDef):
                yield from walk(node.body)

    yield from walk(parsed(path).body)


def loaded_names(path: Path) -> Iterator[str]:
    """Every module importing ``path`` may load (``from a import b``: a and a.b; relative
    imports resolved)."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path.parent)
    for node in import_time_nodes(path):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            parts = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*parts, *([base] if base else [])])
        yield base
        yield from (f"{base}.{alias.name}" for alias in node.names)


def with_parents(name: str) -> Iterator[str]:
    """``a.b.c`` loads a, a.b and a.b.c (each package's ``__init__`` runs)."""
    parts = name.split(".")
    yield from (".".join(parts[: i + 1]) for i in range(len(parts)))


def extra_only(module: str, distributions: Mapping[str, list[str]]) -> bool:
    """Whether third-party ``module`` comes only from an extra (not from a core dependency)."""
    names = {canonical(d) for d in distributions.get(module, [])}
    return bool(names) and not names & CORE.keys()


def test_the_core_never_loads_an_extras_package() -> None:
    """Importing any core module never imports an extra's package, directly or through our own
    modules: an extra's adapter is loaded by its kind when a ``[[sources]]`` table uses it
    (its entry point, or an import inside a function). Else an EVM-only install fails on
    ``import stripe`` just by starting the API."""
    distributions = importlib.metadata.packages_distributions()
    files = {module_name(p): p for p in source_files()}
    loads = {
        name: {m for n in loaded_names(path) for m in with_parents(n)}
        for name, path in files.items()
    }
    edges = {name: modules & files.keys() for name, modules in loads.items()}
    needs = {
        name: sorted({m for m in modules if "." not in m and extra_only(m, distributions)} - OWN)
        for name, modules in loads.items()
    }
    problems: list[str] = []
    for start, path in files.items():
        if extras_of(path):
            continue  # an extra's own adapter: it may need its extra
        chain: dict[str, str | None] = {start: None}
        todo = [start]
        while todo:
            current = todo.pop()
            if needs[current]:
                hops = [current]
                while (prev := chain[hops[-1]]) is not None:
                    hops.append(prev)
                problems.append(f"{' -> '.join(reversed(hops))} imports {needs[current]}")
                break
            for nxt in sorted(edges[current] - chain.keys()):
                chain[nxt] = current
                todo.append(nxt)
    assert not problems, "\n".join(problems)


def test_the_extras_keep_celery_stripe_and_the_postgres_driver_out_of_the_core() -> None:
    assert {"daemon", "stripe", "rq", "celery", "postgres", "mcp", "otel", "dev"} <= EXTRAS.keys()
    for heavy in ("stripe", "rq", "celery", "redis", "kombu", "psycopg", "pytest", "mypy"):
        assert heavy not in CORE, f"{heavy} is a core dependency; it belongs in an extra"
    assert {"web3", "eth-account", "eth-hash", "sqlalchemy", "fastapi"} <= EXTRAS["daemon"].keys()
    assert not {"web3", "sqlalchemy", "fastapi", "uvicorn"} & BASE.keys()


def test_every_locked_version_is_in_its_range_and_the_locks_do_not_overlap() -> None:
    runtime, dev = lock("requirements.lock"), lock("requirements-dev.lock")
    assert not runtime.keys() & dev.keys(), "a package is pinned in both locks"
    for group, ranges in [("dependencies", BASE), *EXTRAS.items()]:
        where = runtime | dev if group == "dev" else runtime
        for name, spec in ranges.items():
            locked = where.get(name)
            assert locked is not None, f"{group}: {name} is in no lock"
            assert spec.contains(locked, prereleases=True), (
                f"{group}: {name}{spec} excludes the locked {locked}"
            )
            if group == "dev":
                assert str(spec) == f"=={locked}", f"dev: {name}{spec}: pin the tools exactly"


def test_metadata_names_its_license_and_readme() -> None:
    assert PROJECT["license"] == "Apache-2.0"
    assert PROJECT["license-files"] == ["LICENSE"]
    assert "Apache License" in (ROOT / "LICENSE").read_text()[:200]
    assert (ROOT / PROJECT["readme"]).is_file()


WITHOUT_STRIPE = """
import runpy, sys
sys.modules["stripe"] = None  # as in an install without the stripe extra: import fails
sys.argv = ["finality", "run", "--config", sys.argv[1]]
runpy.run_module("watcher.cli", run_name="__main__")
"""


def test_a_source_whose_extra_is_missing_is_a_config_error_naming_it_and_no_secret(
    tmp_path: Path,
) -> None:
    """``finality run`` with a Stripe table but no ``stripe`` package: exit 78 and one line
    that names the extra; the API key from the environment is not printed."""
    config = tmp_path / "finality.toml"
    config.write_text(
        f'[store]\nurl = "sqlite:///{tmp_path}/f.db"\n'
        '[[chains]]\nname = "local"\nchain_id = 31337\nrpc = ["http://127.0.0.1:9"]\n'
        '[[sources]]\nname = "pay"\nkind = "stripe_payment_intent"\n'
        'api_key = "${FW_TEST_STRIPE_KEY}"\n'
    )
    secret = "sk_live_" + "k3y" * 8
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_STRIPE, str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "FW_TEST_STRIPE_KEY": secret},
    )
    assert done.returncode == 78, done.stderr
    assert "sources[0].kind: kind stripe_payment_intent cannot be loaded" in done.stderr
    assert "extra" in done.stderr and "Traceback" not in done.stderr
    assert secret[:10] not in done.stderr + done.stdout
