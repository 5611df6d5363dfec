"""Parts of the daemon that run beside the chain pollers (receipts, delivery, sources...).

Each part implements :class:`Component`; :func:`watcher.app.build.build` constructs them in
order and hands each one its narrow collaborators. The daemon (:mod:`watcher.app.daemon`)
starts them after the pollers, calls ``after_poll(chain)`` after every poll job of a chain
(in the poll thread, so per-chain work is never concurrent with itself), and stops them
before the store closes.

:class:`HasComponents` is all a lookup such as ``waker_of(app)`` needs of the built
daemon: its components, in start order. It lets the parts below the wiring point accept the
daemon without importing it (the wiring point sits above them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

T = TypeVar("T")


class Component(Protocol):
    """A part of the daemon with a life cycle."""

    def start(self) -> None:
        """Begin background work (threads), if any."""
        ...

    def after_poll(self, chain: str) -> None:
        """Called after each poll job of ``chain``; must not raise for expected failures."""
        ...

    def stop(self) -> None:
        """Finish or checkpoint in-flight work and stop; called once at shutdown."""
        ...


class HasComponents(Protocol):
    """The built daemon as its components see it: the list, in start order."""

    @property
    def components(self) -> Sequence[Component]: ...


def first_of(parts: HasComponents, kind: type[T]) -> T | None:
    """The first component of ``parts`` that is a ``kind``, if any."""
    return next((c for c in parts.components if isinstance(c, kind)), None)
