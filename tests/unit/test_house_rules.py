"""House rules a reviewer would otherwise have to remember, checked on the tree as it is.

* Comments and docs say what and why, never a tracker number: a reference to a numbered
  issue means nothing to a reader of the code (the tracker is not shipped with it), so every
  source, script, configuration and documentation file is searched for one.
* A verdict is named through :class:`guard.settlement.Verdict`, never spelled as a bare
  string: the set of verdicts is defined once, and a typo in a bare string compares unequal
  without a word. Allowed only where the strings *are* the definition (the enum itself, and
  the API model's ``Literal``, which tests/unit/test_vocabulary.py holds equal to it).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from guard.settlement import Verdict
from tests.support.source_tree import parsed

ROOT = Path(__file__).resolve().parents[2]

TRACKER_REFERENCE = re.compile(r"\b[Ii]ssues? #?[0-9]+|\([Ii]ssue #?[0-9]+|\(#[0-9]+\)")
"""``issue 14``, ``Issue #7``, ``issues 5 and 13``, ``(#12)``."""

SEARCHED = ("guard", "chains", "watcher", "tests", "bench", "docs", "scripts", "config", ".ci")
"""The folders of code, scripts, configuration and documentation."""

TOP_FILES = ("README.md", "Makefile", "pyproject.toml")

TEXT_SUFFIXES = {".py", ".md", ".toml", ".sh", ".txt", ".cfg", ".ini", ".yml", ".yaml"}
TEXT_SUFFIXES |= {".js", ".html", ".css", ".ts", ".json"}

NOT_OURS = ("tests/vectors/", "tests/artifacts/", "node_modules/", "__pycache__/")
"""Third parties' test data (kept byte for byte as published) and generated files."""

VERDICT_DEFINITIONS = {"guard/settlement.py", "watcher/api/models/settlements.py"}
"""The modules where the verdict strings are the definition itself."""


def searched_files(root: Path) -> Iterator[Path]:
    """Every text file of code, scripts, configuration and docs under ``root``."""
    for name in TOP_FILES:
        if (root / name).is_file():
            yield root / name
    for folder in SEARCHED:
        for path in sorted((root / folder).rglob("*")):
            rel = path.relative_to(root).as_posix()
            if not path.is_file() or any(part in rel for part in NOT_OURS):
                continue
            if path.suffix in TEXT_SUFFIXES or path.name == "Makefile":
                yield path


def tracker_references(root: Path, skip: Iterable[str] = ()) -> list[str]:
    """``path:line: text`` of each tracker reference in the files under ``root``."""
    out = []
    for path in searched_files(root):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(tuple(skip)):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if TRACKER_REFERENCE.search(line):
                out.append(f"{rel}:{number}: {line.strip()}")
    return out


def _docstrings(tree: ast.Module) -> set[int]:
    """Ids of the string constants that are documentation (module, class, function and
    attribute docstrings: a bare string expression)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def bare_verdicts(root: Path, skip: Iterable[str] = ()) -> list[str]:
    """``path:line: "VERDICT"`` of each verdict spelled as a string in Python code (not in
    documentation) of guard/, chains/, watcher/ and bench/ under ``root``."""
    names = {v.value for v in Verdict}
    out: list[str] = []
    for package in ("guard", "chains", "watcher", "bench"):
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel in VERDICT_DEFINITIONS or rel.startswith(tuple(skip)):
                continue
            tree = parsed(path)
            docs = _docstrings(tree)
            out.extend(
                f'{rel}:{node.lineno}: "{node.value}"'
                for node in ast.walk(tree)
                if isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value in names
                and id(node) not in docs
            )
    return out


SELF = "tests/unit/test_house_rules.py"
"""This file: its examples of what the checker finds are the pattern itself."""


def test_no_tracker_number_in_code_or_docs() -> None:
    found = tracker_references(ROOT, skip=(SELF,))
    assert not found, "say what and why instead of a tracker number:\n" + "\n".join(found)


def test_no_verdict_spelled_as_a_bare_string() -> None:
    found = bare_verdicts(ROOT)
    assert not found, "use guard.settlement.Verdict:\n" + "\n".join(found)


# --- the checkers themselves, on trees written here -----------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "# cheaper this way (issue 14)",
        '"""Issue 10, item 4: keys were sorted by code point."""',
        "the same figures as in issues 5 and 13",
        "see Issue #7",
        "fixed upstream (#1234)",
    ],
)
def test_the_checker_finds_a_tracker_reference(tmp_path: Path, line: str) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text(f"Intro.\n\n{line}\n", encoding="utf-8")
    assert tracker_references(tmp_path) == [f"docs/page.md:3: {line}"]


def test_the_checker_passes_words_that_only_look_alike(tmp_path: Path) -> None:
    (tmp_path / "watcher").mkdir()
    source = "issued_at = 3  # the issuer; tissue 5; see issue one; reissue 2\n"
    (tmp_path / "watcher" / "x.py").write_text(source, encoding="utf-8")
    (tmp_path / "tests" / "vectors").mkdir(parents=True)
    (tmp_path / "tests" / "vectors" / "README.md").write_text("issue 3\n", encoding="utf-8")
    (tmp_path / "watcher" / "engine").mkdir()
    (tmp_path / "watcher" / "engine" / "y.py").write_text("# issue 9\n", encoding="utf-8")
    assert tracker_references(tmp_path, skip=("watcher/engine/",)) == []
    assert tracker_references(tmp_path) == ["watcher/engine/y.py:1: # issue 9"]


def test_the_checker_finds_a_bare_verdict_but_not_in_documentation(tmp_path: Path) -> None:
    (tmp_path / "watcher").mkdir()
    source = (
        '"""A view is FINALITY_CONFIRMED once final."""\n'
        "def f(v: str) -> bool:\n"
        '    """True for ``SETTLEMENT_FAILED``."""\n'
        '    return v == "SETTLEMENT_FAILED"\n'
    )
    (tmp_path / "watcher" / "x.py").write_text(source, encoding="utf-8")
    assert bare_verdicts(tmp_path) == ['watcher/x.py:4: "SETTLEMENT_FAILED"']
