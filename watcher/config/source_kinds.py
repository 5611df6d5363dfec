"""Which source kinds exist and which settings model validates each: entry points only.

Every kind, built-in or third-party, is an entry point of the group ``finality_watcher.sources``
(``kind = "package.module:Factory"``); this package's own kinds are declared in its
``pyproject.toml`` exactly as a plugin declares its own. A factory may carry a
``settings_model`` attribute, a subclass of :class:`watcher.config.sources.SourceConfig`
with the kind's keys; without one, the kind reads its settings from ``options``. So config/
names no adapter, and an adapter's module is imported only when a table uses its kind (or
to explain an unknown key).

A plugin cannot replace a built-in kind: the built-in wins and the plugin is ignored with a
warning, so installing a package never silently changes how payments are judged.
"""

from __future__ import annotations

import logging
import re
from importlib.metadata import EntryPoint, entry_points

log = logging.getLogger("finality.sources")

ENTRY_POINT_GROUP = "finality_watcher.sources"
"""The entry point group every source kind registers under."""

BUILTIN_DISTRIBUTION = "finality-watcher"
"""The distribution whose entry points are the built-in kinds."""

EVM_KIND = "evm_tx"
"""The chain kind: served by :mod:`watcher.sources.evm_source`, configured as ``[[chains]]``."""

_KIND = re.compile(r"[a-z][a-z0-9_]{0,31}")


def _distribution(ep: EntryPoint) -> str:
    name = ep.dist.name if ep.dist is not None else ""
    return re.sub(r"[-_.]+", "-", name).lower()


def builtin_entry_points() -> dict[str, EntryPoint]:
    """The built-in kinds → their entry points."""
    return {
        ep.name: ep
        for ep in entry_points(group=ENTRY_POINT_GROUP)
        if _distribution(ep) == BUILTIN_DISTRIBUTION and ep.name != EVM_KIND
    }


def kind_entry_points() -> dict[str, EntryPoint]:
    """Every usable kind → its entry point (built-ins first; bad or clashing plugins skipped
    with a warning)."""
    found = builtin_entry_points()
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if _distribution(ep) == BUILTIN_DISTRIBUTION:
            continue
        if ep.name in found or ep.name == EVM_KIND:
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
            found.setdefault(ep.name, ep)
    return found


def known_kinds() -> list[str]:
    """Every kind this installation can watch, sorted (``evm_tx`` included)."""
    return sorted({EVM_KIND, *kind_entry_points()})


def load_factory(kind: str) -> object | None:
    """``kind``'s factory (None: no such kind); ImportError if its module cannot be imported
    (e.g. a missing extra)."""
    ep = kind_entry_points().get(kind)
    return None if ep is None else ep.load()


def builtin_factories(skip: str) -> list[tuple[str, object]]:
    """Every built-in kind but ``skip`` with its factory, sorted; kinds whose module cannot be
    imported are left out. Imports the adapters: for explaining an error only."""
    found: list[tuple[str, object]] = []
    for kind, ep in sorted(builtin_entry_points().items()):
        if kind != skip:
            try:
                found.append((kind, ep.load()))
            except ImportError:
                continue
    return found
