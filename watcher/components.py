"""Parts of the daemon that run beside the chain pollers (receipts, delivery, sources...).

Each part implements :class:`Component`; :func:`watcher.app.build_components` lists them.
The daemon (watcher/app.py) starts them after the pollers, calls ``after_poll(chain)`` after every poll job of a chain
(in the poll thread, so per-chain work is never concurrent with itself), and stops them
before the store closes.
"""

from __future__ import annotations

from typing import Protocol


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
