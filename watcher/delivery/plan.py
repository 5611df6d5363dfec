"""Which deliveries a change produces, written inside the engine's store transaction.

This is the "outbox" half of exactly-once: the engine calls an :class:`OutboxPlan` in the
same transaction that stores a verdict or an event, so the row that will tell the caller
exists if and only if the change it reports does. Nothing here does I/O besides writing
rows through the transaction; sending is :mod:`watcher.delivery.sender`'s job.

What is enqueued, and under which ``Idempotency-Key`` (stable: derived from stored ids):

- ``commit`` on ``FINALITY_CONFIRMED``, ``discard`` on ``SETTLEMENT_FAILED`` or
  ``TIMEOUT_TREATED_AS_FAILURE``, to the settlement's ``commit_url``; keys
  ``fw:<settlement>:commit`` / ``fw:<settlement>:discard``. Their body is assembled later,
  by the sender, once the signed receipt exists (the receipts part signs after the verdict
  commits). A confirmation reversed by a reorg before its commit went out cancels it; a
  new confirmation revives the same row (same key).
- ``finality_violation`` to the ``commit_url`` when a confirmation is reversed after its
  commit was sent (or while it is being sent): key ``fw:<settlement>:violation:<event id>``
  (the id of the ``finality_violation`` event). Its body, too, is assembled by the sender,
  once the signed ``receipt_revocation`` exists. The sent commit row is kept, renamed
  ``fw:<settlement>:commit~<event id>``, so that a new confirmation enqueues a new commit
  row under ``fw:<settlement>:commit``, ordered after the violation (the receiver dedupes
  it if it applied the first). A reversal straight to a failure enqueues the ``discard``
  (a reversal records no lifecycle event, so :meth:`on_verdict` is not called for it).
- ``provisional`` updates, only for settlements registered with ``"provisional": true``:
  inclusion and each new depth (``fw:<settlement>:p:<block hash>:<depth>``), and being
  reorged out (``fw:<settlement>:p:reorg:<reorg id>``). Each body says ``provisional: true``.
- Alerts to each configured ``webhook`` / ``slack`` channel that wants the event's kind and
  severity (``fw:ev:<event id>:<channel>``). Event ids are unique per store, so keys are too.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from guard.event_kinds import EventKind
from guard.settlement import Verdict
from watcher.config.sections import AlertChannelConfig
from watcher.delivery.channel import EventBody
from watcher.delivery.channels import channel as channel_named
from watcher.delivery.format import EVENT_KINDS, SEVERITY_RANK, provisional_body
from watcher.settlements import depth_of
from watcher.store import BlockTxn, SettlementRecord
from watcher.store.outbox_store import (
    COMMIT_CHANNEL,
    DELIVERED,
    SENDING,
    NewDelivery,
    retire_commit,
)
from watcher.store.refs import SettlementRef

log = logging.getLogger("finality.delivery")

TERMINAL_KIND: dict[str, str] = {
    Verdict.FINALITY_CONFIRMED: "commit",
    Verdict.SETTLEMENT_FAILED: "discard",
    Verdict.TIMEOUT_TREATED_AS_FAILURE: "discard",
}
"""Which delivery a terminal verdict produces."""

VIOLATION = EventKind.FINALITY_VIOLATION
"""Kind of the commit-channel row telling a receiver that a commit it got was reversed."""


def commit_key(settlement_id: str) -> str:
    """The Idempotency-Key of a settlement's commit (the same for every confirmation)."""
    return f"fw:{settlement_id}:commit"


def violation_key(settlement_id: str, event_id: int) -> str:
    """The Idempotency-Key of the violation reported by event ``event_id``."""
    return f"fw:{settlement_id}:violation:{event_id}"


@dataclass(frozen=True)
class AlertRoute:
    """One remote alert channel (``webhook``, ``slack``...) and what it wants."""

    channel: str
    """The channel's name (:mod:`watcher.delivery.channels`): ``webhook``, ``slack``..."""
    url: str
    """Where alerts are POSTed."""
    events: frozenset[str] | None
    """Event kinds sent; None for all."""
    min_severity: str
    """Lowest severity sent."""

    @property
    def body(self) -> EventBody:
        """How this channel turns an event into the body it POSTs."""
        spec = channel_named(self.channel)
        if spec is None or spec.body is None:
            raise ValueError(f"{self.channel!r} is not a remote alert channel")
        return spec.body

    @property
    def key(self) -> str:
        """A short stable name of the channel (part of idempotency keys)."""
        return hashlib.sha256(f"{self.channel}|{self.url}".encode()).hexdigest()[:12]

    def wants(self, kind: str, severity: str) -> bool:
        """Whether an event of ``kind`` and ``severity`` goes to this channel."""
        if self.events is not None and kind not in self.events:
            return False
        return SEVERITY_RANK.get(severity, 0) >= SEVERITY_RANK[self.min_severity]


def routes_from_config(alerts: Sequence[AlertChannelConfig]) -> list[AlertRoute]:
    """The remote channels of ``[[alerts]]`` (local ones, ``log``, are not outbox rows).

    A webhook or slack channel without ``url`` is skipped with an error in the log, and an
    unknown event kind draws a warning: the daemon still starts, and says what it ignores.
    """
    routes = []
    for i, channel in enumerate(alerts):
        events = None if "*" in channel.events else frozenset(channel.events)
        for kind in sorted(events or ()):
            if kind not in EVENT_KINDS:
                log.warning(
                    "alerts[%d].events: unknown event kind %r (known: %s)",
                    i,
                    kind,
                    ", ".join(EVENT_KINDS),
                )
        spec = channel_named(channel.type)
        if spec is None:
            log.error("alerts[%d]: unknown channel type %r; channel ignored", i, channel.type)
            continue
        if not spec.remote:
            continue
        if not channel.url or not channel.url.startswith(("http://", "https://")):
            log.error(
                'alerts[%d]: a %s channel needs url = "http(s)://..."; channel ignored',
                i,
                channel.type,
            )
            continue
        routes.append(AlertRoute(channel.type, channel.url, events, channel.min_severity))
    return routes


class OutboxPlan:
    """Turns verdicts, progress and events into outbox rows, inside the caller's txn."""

    def __init__(self, routes: Iterable[AlertRoute] = ()) -> None:
        self.routes = tuple(routes)

    # -- alerts --------------------------------------------------------------------------

    def on_event(
        self,
        txn: BlockTxn,
        event_id: int,
        kind: str,
        severity: str,
        payload: dict[str, Any],
        settlement_id: str | None,
    ) -> None:
        """Enqueue the event for every remote channel that wants it."""
        if not self.routes:
            return
        event = {
            "id": event_id,
            "chain": txn.chain,
            "settlement_id": settlement_id,
            "kind": kind,
            "severity": severity,
            "payload": payload,
            "created_at": txn.now,
        }
        for route in self.routes:
            if not route.wants(kind, severity):
                continue
            body = route.body(event)
            txn.enqueue_delivery(
                NewDelivery(
                    channel=route.channel,
                    kind=kind,
                    url=route.url,
                    idempotency_key=f"fw:ev:{event_id}:{route.key}",
                    settlement_id=settlement_id,
                    event_id=event_id,
                    body=body,
                )
            )

    # -- commit channel ------------------------------------------------------------------

    def on_verdict(self, txn: BlockTxn, rec: SettlementRef, verdict: str, event_id: int) -> None:
        """A settlement became terminal: enqueue its commit or discard (body assembled later)."""
        kind = TERMINAL_KIND.get(verdict)
        if kind is None or rec.commit_url is None:
            return
        txn.enqueue_delivery(
            NewDelivery(
                channel=COMMIT_CHANNEL,
                kind=kind,
                url=rec.commit_url,
                idempotency_key=f"fw:{rec.settlement_id}:{kind}",  # commit_key for a commit
                settlement_id=rec.settlement_id,
                event_id=event_id,
            )
        )

    def on_reversed(
        self, txn: BlockTxn, rec: SettlementRecord, violation_event_id: int, now_verdict: str
    ) -> str | None:
        """A confirmation was reversed (a finality violation, event ``violation_event_id``).

        A commit not sent yet must not go out: it is cancelled (a new confirmation revives
        it). A commit sent or being sent may have been applied: the receiver is told, on its
        ``commit_url``, by a ``finality_violation`` row, which the outbox holds back until
        that attempt is resolved (rows of a settlement go in id order). If the reversal
        lands on a failure at once, the ``discard`` follows it. Returns the state the commit
        row was in (None without one)."""
        if rec.commit_url is None:
            return None
        sid = rec.settlement_id
        state = retire_commit(
            txn.conn,
            commit_key(sid),
            f"{commit_key(sid)}~{violation_event_id}",
            txn.now,
            "cancelled: a reorg reversed the finality this commit reported",
        )
        if state in (SENDING, DELIVERED):
            txn.enqueue_delivery(
                NewDelivery(
                    channel=COMMIT_CHANNEL,
                    kind=VIOLATION,
                    url=rec.commit_url,
                    idempotency_key=violation_key(sid, violation_event_id),
                    settlement_id=sid,
                    event_id=violation_event_id,
                )
            )
            log.warning(
                "settlement %s: finality reversed after its commit was %s; the receiver is "
                "told at its commit_url (finality_violation)",
                sid,
                "delivered" if state == DELIVERED else "sent",
            )
        elif state is not None:
            log.warning(
                "settlement %s: finality reversed before its commit was delivered; "
                "commit cancelled (it is revived if the settlement is confirmed again)",
                sid,
            )
        if TERMINAL_KIND.get(now_verdict) == "discard":
            txn.enqueue_delivery(
                NewDelivery(
                    channel=COMMIT_CHANNEL,
                    kind="discard",
                    url=rec.commit_url,
                    idempotency_key=f"fw:{sid}:discard",
                    settlement_id=sid,
                )
            )
        return state

    def on_progress(self, txn: BlockTxn, head_number: int, head_hash: str, fresh: set[str]) -> None:
        """Provisional updates: inclusion (ids in ``fresh``) and depth, per processed head."""
        for rec in txn.provisional_in_progress():
            assert rec.commit_url is not None and rec.block_hash is not None
            depth = depth_of(rec.block_number, head_number)
            if depth <= 0:
                continue
            stage = "included" if rec.settlement_id in fresh or depth == 1 else "depth"
            txn.enqueue_delivery(
                NewDelivery(
                    channel=COMMIT_CHANNEL,
                    kind="provisional",
                    url=rec.commit_url,
                    idempotency_key=f"fw:{rec.settlement_id}:p:{rec.block_hash[2:18]}:{depth}",
                    settlement_id=rec.settlement_id,
                    body=provisional_body(rec, stage, head_number, head_hash, txn.now, depth),
                )
            )

    def on_reorged_out(
        self,
        txn: BlockTxn,
        touched: Iterable[SettlementRecord],
        reorg: dict[str, Any],
    ) -> None:
        """Provisional subscribers whose inclusion a reorg removed are told so (the reorg as
        their caller sees it: ``touched`` names only that caller's settlements)."""
        anc = reorg["common_ancestor"]
        recs = list(touched)
        for rec in recs:
            if not rec.provisional or rec.commit_url is None:
                continue
            if rec.verdict != Verdict.AWAITING_FINALITY:
                continue  # terminal ones get their own alerts (violation, failure evidence)
            seen = {**reorg, "touched": [r.settlement_id for r in recs if r.owner == rec.owner]}
            txn.enqueue_delivery(
                NewDelivery(
                    channel=COMMIT_CHANNEL,
                    kind="provisional",
                    url=rec.commit_url,
                    idempotency_key=f"fw:{rec.settlement_id}:p:reorg:{reorg['reorg_id']}",
                    settlement_id=rec.settlement_id,
                    body=provisional_body(
                        rec, "reorged_out", anc["number"], anc["hash"], txn.now, 0, seen
                    ),
                )
            )
