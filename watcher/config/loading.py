"""Reading a config file: TOML, ``${NAME}`` from the environment, then validation.

Every ``${NAME}`` inside a string value is replaced by ``os.environ[NAME]``; an unset one
is an error naming the key and the variable, and error messages show the template, never
the secret it expanded to.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

from pydantic import ValidationError

from watcher.config.base import Loc, key
from watcher.config.errors import ConfigError, describe
from watcher.config.model import Config

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def load_config(path: str | Path) -> Config:
    """Read, expand and validate the TOML file at ``path``; :class:`ConfigError` if unusable."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(source, [f"cannot read config file: {exc.strerror or exc}"]) from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(source, [f"not UTF-8 text: {exc}"]) from exc
    return parse_config(text, source)


def parse_config(text: str, source: str = "<string>") -> Config:
    """Validate a TOML document; ``source`` names it in error messages."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, [f"invalid TOML: {exc}"]) from exc
    templates: dict[Loc, str] = {}
    missing: list[str] = []
    expanded = _expand(raw, (), templates, missing)
    if missing:
        raise ConfigError(source, missing)
    try:
        return Config.model_validate(expanded)
    except ValidationError as exc:
        raise ConfigError(source, describe(exc, templates, Config)) from exc


def _expand(value: object, loc: Loc, templates: dict[Loc, str], missing: list[str]) -> object:
    """Replace ``${NAME}`` in every string below ``value``; record templates and unset names."""
    if isinstance(value, dict):
        return {k: _expand(v, (*loc, k), templates, missing) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, (*loc, i), templates, missing) for i, v in enumerate(value)]
    if not isinstance(value, str) or not _ENV_REF.search(value):
        return value
    templates[loc] = value

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in os.environ:
            missing.append(f"{key(loc)}: environment variable {name} is not set")
            return ""
        return os.environ[name]

    return _ENV_REF.sub(substitute, value)
