"""Why a configuration cannot be used, one line per problem, at the key that is wrong.

Errors::

    ConfigError(Exception)          the file is missing, unreadable, not TOML, or invalid;
                                    one line per problem: "FILE: KEY: what is wrong"
    UnknownChainName(LookupError)   Config.chain(name) for a name that is not configured

:func:`describe` turns pydantic's errors into those lines: a value that came from the
environment is shown as its ``${NAME}`` template, a URL's password as ``***``, and an
unknown key with the likely intended one.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from typing import Any, get_args

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from chains.redact import redact_url
from watcher.config.base import KeyedErrors, Loc, key


class ConfigError(Exception):
    """The configuration cannot be used; the message has one line per problem.

    Each line reads ``SOURCE: KEY: what is wrong`` (``KEY`` is a path such as
    ``chains[0].confirmations``), or ``SOURCE: what is wrong`` when no key is involved
    (a missing file, a TOML syntax error with its line).
    """

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.source = source
        """The file (or ``<string>``) the configuration came from."""
        self.problems: tuple[str, ...] = tuple(problems)
        """One entry per problem, without the source prefix."""
        super().__init__("\n".join(f"{source}: {p}" for p in self.problems))


class UnknownChainName(LookupError):
    """A chain name that is not in the configuration."""

    def __init__(self, name: str, known: Sequence[str]) -> None:
        self.name = name
        """The name asked for."""
        self.known: tuple[str, ...] = tuple(known)
        """The configured chain names."""
        listed = ", ".join(self.known) or "(none)"
        super().__init__(f"unknown chain {name!r}; configured chains: {listed}")


class NestedErrors(ValueError):
    """A table validated by a model chosen at run time (a source kind's settings): its
    errors, to be shown at their own keys below the table, with that model's key names."""

    def __init__(self, model: type[BaseModel], error: ValidationError, unknown: UnknownKey) -> None:
        super().__init__(str(error))
        self.model = model
        self.error = error
        self.unknown = unknown


UnknownKey = Callable[[str, type[BaseModel]], str | None]
"""Explains an unknown key of a run-time model (e.g. "is a setting of kind X"), or None."""

_FIXED = {
    "missing": "is required",
    "int_type": "must be an integer",
    "float_type": "must be a number",
    "finite_number": "must be a finite number",
    "string_type": "must be a string",
    "bool_type": "must be true or false",
    "list_type": "must be an array",
    "model_type": "must be a table",
    "dict_type": "must be a table",
}
_BOUNDS = {
    "greater_than_equal": ("must be >=", "ge"),
    "greater_than": ("must be >", "gt"),
    "less_than_equal": ("must be <=", "le"),
    "less_than": ("must be <", "lt"),
    "too_short": ("must have at least", "min_length"),
    "literal_error": ("must be one of", "expected"),
}
_UNSHOWN = ("missing", "extra_forbidden", "model_type", "dict_type")


def describe(
    exc: ValidationError, templates: dict[Loc, str], root: type[BaseModel], at: Loc = ()
) -> list[str]:
    """One ``KEY: what is wrong (got VALUE)`` line per pydantic error of a model ``root``
    validated at key path ``at``."""
    return _lines(exc.errors(), templates, root, at)


def _lines(
    errors: Sequence[ErrorDetails], templates: dict[Loc, str], root: type[BaseModel], at: Loc
) -> list[str]:
    lines: list[str] = []
    for error in errors:
        loc: Loc = at + tuple(error["loc"])
        ctx: dict[str, Any] = error.get("ctx") or {}
        cause = ctx.get("error")
        if isinstance(cause, KeyedErrors):
            lines.extend(f"{key(loc + sub)}: {msg}" for sub, msg in cause.problems)
            continue
        if isinstance(cause, NestedErrors):
            lines.extend(_nested(cause, templates, loc))
            continue
        message = _message(error["type"], loc, ctx, str(error["msg"]), root, at)
        if error["type"] not in _UNSHOWN:
            message += f" (got {_shown(loc, error.get('input'), templates)})"
        lines.append(f"{key(loc)}: {message}")
    return lines


def _nested(cause: NestedErrors, templates: dict[Loc, str], at: Loc) -> list[str]:
    lines: list[str] = []
    rest: list[ErrorDetails] = []
    for error in cause.error.errors():
        why = None
        if error["type"] == "extra_forbidden" and len(error["loc"]) == 1:
            why = cause.unknown(str(error["loc"][0]), cause.model)
        if why is None:
            rest.append(error)
        else:
            lines.append(f"{key(at + tuple(error['loc']))}: {why}")
    return lines + _lines(rest, templates, cause.model, at)


def _message(
    kind: str, loc: Loc, ctx: dict[str, Any], default: str, root: type[BaseModel], at: Loc
) -> str:
    if kind == "value_error" and ctx.get("error") is not None:
        return str(ctx["error"])
    if kind == "extra_forbidden":
        names = _field_names_at(root, loc[len(at) : -1])
        guess = difflib.get_close_matches(str(loc[-1]), names, n=1)
        return "unknown key" + (f" (did you mean {guess[0]!r}?)" if guess else "")
    if kind == "list_type" and loc == ("chains",):
        return "must be an array of tables: write [[chains]], not [chains]"
    if kind in _BOUNDS:
        text, name = _BOUNDS[kind]
        return f"{text} {ctx.get(name)}" + (" item(s)" if kind == "too_short" else "")
    return _FIXED.get(kind, default[:1].lower() + default[1:])


def _field_names_at(root: type[BaseModel], loc: Loc) -> list[str]:
    """The keys the model at ``loc`` (below ``root``) accepts (for "did you mean")."""
    tp: Any = root
    for part in loc:
        if isinstance(part, int):
            args = get_args(tp)
            tp = args[0] if args else None
        elif isinstance(tp, type) and issubclass(tp, BaseModel) and part in tp.model_fields:
            tp = tp.model_fields[part].annotation
        else:
            return []
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return list(tp.model_fields)
    return []


def _shown(loc: Loc, value: object, templates: dict[Loc, str]) -> str:
    """The offending value for an error line: templates stay unexpanded, passwords hidden."""
    if loc in templates:
        return f"{templates[loc]!r}, from the environment"
    if isinstance(value, str) and "://" in value:
        # A URL as chains/redact shows it: scheme, host and port; the path, query and
        # userinfo are where providers put keys (a mistyped scheme is still shown).
        value = redact_url(value)
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
