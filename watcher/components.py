"""Parts of the daemon that run beside the chain pollers (receipts, delivery, sources...).

Each part implements :class:`Component`; :func:`build_components` lists them. The service
starts them after the pollers, calls ``after_poll(chain)`` after every poll job of a chain
(in the poll thread, so per-chain work is never concurrent with itself), and stops them
before the store closes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from watcher.service import Service


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


def build_components(service: Service) -> list[Component]:
    """The components of a daemon, in start order."""
    from watcher import endpoint_alerts, heads, receipts
    from watcher.delivery import sender as delivery
    from watcher.sources import poller

    issuers = receipts.components(service)
    senders = delivery.components(service)
    for issuer in issuers:
        for sender in senders:
            # A commit waiting for its receipt goes as soon as the receipt is stored.
            issuer.on_issued = sender.wake.set
    built: list[Component] = [*issuers, *senders]
    return [
        *built,
        *poller.components(service, built),
        *heads.components(service),
        *endpoint_alerts.components(service),
    ]
