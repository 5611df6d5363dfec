"""Which adapter serves which settlement kind: every kind is an entry point.

A third party adds a source without forking: a package declares, in its ``pyproject.toml``::

    [project.entry-points."finality_watcher.sources"]
    my_kind = "my_package.my_module:MySource"

where ``MySource(config: SourceConfig)`` returns a :class:`guard.source.SettlementSource`
(the entry point's name is the kind, at most 32 lower-case characters). Its settings come
from the ``options`` table of its ``[[sources]]`` entry, or from its own keys when the
factory declares a ``settings_model`` (a subclass of
:class:`watcher.config.sources.SourceConfig`). The built-in kinds are declared the same way
in this project's ``pyproject.toml``; a plugin cannot replace one (the built-in wins and the
plugin is ignored with a warning: :mod:`watcher.config.source_kinds`), so installing a
package never silently changes how payments are judged.

Adapters are imported only when used: a daemon without a Celery source never imports Celery.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from guard.source import SettlementSource
from watcher.config import source_kinds
from watcher.config.source_kinds import ENTRY_POINT_GROUP, EVM_KIND, known_kinds
from watcher.config.sources import SourceConfig

__all__ = [
    "ENTRY_POINT_GROUP",
    "EVM_KIND",
    "SourceFactory",
    "UnknownSourceKind",
    "build_source",
    "factory",
    "known_kinds",
]

SourceFactory = Callable[[SourceConfig], SettlementSource]
"""Builds the adapter of one ``[[sources]]`` table."""


class UnknownSourceKind(LookupError):
    """No built-in and no installed plugin serves this kind."""

    def __init__(self, kind: str, known: list[str]) -> None:
        super().__init__(f"unknown source kind {kind!r}; known: {', '.join(known)}")
        self.kind = kind
        self.known = known


def factory(kind: str) -> SourceFactory:
    """The factory of ``kind``; raises :class:`UnknownSourceKind`."""
    found = source_kinds.load_factory(kind) if kind != EVM_KIND else None
    if found is None:
        raise UnknownSourceKind(kind, [k for k in known_kinds() if k != EVM_KIND])
    return cast(SourceFactory, found)


def build_source(config: SourceConfig) -> SettlementSource:
    """The adapter for one ``[[sources]]`` table (no I/O: connections open on first use)."""
    source = factory(config.kind)(config)
    if source.kind != config.kind or source.name != config.name:
        raise TypeError(
            f"source factory for {config.kind!r} built a {source.kind!r} source named "
            f"{source.name!r}; expected kind {config.kind!r} and name {config.name!r}"
        )
    return source
