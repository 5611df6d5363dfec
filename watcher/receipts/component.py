"""The receipts component: signs a receipt for every terminal verdict, after it committed.

The engine commits verdicts; this component follows, in a thread of its own woken after
each poll of a chain (``after_poll``), so it never delays a verdict or the chain's next
block. Stored receipts wake the delivery sender (a commit waiting for its receipt goes at
once) and the API's readers waiting for one (``signal``). Per chain, one lock:

1. it scans the chain's new events (``settlement_confirmed``, ``settlement_failed``,
   ``settlement_timed_out``, ``finality_violation``) from a cursor, and notes the
   settlements they name;
2. for each noted settlement: a ``finality_violation`` revokes the finality receipts of the
   reversed decision (a signed ``receipt_revocation`` citing the revoked digest); a terminal
   verdict without a current receipt for its decision gets one: built from what the tracker
   and engine fetched (watcher/receipts/builder.py), signed, checked with the offline
   verifier; a batch (a block's settlements together) is stored in a few transactions
   (:data:`STORED_TOGETHER` receipts each).

Crash safety without bookkeeping: the cursor lives in memory and starts at 0, so a restarted
daemon re-reads the events and builds only what is missing (one query per 500). A receipt that
cannot be built yet (the node lags, or the chain moved away from the decision's evidence: never
sign then) waits out a backoff, reset by each new decision; fresh decisions go before retries
(watcher/receipts/due.py).

Source settlements (Stripe, RQ, Celery) are receipted the same way, keyed by the source's name:
their builder (watcher/receipts/sources.py) needs no node, only the stored decision and the
settlement's events. The source poller calls ``after_poll(source)`` right after it stored a
decision (poll job or webhook), so the commit usually finds its receipt at once.

The binding receipt is made at registration, by the API (:func:`watcher.api.views.binding_for`),
and again on demand if a crash lost it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from chains.errors import ChainError
from chains.proofs import BranchMoved
from guard.canonical import CanonicalError
from guard.event_kinds import EventKind
from guard.receipts import (
    BINDING,
    DECISION_KINDS,
    FINALITY,
    OFFCHAIN_CHAIN_ID,
    Subject,
    revocation_body,
)
from guard.settlement import TERMINAL_VERDICTS
from guard.verify import verify_receipt
from watcher import otel_tracing
from watcher.receipts.builder import ReceiptBuilder
from watcher.receipts.due import BUILDS_PER_POLL, Due, block_of
from watcher.receipts.due import ready as ready_now
from watcher.receipts.issued import Issued
from watcher.receipts.payment import chain_builder
from watcher.receipts.signer import Signer
from watcher.receipts.sources import SourceReceiptBuilder
from watcher.store import SettlementNotFound, SettlementRecord, StaleFencingToken, StoreError
from watcher.store.receipts_store import ReceiptStore, current_receipts, receipt_store
from watcher.store.records import ReceiptRecord

if TYPE_CHECKING:
    from chains.rpc import RpcClient
    from watcher.config.model import Config
    from watcher.store.store import Store

log = logging.getLogger("finality.receipts")

STORED_TOGETHER = 25
"""Receipts stored in one transaction at most: a tick's first receipts are stored (their
readers answered) while the rest are built, not held back for the whole tick."""


class ReceiptIssuer:
    """The component: one instance for the daemon, working per chain in a thread of its own
    (woken after each poll of the chain)."""

    def __init__(
        self,
        signer: Signer,
        receipts: ReceiptStore,
        builders: dict[str, ReceiptBuilder | SourceReceiptBuilder],
        clock: Callable[[], int],
        *,
        fence_of: Callable[[str], tuple[str, int] | None] = lambda _name: None,
        on_lost: Callable[[str, int], None] = lambda _name, _token: None,
        on_issued: Callable[[], None] = lambda: None,
    ) -> None:
        self.signer = signer
        self.receipts = receipts
        self.builders = builders
        self.clock = clock
        self._cursor: dict[str, int] = dict.fromkeys(builders, 0)
        self._due: dict[str, dict[str, Due]] = {chain: {} for chain in builders}
        self._locks = {chain: threading.Lock() for chain in builders}
        """Per chain or source: a source's decisions come from its poll job and from webhook
        (API) threads, so its work is serialised here."""
        self.signal = Issued()
        """The count of receipts stored, that API readers wait on (watcher/receipts/issued)."""
        self.fence_of = fence_of
        """(owner, fencing token) a receipt of a chain or source is stored under (the
        handoff manager's ``fence``); None: unfenced (one instance)."""
        self.on_lost = on_lost
        """Called when the store refused a receipt for a stale token (the lease is gone)."""
        self._binding_lock = threading.Lock()
        self.on_issued = on_issued
        """Called after receipts were stored (the delivery sender's wake-up: a commit waiting
        for its receipt goes at once)."""

    @property
    def issued(self) -> int:
        """Receipts signed and stored since start."""
        return self.signal.count

    # -- component -----------------------------------------------------------------------

    _thread: threading.Thread | None = None

    def start(self) -> None:
        """Record the signer as current (only now: a daemon that fails to start must not retire
        a running one's key); build receipts in a thread woken after each poll, not in it."""
        self.receipts.use_signer(self.signer.address, self.signer.source, self.clock())
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._pending: set[str] = set()
        self._pending_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="receipts", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Finish the receipt being built (one store transaction) and stop."""
        if self._thread is None:
            return
        self._stopping.set()
        self._wake.set()
        self._thread.join(timeout=30)
        self._thread = None

    def after_poll(self, chain: str) -> None:
        """Started: wake the receipts thread for ``chain``. Not started (a test driving the
        engine by hand): issue now, in the caller's thread."""
        if self._thread is None:
            self.issue(chain)
            return
        with self._pending_lock:
            self._pending.add(chain)
        self._wake.set()

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait(1.0)
            self._wake.clear()
            with self._pending_lock:
                chains = sorted(self._pending)
                self._pending.clear()
            for chain in chains:
                if self._stopping.is_set():
                    return
                if self.issue(chain) >= BUILDS_PER_POLL:
                    with self._pending_lock:  # more may be ready: go on without a poll
                        self._pending.add(chain)
                    self._wake.set()

    def issue(self, chain: str) -> int:
        """Issue what the chain's new events call for; returns how many settlements were
        handled. Never raises for a node or store failure (the next poll tries again)."""
        lock = self._locks.get(chain)
        if lock is None:
            return 0  # a name without receipts (no builder)
        try:
            with lock:
                self.scan(chain)
                issued = self.issued
                handled = self.work(chain)
                if self.issued != issued:
                    self.on_issued()
                builder = self.builders[chain]
                if isinstance(builder, ReceiptBuilder):  # receipts due now went first
                    builder.prepare()
            return handled
        except StaleFencingToken as exc:
            # Another instance holds the lease now: it issues the receipts; nothing was stored.
            log.warning("chain %s: receipt refused: %s", chain, exc)
            self.on_lost(chain, exc.token)
        except (ChainError, StoreError) as exc:
            log.warning("chain %s: receipts postponed: %s", chain, exc)
        return 0

    # -- the work ------------------------------------------------------------------------

    def scan(self, chain: str) -> None:
        """Note the settlements named by new events, skipping those already receipted."""
        due = self._due[chain]
        fresh: set[str] = set()
        while True:
            events = self.receipts.terminal_events(chain, self._cursor[chain])
            for event in events:
                entry = due.setdefault(event.settlement_id, Due())
                entry.renew()  # a new decision: no old backoff
                fresh.add(event.settlement_id)
                if event.kind == EventKind.FINALITY_VIOLATION:
                    previous = event.payload.get("previous") or {}
                    if previous.get("digest"):
                        entry.revoke.add(str(previous["digest"]))
                        entry.violation = {"event_id": event.id, **event.payload}
                self._cursor[chain] = event.id
            if len(events) < 1000:
                break
        # Most noted settlements are done already after a restart: one query per 500.
        done = self.receipts.for_settlements(sorted(fresh))
        for sid in fresh:
            entry = due[sid]
            if not entry.revoke and _has_current(done.get(sid, []), None):
                due.pop(sid)

    def work(self, chain: str) -> int:
        """Build what is due now, at most :data:`BUILDS_PER_POLL` (fresh decisions before
        retries: watcher/receipts/due.py), and store the receipts in transactions of
        :data:`STORED_TOGETHER`; returns how many were tried."""
        due = self._due[chain]
        ready = ready_now(due, self.clock())
        if not ready:
            return 0
        # One query each for the batch's settlements and their stored receipts; built in
        # block order, so a block's settlements share its header chain and tries.
        records = self.receipts.settlements(ready)
        stored = self.receipts.for_settlements(ready)
        sealed: list[tuple[str, dict[str, Any]]] = []
        for sid in sorted(ready, key=lambda sid: block_of(records.get(sid))):
            rec = records.get(sid)
            try:
                if rec is None:
                    raise SettlementNotFound(sid)
                receipt = self._settle(chain, rec, due[sid], stored.get(sid, []))
            except SettlementNotFound:
                receipt = None
            except (BranchMoved, ChainError, ValueError, KeyError, CanonicalError) as exc:
                self._postpone(sid, due[sid], exc)
                continue
            if receipt is None:
                due.pop(sid, None)
            else:
                sealed.append((sid, receipt))
            if len(sealed) >= STORED_TOGETHER:
                self._stored(chain, sealed)
                sealed = []
        self._stored(chain, sealed)
        return len(ready)

    def _stored(self, chain: str, sealed: list[tuple[str, dict[str, Any]]]) -> None:
        """Store ``sealed`` (settlement id, receipt) in one transaction, then wake the API's
        readers waiting for them; they are no longer due."""
        if not sealed:
            return
        self.receipts.add_many([r for _, r in sealed], self.clock(), fence=self._fence(chain))
        self.signal.stored(sid for sid, _ in sealed)  # wakes the API's waiting readers
        due = self._due[chain]
        for sid, _ in sealed:
            due.pop(sid, None)

    def _postpone(self, sid: str, entry: Due, exc: Exception) -> None:
        wait = entry.postpone(self.clock())
        level = logging.INFO if isinstance(exc, BranchMoved) else logging.WARNING
        if entry.attempts in (1, 5) or entry.attempts % 50 == 0:
            message = "receipt for %s not built yet (attempt %d, retry in %d s): %s"
            log.log(level, message, sid, entry.attempts, wait // 1000, exc)

    def _settle(
        self, chain: str, rec: SettlementRecord, entry: Due, stored: list[ReceiptRecord]
    ) -> dict[str, Any] | None:
        """Revoke what ``entry`` withdraws (stored at once), and the signed, self-checked
        receipt ``rec``'s decision still needs (stored by the caller with its batch), or
        None when nothing is left to do."""
        for old in current_receipts(stored):
            if old.kind == FINALITY and old.body.get("decision_digest") in entry.revoke:
                self._revoke(old, entry.violation)
        entry.revoke.clear()
        if rec.verdict not in TERMINAL_VERDICTS or _has_current(stored, rec.digest):
            return None
        ids = {"finality.chain": chain, "finality.settlement_id": rec.settlement_id}
        with otel_tracing.span("finality.receipt_build", ids):
            receipt, hashes = self.signer.seal(
                self.builders[chain].decision_body(rec, self.clock())
            )
            verify_receipt(receipt, trusted_signers=[self.signer.address], signed_hashes=hashes)
        return receipt

    def _fence(self, name: str) -> tuple[str, str, int] | None:
        fence = self.fence_of(name)
        return None if fence is None else (name, fence[0], fence[1])

    def _revoke(self, old: ReceiptRecord, violation: dict[str, Any]) -> None:
        body = old.body
        subject = Subject(
            body["settlement_id"],
            body["chain"],
            body["chain_id"],
            body["tx_hash"],
            self.signer.address,
        )
        now = self.clock()
        current = violation.get("now") or {}
        evidence = {
            "event": EventKind.FINALITY_VIOLATION.value,
            "event_id": violation.get("event_id"),
            "revoked_decision_digest": body.get("decision_digest"),
            "current_verdict": current.get("verdict"),
            "current_decision_digest": current.get("digest"),
        }
        now_verdict = current.get("verdict", "unknown")
        if body.get("chain_id") == OFFCHAIN_CHAIN_ID:
            reversal = (current.get("evidence") or {}).get("kind", "a reversal")
            reason = (
                f"finality violation: the source reported {reversal} after the outcome the "
                f"revoked {old.kind} attests; the settlement is now {now_verdict}"
            )
        else:
            reason = (
                f"finality violation: the chain reorganised below the block of the revoked "
                f"{old.kind}; the settlement is now {now_verdict}"
            )
        revocation = self.signer.sign(revocation_body(subject, now, body, reason, evidence))
        self._store(revocation, revokes=old.id, fence=self._fence(str(body["chain"])))
        log.warning("revoked %s %s of %s: %s", old.kind, old.digest, old.settlement_id, reason)

    def _store(
        self,
        receipt: dict[str, Any],
        revokes: int | None = None,
        fence: tuple[str, str, int] | None = None,
    ) -> ReceiptRecord:
        """Check the signed receipt with the offline verifier, then store it (under
        ``fence``: (name, owner, token), refused by the store when stale)."""
        verify_receipt(receipt, trusted_signers=[self.signer.address])
        record = self.receipts.add(receipt, self.clock(), revokes=revokes, fence=fence)
        self.signal.stored([str(receipt["settlement_id"])])
        return record

    # -- bindings ------------------------------------------------------------------------

    def binding(self, rec: SettlementRecord) -> dict[str, Any] | None:
        """The binding receipt of ``rec`` (stored, or made and stored now); None without
        dependent state."""
        if rec.dependent_state is None or rec.chain not in self.builders:
            return None  # no dependent state, or a payment/job source (no chain to bind to)
        with self._binding_lock:  # API threads: two registrations of one tx make one binding
            for old in self.receipts.for_settlement(rec.settlement_id):
                if old.kind == BINDING:
                    return old.body
            body = self.builders[rec.chain].binding_body(rec, self.clock())
            if body is None:
                return None
            return self._store(self.signer.sign(body)).body


def _has_current(stored: list[ReceiptRecord], decision_digest: str | None) -> bool:
    """A decision receipt not revoked (for ``decision_digest``, or for any when None)."""
    return any(
        r.kind in DECISION_KINDS
        and (decision_digest is None or r.body.get("decision_digest") == decision_digest)
        for r in current_receipts(stored)
    )


def build_issuer(
    config: Config,
    store: Store,
    clients: Mapping[str, RpcClient],
    signer: Signer,
    clock: Callable[[], int],
    *,
    fence_of: Callable[[str], tuple[str, int] | None],
    on_lost: Callable[[str, int], None],
    on_issued: Callable[[], None],
) -> ReceiptIssuer:
    """The receipts component over ``signer`` (recorded as the current signer when it
    starts): a builder per chain (its client) and per source. With several instances on one store a
    receipt is a processing write of its chain or source, fenced by its lease like a block
    (``fence_of``/``on_lost``: the handoff manager's); ``on_issued`` wakes the sender."""
    receipts = receipt_store(store)
    builders: dict[str, ReceiptBuilder | SourceReceiptBuilder] = {
        c.name: chain_builder(c, clients[c.name], signer.address, store) for c in config.chains
    }
    for source in config.sources:
        builders[source.name] = SourceReceiptBuilder(
            source.name, source.kind, signer.address, receipts.lifecycle
        )
    log.info("receipts are signed by %s (key from %s)", signer.address, signer.source)
    return ReceiptIssuer(
        signer,
        receipts,
        builders,
        clock,
        fence_of=fence_of,
        on_lost=on_lost,
        on_issued=on_issued,
    )
