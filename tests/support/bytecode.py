"""Compile the project and the tests once, before pytest-xdist starts its workers.

On a fresh clone nothing is compiled yet: every worker starts at the same moment and each
compiles the whole project, ``tests/support`` and (through pytest's assertion rewrite) every
test module again, at about 20 s of CPU each (collection costs 40 s of CPU cold, 19 s warm,
measured on this 2-core machine). The controller does it once here instead, and the workers,
their daemon zygotes and every fresh ``finality`` interpreter then read the same files.

It also writes the rewritten bytecode of the plugin modules the controller imported before
``tests/conftest.py`` could lift ``PYTHONDONTWRITEBYTECODE`` (schemathesis' ~250 modules
among them): the workers import them too.

The rewritten files are pytest's own (``_pytest.assertion.rewrite``'s private helpers, the
same calls its import hook makes). If a pytest release moves them, nothing is compiled here
and each worker compiles for itself, as it did before: slower, never wrong.
"""

from __future__ import annotations

import compileall
import re
import sys
from pathlib import Path

import pytest

PROJECT = ("guard", "chains", "watcher", "tests", "bench")
"""The directories (under the root) every worker imports from."""

REWRITTEN = re.compile(r"(^|/)(test_[^/]*|conftest)\.py$")
"""The files pytest compiles through its assertion rewrite, not the plain import system
(``python_files`` is pytest's default, ``test_*.py``)."""


def warm(config: pytest.Config, root: Path) -> None:
    """Compile what every worker would: the plain modules of :data:`PROJECT`, the rewritten
    test modules and conftests, and the rewritten plugin modules already imported."""
    if sys.dont_write_bytecode:
        return
    for name in PROJECT:
        where = root / name
        if where.is_dir():
            # Test modules are compiled by the rewrite below: their plain bytecode is never read.
            compileall.compile_dir(where, quiet=1, rx=REWRITTEN, workers=1)
    try:
        from _pytest.assertion.rewrite import AssertionRewritingHook
    except ImportError:
        return
    hook = next((h for h in sys.meta_path if isinstance(h, AssertionRewritingHook)), None)
    if hook is None:  # --assert=plain: nothing is rewritten
        return
    tests = [p for p in (root / "tests").rglob("*.py") if REWRITTEN.search(p.as_posix())]
    specs = [getattr(m, "__spec__", None) for m in list(sys.modules.values())]
    imported = [Path(str(s.origin)) for s in specs if s is not None and s.loader is hook]
    for path in tests + imported:
        _rewrite(config, path)


def _rewrite(config: pytest.Config, path: Path) -> None:
    """Write ``path``'s rewritten bytecode where pytest's import hook looks, unless a
    current one is there (its source hash matches)."""
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
        cache_dir = rewrite.get_cache_dir(path)
        pyc = cache_dir / (path.name[:-3] + rewrite.PYC_TAIL)
        if _current(path, pyc):
            return
        if not rewrite.try_makedirs(cache_dir):
            return
        source_hash, code = rewrite._rewrite_test(path, config)
        rewrite._write_pyc(state, code, source_hash, pyc)
    except (ImportError, AttributeError, KeyError, OSError, SyntaxError):
        return


def _current(source: Path, pyc: Path) -> bool:
    """A rewritten file is there for this very source: its header (magic number, checked-hash
    flags, source hash: PEP 552, as pytest writes it) matches. Only the header is read: the
    hook unmarshals the rest when it imports."""
    import importlib.util

    try:
        with pyc.open("rb") as f:
            header = f.read(16)
    except OSError:
        return False
    expected = importlib.util.MAGIC_NUMBER + b"\x03\x00\x00\x00"
    return header == expected + importlib.util.source_hash(source.read_bytes())[:8]
