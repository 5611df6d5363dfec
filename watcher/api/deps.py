"""The narrow collaborators the HTTP API needs, filled once from the daemon's parts.

Routers receive an :class:`ApiDeps` and use only what it holds: the store, the clock, the
chain clients, each chain's published status (never its engine: watcher/app/status.py), the
components they answer about. Nothing here starts work: building the API registers no
background job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from watcher.app.status import ChainStatus, StatusBoard
from watcher.delivery.plan import OutboxPlan
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
    from watcher.handoff.manager import HandoffManager
    from watcher.sources.inbox import WebhookInbox
    from watcher.store import Store


@dataclass(frozen=True)
class ApiDeps:
    """Everything a route may use (see the module doc)."""

    config: Config
    store: Store
    clock: Clock
    clients: Mapping[str, RpcClient]
    live_clients: Mapping[str, RpcClient]
    """What live look-ups read through: never a client that spends the engine's budget."""
    budgets: Mapping[str, CallBudget]
    board: StatusBoard
    """Each chain's status as its last poll job published it."""
    pacing: Callable[[str], dict[str, object] | None]
    """How a chain's polls are paced to its blocks, None when they are not."""
    plan: OutboxPlan
    """The alert routes an event recorded by a route goes through."""
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

    def status(self, chain: str) -> ChainStatus:
        """The chain's published status."""
        return self.board.get(chain)

    def healthy(self, chain: str) -> bool:
        """Whether the chain polled successfully of late (a standby, whose chain another
        instance holds, counts as healthy: it is ready to take over)."""
        return self.board.get(chain).healthy(self.clock(), standby=not self.handoff.owns(chain))


def deps_of(service: Service) -> ApiDeps:
    """The API's collaborators taken from a built daemon."""
    components = list(service.components)
    return ApiDeps(
        config=service.config,
        store=service.store,
        clock=service.clock,
        clients=service.clients,
        live_clients=service.live_clients,
        budgets=service.budgets,
        board=service.board,
        pacing=service.pacing.report,
        plan=service.plan,
        handoff=service.handoff,
        receipts=next((c for c in components if isinstance(c, ReceiptIssuer)), None),
        senders=[c for c in components if isinstance(c, Sender)],
        sources=next((c for c in components if isinstance(c, SourcePoller)), None),
        heads=next((c for c in components if isinstance(c, HeadsWaker)), None),
        inbox=service.inbox,
        workflows=service.workflows,
    )
