"""What every config model shares: strictness, and problems reported at their keys.

A model validator that finds several problems raises :class:`KeyedErrors`, so each one is
shown at its own key (``chains[0].quorum: ...``) instead of one message at the table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict

Loc = tuple[str | int, ...]
"""A key path below the document root: ``("chains", 0, "rpc", 1)``."""

NAME = re.compile(r"[a-z0-9_-]+")
"""A chain's (and a source's) name: lower-case letters, digits, _ and -."""


class KeyedErrors(ValueError):
    """Raised by a model validator to report problems at keys below the model."""

    def __init__(self, problems: Sequence[tuple[Loc, str]]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(f"{key(loc)}: {msg}" for loc, msg in self.problems))


class Strict(BaseModel):
    """Base of every config model: unknown keys and loose types are errors; values frozen."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    def _fill(self, name: str, value: object) -> None:
        """Set a defaulted field during validation (the model is frozen afterwards)."""
        self.__dict__[name] = value


def key(loc: Iterable[str | int]) -> str:
    """``("chains", 0, "rpc", 1)`` → ``"chains[0].rpc[1]"``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out or "(top level)"


def duplicates(
    table: str, field: str, what: str, values: Sequence[object]
) -> list[tuple[Loc, str]]:
    """One problem per value already seen at a lower index of ``table`` (strings quoted)."""
    first: dict[object, int] = {}
    problems: list[tuple[Loc, str]] = []
    for i, value in enumerate(values):
        if value in first:
            shown = repr(value) if isinstance(value, str) else str(value)
            problems.append(
                (
                    (table, i, field),
                    f"duplicate {what} {shown} (also {table}[{first[value]}].{field})",
                )
            )
        first.setdefault(value, i)
    return problems
