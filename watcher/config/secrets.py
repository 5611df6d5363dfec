"""The configured values that must never be shown: every URL of the config (RPC and
WebSocket endpoints, alert webhooks, the store, the sources' endpoints) and every value of a
key that names a secret (``secret``, ``token``, ``password``, ``api_key``...).

The logging filter (``watcher/logs.py``) and the API's error texts scrub these out with
:func:`chains.redact.redact_text`: a transport's exception text embeds the URL it failed
on, and that URL carries the provider's key.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from watcher.config.model import Config

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
_SECRET_KEY = re.compile(r"secret|token|password|passwd|api_key|apikey|private", re.IGNORECASE)
MIN_SECRET = 6
"""Shortest non-URL secret value scrubbed (shorter ones would blank out ordinary words)."""


def configured_secrets(config: Config) -> list[str]:
    """Every URL in ``config`` (but SQLite file paths) and every secret-named value."""
    found: set[str] = set()
    _walk(config, "", found)
    return sorted(found)


def _walk(value: object, key: str, found: set[str]) -> None:
    """Collect below ``value`` (a model's own fields are read, not its dump: a source's
    settings model has keys its declared base type does not)."""
    if isinstance(value, BaseModel):
        _walk({**vars(value), **(value.model_extra or {})}, key, found)
    elif isinstance(value, dict):
        for k, v in value.items():
            _walk(v, str(k), found)
    elif isinstance(value, list | tuple):
        for v in value:
            _walk(v, key, found)
    elif isinstance(value, str) and _is_secret(key, value):
        found.add(value)


def _is_secret(key: str, value: str) -> bool:
    """A network URL (a SQLite path is not), or a secret-named key's value (not the name
    of the environment variable holding one)."""
    if _URL.match(value):
        return not value.lower().startswith("sqlite:")
    return bool(_SECRET_KEY.search(key)) and not key.endswith("_env") and len(value) >= MIN_SECRET
