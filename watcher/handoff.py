"""Handoff between instances sharing one PostgreSQL store: leases, fencing, takeovers.

Each chain and each off-chain source is processed by one instance at a time: the holder of
its *lease* (``watcher.store.lease_store``). A scheduler job renews the leases this
instance holds and tries to take free or lapsed ones; the chain poll jobs of every instance
keep running but do nothing for a name this instance does not hold. Every processing write
carries the lease's fencing token and the store refuses a stale one, so a predecessor that
wakes up after a pause (SIGSTOP, a long GC, a frozen VM) cannot change anything.

At every takeover the successor applies the handoff guard (``guard.handoff``) and stores a
record with the four recorded elements:

- ``transaction_state_checkpoint_receipt``: the committed state (each block is one store
  transaction, so the committed state *is* the checkpoint): head, header window, verdicts,
  outbox position;
- ``in_flight_operation_registry_receipt``: outbox rows not yet acknowledged (the outbox is
  written in the same transaction as the verdict, so it is the registry), and the block
  processing the predecessor may have begun after its last committed head;
- ``handoff_lock_signature``: previous and new owner and fencing token;
- ``transaction_recovery_predicate_receipt``: per in-flight operation, the check the successor
  runs and what it found (the stored head against the node; a delivery is re-sent with the
  same Idempotency-Key once its row lease ends, which the receiver deduplicates).

Each element carries the ``sha256:`` digest of its canonical body. On SQLite there is only
one instance: leases are off, it owns everything and writes unfenced, as before.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, or_, select
from sqlalchemy.exc import SQLAlchemyError

from chains.errors import ChainError
from guard.canonical import digest
from guard.handoff import HandoffState, RecoveryOutcome, evaluate_handoff
from watcher.store import StoreError
from watcher.store import lease_store as ls
from watcher.store import schema as s

if TYPE_CHECKING:
    from watcher.engine import ChainWatcher
    from watcher.store import Store

log = logging.getLogger("finality.handoff")

TICK_MAX_S = 0.5
"""Longest interval between lease checks: a standby notices a released lease this fast."""


def default_instance_id() -> str:
    """Host name and pid: unique per process, readable in ``finality handoffs``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _element(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"kind": kind, "body": body, "digest": digest(body)}


class HandoffManager:
    """Leases of one instance over the names it may process (chains, then sources)."""

    def __init__(
        self,
        store: Store,
        names: Sequence[str],
        instance_id: str,
        lease_s: float,
        renew_s: float,
        clock: Callable[[], int],
        watchers: dict[str, ChainWatcher],
        locks: dict[str, threading.Lock],
    ) -> None:
        self.store = store
        self.names = list(names)
        self.instance_id = instance_id
        self.lease_ms = int(lease_s * 1000)
        self.renew_ms = int(renew_s * 1000)
        self.tick_s = min(renew_s, TICK_MAX_S)
        """Standbys look for a free lease this often; owners renew every ``renew_ms``."""
        self._renewed: dict[str, int] = {}
        self.clock = clock
        self.watchers = watchers
        self.locks = locks
        self.enabled = store.dialect == "postgresql"
        """Leases only make sense on a shared store; SQLite means one instance owns all."""
        self.held: dict[str, ls.Lease] = {}
        self._mutex = threading.Lock()
        self.released = False

    # -- what the pollers ask ------------------------------------------------------------

    def owns(self, name: str) -> bool:
        """May this instance process ``name`` now (the store still checks the token)."""
        return not self.enabled or (name in self.held and not self.released)

    def fence(self, name: str) -> tuple[str, int] | None:
        """(owner, token) for the writes of ``name``; None when leases are off or not held."""
        lease = self.held.get(name)
        return None if not self.enabled or lease is None else (self.instance_id, lease.token)

    def lost(self, name: str, token: int) -> None:
        """A write of ``name`` was refused with ``token``: stop processing it at once."""
        with self._mutex:
            lease = self.held.get(name)
            if lease is not None and lease.token == token:
                del self.held[name]
        watcher = self.watchers.get(name)
        if watcher is not None:
            watcher.fence = None
        log.warning("%s: lease lost (token %d refused); stopped processing it", name, token)

    # -- the scheduler job ---------------------------------------------------------------

    def tick(self) -> None:
        """Renew held leases, take free or lapsed ones; never raises for store trouble."""
        if not self.enabled or self.released:
            return
        for name in self.names:
            try:
                self._tick_one(name)
            except (StoreError, SQLAlchemyError) as exc:
                log.warning("%s: lease check failed: %s", name, exc)

    def _tick_one(self, name: str) -> None:
        held = self.held.get(name)
        now = self.clock()
        if held is not None and now - self._renewed.get(name, 0) < self.renew_ms:
            return  # renewed recently; the fencing token, not this check, guards writes
        lease, acquired = ls.acquire(
            self.store.writer,
            name,
            self.instance_id,
            now,
            self.lease_ms,
            None if held is None else held.token,
        )
        if lease is None:
            if held is not None:
                ls.record_rejection(
                    self.store.writer,
                    _stale(name, self.instance_id, held.token, self.store),
                    now,
                )
                self.lost(name, held.token)
            return
        self._renewed[name] = now
        if acquired is None:
            self.held[name] = lease
            return
        lock = self.locks.get(name)
        if lock is not None:
            with lock:
                self._take_over(name, acquired)
        else:
            self._take_over(name, acquired)

    def _take_over(self, name: str, acquired: ls.Acquired) -> None:
        watcher = self.watchers.get(name)
        if watcher is not None:
            watcher.reset()
            watcher.fence = (self.instance_id, acquired.lease.token)
        self.held[name] = acquired.lease
        try:
            record = self.record_takeover(name, acquired)
        except (StoreError, SQLAlchemyError) as exc:
            log.warning("%s: took the lease but could not record the handoff: %s", name, exc)
            return
        prev = acquired.previous
        log.info(
            "%s: took over from %s (token %s -> %d, %s): %s",
            name,
            prev.owner if prev else None,
            prev.token if prev else None,
            acquired.lease.token,
            acquired.reason,
            record["verdict"],
        )

    def release_all(self) -> None:
        """SIGTERM: give every held lease up so a standby takes over at its next check."""
        if not self.enabled:
            return
        self.released = True
        now = self.clock()
        for name, lease in list(self.held.items()):
            try:
                ls.release(self.store.writer, name, self.instance_id, lease.token, now)
            except (StoreError, SQLAlchemyError) as exc:
                log.warning("%s: cannot release the lease (it will lapse): %s", name, exc)
        if self.held:
            log.info("released leases: %s", ", ".join(sorted(self.held)))
        self.held.clear()

    # -- the takeover record ---------------------------------------------------------------

    def record_takeover(self, name: str, acquired: ls.Acquired) -> dict[str, Any]:
        """Apply the handoff guard to ``name``'s stored state and store the record."""
        now = self.clock()
        checkpoint, total, done = self._checkpoint(name)
        in_flight = self._in_flight(name, checkpoint)
        recovery = self._recover(name, checkpoint, in_flight)
        prev = acquired.previous
        lock_body = {
            "name": name,
            "from_owner": prev.owner if prev else None,
            "from_token": prev.token if prev else None,
            "from_expires_at": prev.expires_at if prev else None,
            "to_owner": self.instance_id,
            "to_token": acquired.lease.token,
            "acquired_at": acquired.lease.acquired_at,
            "expires_at": acquired.lease.expires_at,
            "reason": acquired.reason,
        }
        ops = frozenset(op["id"] for op in in_flight)
        has_checkpoint = checkpoint["head_hash"] is not None or checkpoint["kind"] == "source"
        state = HandoffState(
            transaction_id=name,
            steps_total=total,
            steps_completed=done,
            in_flight_observed=ops,
            checkpoint_digest=digest(checkpoint) if has_checkpoint else None,
            in_flight_registry=ops,
            lock_held=acquired.lease.token > (prev.token if prev else 0),
            remaining_idempotent=True,
            recovery=tuple(
                RecoveryOutcome(r["operation"], r["predicate"], r["outcome"], r["material"])
                for r in recovery
            ),
        )
        decision = evaluate_handoff(state)
        elements = {
            "transaction_state_checkpoint_receipt": _element(
                "transaction_state_checkpoint_receipt", checkpoint
            ),
            "in_flight_operation_registry_receipt": _element(
                "in_flight_operation_registry_receipt", {"name": name, "operations": in_flight}
            ),
            "handoff_lock_signature": _element("handoff_lock_signature", lock_body),
            "transaction_recovery_predicate_receipt": _element(
                "transaction_recovery_predicate_receipt", {"name": name, "checks": recovery}
            ),
            "decision": {
                "verdict": decision.verdict.value,
                "directive": decision.directive,
                "exception_applied": decision.exception_applied,
                "digest": decision.digest,
            },
        }
        values = {
            "name": name,
            "from_owner": lock_body["from_owner"],
            "from_token": lock_body["from_token"],
            "to_owner": self.instance_id,
            "to_token": acquired.lease.token,
            "reason": acquired.reason,
            "verdict": decision.verdict.value,
            "elements": elements,
            "recovery": recovery,
            "at": now,
        }
        values["id"] = ls.add_handoff(self.store.writer, values)
        return values

    def _checkpoint(self, name: str) -> tuple[dict[str, Any], int, int]:
        """The committed state of ``name``, and (steps total, steps done) for the guard."""
        t = s.settlements
        with self.store.reader.connect() as conn:
            verdicts = {
                str(v): int(n)
                for v, n in conn.execute(
                    select(t.c.verdict, func.count()).where(t.c.chain == name).group_by(t.c.verdict)
                )
            }
            watching = int(
                conn.execute(
                    select(func.count()).where(t.c.chain == name, t.c.watching.is_(True))
                ).scalar_one()
            )
            outbox = ls.max_delivery_id(conn)
        chain = self.store.chain(name)
        headers = self.store.headers(name) if name in self.watchers else []
        checkpoint: dict[str, Any] = {
            "name": name,
            "kind": "chain" if name in self.watchers else "source",
            "head_number": chain.head_number if chain else None,
            "head_hash": chain.head_hash if chain else None,
            "finalized_number": chain.finalized_number if chain else None,
            "header_window": [[n, h] for n, h, _p, _ts in headers[-16:]],
            "header_window_size": len(headers),
            "verdicts": verdicts,
            "watching": watching,
            "outbox_position": outbox,
        }
        total = sum(verdicts.values())
        return checkpoint, total, total - watching

    def _in_flight(self, name: str, checkpoint: dict[str, Any]) -> list[dict[str, Any]]:
        """Operations started and not known finished: outbox rows not acknowledged, and the
        block after the committed head (its processing may have begun, never committed)."""
        d, t, e = s.deliveries, s.settlements, s.events
        with self.store.reader.connect() as conn:
            rows = conn.execute(
                select(d.c.id, d.c.kind, d.c.state, d.c.idempotency_key, d.c.next_attempt_at)
                .where(
                    d.c.state.in_(("pending", "sending")),
                    or_(
                        d.c.settlement_id.in_(select(t.c.settlement_id).where(t.c.chain == name)),
                        d.c.event_id.in_(select(e.c.id).where(e.c.chain == name)),
                    ),
                )
                .order_by(d.c.id)
                .limit(500)
            ).all()
        ops: list[dict[str, Any]] = [
            {
                "id": f"delivery:{r.id}",
                "kind": r.kind,
                "state": r.state,
                "idempotency_key": r.idempotency_key,
                "lease_ends_at": r.next_attempt_at if r.state == "sending" else None,
            }
            for r in rows
        ]
        if checkpoint["kind"] == "chain" and checkpoint["head_number"] is not None:
            ops.append({"id": f"block:{checkpoint['head_number'] + 1}", "kind": "block_processing"})
        return ops

    def _recover(
        self, name: str, checkpoint: dict[str, Any], in_flight: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Run the recovery predicate of each in-flight operation; return what it found."""
        checks: list[dict[str, Any]] = []
        for op in in_flight:
            if op["kind"] == "block_processing":
                outcome = self._check_head(name, checkpoint)
                checks.append(
                    {
                        "operation": op["id"],
                        "predicate": "reread_header_window_from_common_ancestor",
                        "outcome": outcome,
                        "material": False,
                    }
                )
            else:
                state = op["state"]
                checks.append(
                    {
                        "operation": op["id"],
                        "predicate": "resend_with_same_idempotency_key",
                        "outcome": (
                            f"{state}: sent again with Idempotency-Key {op['idempotency_key']}"
                            + (" once its row lease ends" if state == "sending" else "")
                            + "; the receiver applies it at most once"
                        ),
                        "material": False,
                    }
                )
        return checks

    def _check_head(self, name: str, checkpoint: dict[str, Any]) -> str:
        """Compare the committed head with the node: same hash, or a reorg to re-read."""
        watcher = self.watchers.get(name)
        number, stored = checkpoint["head_number"], checkpoint["head_hash"]
        if watcher is None:
            return "not a chain"
        try:
            header = watcher.client.header(number)
        except ChainError as exc:
            return f"node not reachable ({exc}); the first poll re-reads from the stored head"
        if header is None:
            return f"block {number} not on the node: re-read from the common ancestor"
        if str(header.hash) == stored:
            return f"stored head {number} is canonical; nothing of block {number + 1} committed"
        return f"stored head {number} was reorged out: re-read from the common ancestor"


def _stale(name: str, owner: str, token: int, store: Store) -> Any:
    """The refusal of a renewal with a superseded token (recorded like a refused write)."""
    from watcher.store import StaleFencingToken

    current = next((x for x in ls.leases(store.writer) if x.name == name), None)
    return StaleFencingToken(
        name,
        owner,
        token,
        None if current is None else current.owner,
        None if current is None else current.token,
    )
