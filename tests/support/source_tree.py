"""The project's own source files, parsed once per test process.

The house-rule tests (layering, house rules, dependencies, the front's layout, the store's
boundary, guard's import allow-list) each walk the syntax tree of every module; a pytest
worker that runs several of them parses each file once. The trees are only read, never
changed, so sharing them changes no test's view of the code.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path


@functools.cache
def parsed(path: Path) -> ast.Module:
    """The syntax tree of the Python file at ``path`` (read as UTF-8)."""
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
