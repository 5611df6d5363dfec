"""The narrow collaborators the HTTP API needs, filled once from the daemon's parts.

Routers receive an :class:`ApiDeps` and use only what it holds: the store, the clock, the
chain clients and watchers, the components they answer about. Nothing here starts work:
building the API registers no background job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from watcher.delivery.sender import Sender
from watcher.engine.heads import HeadsWaker
from watcher.receipts.component import ReceiptIssuer
from watcher.sources.poller import SourcePoller
from watcher.workflows.service import WorkflowService

if TYPE_CHECKING:
    from chains.budget import CallBudget
    from chains.rpc import RpcClient
    from watcher.app.daemon import App as Service
    from watcher.clock import Clock
    from watcher.config.model import Config
    from watcher.engine.chain_watcher import ChainWatcher
    from watcher.handoff.manager import HandoffManager
    from watcher.sources.inbox import WebhookInbox
    from watcher.store import Store


@dataclass(frozen=True)
class ChainState:
    """How one chain is doing, as the daemon sees it (``/healthz``, ``/v1/chains``)."""

    healthy: Callable[[str], bool]
    """Whether the chain polled successfully of late (a standby counts as healthy)."""
    last_error: Callable[[str], str | None]
    """The chain's last poll error, None after a success."""
    budget_status: Callable[[str], dict[str, object] | None]
    """The chain's call budget and spend, None without a budget."""
    pacing: Callable[[str], dict[str, object] | None]
    """How the chain's polls are paced to its blocks, None when they are not."""


@dataclass(frozen=True)
class ApiDeps:
    """Everything a route may use (see the module doc)."""

    config: Config
    store: Store
    clock: Clock
    clients: Mapping[str, RpcClient]
    live_clients: Mapping[str, RpcClient]
    """What live look-ups read through: never a client that spends the engine's budget."""
    watchers: Mapping[str, ChainWatcher]
    budgets: Mapping[str, CallBudget]
    chains: ChainState
    handoff: HandoffManager
    receipts: ReceiptIssuer | None
    """The receipts component (None: receipts are not issued by this daemon)."""
    senders: Sequence[Sender]
    """The delivery senders (woken when a dead delivery is replayed)."""
    sources: SourcePoller | None
    """The off-chain sources component (None without ``[[sources]]``)."""
    heads: HeadsWaker | None
    """The WebSocket new-heads component (None when every chain polls)."""
    inbox: WebhookInbox | None
    """The sources' webhook inbox (None without ``[[sources]]``)."""
    workflows: WorkflowService | None = None
    """Callers' workflows under the handoff guard (``/v1/workflows``)."""


def deps_of(service: Service) -> ApiDeps:
    """The API's collaborators taken from a built daemon."""
    components = list(service.components)
    return ApiDeps(
        config=service.config,
        store=service.store,
        clock=service.clock,
        clients=service.clients,
        live_clients=service.live_clients,
        watchers=service.watchers,
        budgets=service.budgets,
        chains=ChainState(
            healthy=service.healthy,
            last_error=lambda name: service.health[name].last_error,
            budget_status=service.budget_status,
            pacing=service.pacing.report,
        ),
        handoff=service.handoff,
        receipts=next((c for c in components if isinstance(c, ReceiptIssuer)), None),
        senders=[c for c in components if isinstance(c, Sender)],
        sources=next((c for c in components if isinstance(c, SourcePoller)), None),
        heads=next((c for c in components if isinstance(c, HeadsWaker)), None),
        inbox=service.inbox,
        workflows=service.workflows,
    )
