"""Which adapter serves which settlement kind: the built-ins, and plugins by entry point.

A third party adds a source without forking: a package declares, in its ``pyproject.toml``::

    [project.entry-points."finality_watcher.sources"]
    my_kind = "my_package.my_module:MySource"

where ``MySource(config: SourceConfig)`` returns a :class:`guard.source.SettlementSource`
(the entry point's name is the kind, at most 32 lower-case characters). Its settings come
from the ``options`` table of its ``[[sources]]`` entry. A plugin cannot replace a built-in
kind: the built-in wins and the plugin is ignored with a warning, so installing a package
never silently changes how payments are judged.

Built-ins are imported only when used: a daemon without a Celery source never imports Celery.
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, cast

from guard.source import SettlementSource

if TYPE_CHECKING:
    from watcher.config import SourceConfig

log = logging.getLogger("finality.sources")

ENTRY_POINT_GROUP = "finality_watcher.sources"
"""The entry point group plugins register under."""

EVM_KIND = "evm_tx"
"""The chain kind: served by :mod:`watcher.sources.evm_source`, configured as ``[[chains]]``."""

BUILTIN: dict[str, str] = {
    "stripe_payment_intent": "watcher.sources.stripe_source:StripeSource",
    "rq_job": "watcher.sources.rq_source:RqSource",
    "celery_task": "watcher.sources.celery_source:CelerySource",
}
"""Built-in kinds and the ``module:attribute`` of their factories."""

SourceFactory = Callable[["SourceConfig"], SettlementSource]
"""Builds the adapter of one ``[[sources]]`` table."""

_KIND = re.compile(r"[a-z][a-z0-9_]{0,31}")


class UnknownSourceKind(LookupError):
    """No built-in and no installed plugin serves this kind."""

    def __init__(self, kind: str, known: list[str]) -> None:
        super().__init__(f"unknown source kind {kind!r}; known: {', '.join(known)}")
        self.kind = kind
        self.known = known


def _plugins() -> dict[str, str]:
    """Installed plugin kinds → entry point value (built-in names and bad names skipped)."""
    found: dict[str, str] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in BUILTIN or ep.name == EVM_KIND:
            log.warning(
                "source plugin %s (%s) ignored: %r is a built-in kind", ep.name, ep.value, ep.name
            )
        elif not _KIND.fullmatch(ep.name):
            log.warning(
                "source plugin %r (%s) ignored: a kind is 1..32 of a-z, 0-9 and _, "
                "starting with a letter",
                ep.name,
                ep.value,
            )
        else:
            found[ep.name] = ep.value
    return found


def known_kinds() -> list[str]:
    """Every kind this installation can watch, sorted (``evm_tx`` included)."""
    return sorted({EVM_KIND, *BUILTIN, *_plugins()})


def factory(kind: str) -> SourceFactory:
    """The factory of ``kind``; raises :class:`UnknownSourceKind`."""
    if kind in BUILTIN:
        module, _, attr = BUILTIN[kind].partition(":")
        return cast(SourceFactory, getattr(importlib.import_module(module), attr))
    for ep in entry_points(group=ENTRY_POINT_GROUP, name=kind):
        if kind != EVM_KIND and _KIND.fullmatch(kind):
            return cast(SourceFactory, ep.load())
    raise UnknownSourceKind(kind, [k for k in known_kinds() if k != EVM_KIND])


def build_source(config: SourceConfig) -> SettlementSource:
    """The adapter for one ``[[sources]]`` table (no I/O: connections open on first use)."""
    source = factory(config.kind)(config)
    if source.kind != config.kind or source.name != config.name:
        raise TypeError(
            f"source factory for {config.kind!r} built a {source.kind!r} source named "
            f"{source.name!r}; expected kind {config.kind!r} and name {config.name!r}"
        )
    return source
