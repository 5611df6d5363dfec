"""From a stored settlement and the chain's position to the guard's inputs.

This is where chain facts become evidence: depth = head - inclusion block + 1; finality by
the chain's rule (:mod:`guard.finality_rule`: depth >= N, the ``finalized`` or ``safe`` tag
covering the block, either or both of depth and ``finalized``);
a status-0 receipt or a same-nonce replacement at finality becomes failure evidence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from guard.finality_rule import finality_basis
from guard.settlement import (
    Decision,
    Evidence,
    Observation,
    Settlement,
    SettlementPolicy,
    evaluate_settlement,
)
from guard.types import SettlementId, UnixMillis
from watcher.settlements import depth_of
from watcher.store.records import SettlementRecord


class TrackedTx(Protocol):
    """What evaluation reads of a tracked transaction: a stored settlement
    (:class:`watcher.store.records.SettlementRecord`) or a live look-up of an unregistered
    hash (:mod:`watcher.engine.live`)."""

    @property
    def chain(self) -> str: ...
    @property
    def tx_hash(self) -> str: ...
    @property
    def required_confirmations(self) -> int: ...
    @property
    def finality_mode(self) -> str: ...
    @property
    def sender(self) -> str | None: ...
    @property
    def nonce(self) -> int | None: ...
    @property
    def block_number(self) -> int | None: ...
    @property
    def block_hash(self) -> str | None: ...
    @property
    def tx_index(self) -> int | None: ...
    @property
    def receipt_status(self) -> int | None: ...
    @property
    def replaced_by(self) -> str | None: ...
    @property
    def replaced_block_number(self) -> int | None: ...
    @property
    def replaced_block_hash(self) -> str | None: ...


@dataclass(frozen=True)
class ChainPosition:
    """Where the chain stands at evaluation."""

    head_number: int
    """Canonical head height."""
    head_hash: str
    """Its hash."""
    finalized_number: int | None
    """The ``finalized`` tag's height, when fetched (with a quorum: the trusted height)."""
    untrusted_finalized: int | None = None
    """Our node's own ``finalized`` height when the quorum gate did not trust it that far
    (a tag running ahead of the other endpoints'); shown as the reason to wait."""
    safe_number: int | None = None
    """The ``safe`` tag's height, when fetched (the ``safe`` rule)."""


def _is_final(mode: str, block_number: int, required: int, pos: ChainPosition) -> str | None:
    """The finality basis that holds for a block, or None (guard.finality_rule)."""
    depth = depth_of(block_number, pos.head_number)
    return finality_basis(
        mode, block_number, depth, required, pos.finalized_number, pos.safe_number
    )


def observe(
    rec: TrackedTx,
    pos: ChainPosition,
    now: int,
    hold: str | None = None,
    observed_by: tuple[str, ...] = (),
) -> Observation:
    """The guard's observation of ``rec`` at ``pos``.

    ``hold`` is why the finality gate (quorum of endpoints) has not approved this settlement
    yet: finality or failure evidence is then shown as progress only, so the guard waits.
    ``observed_by`` lists the endpoints that agreed, when a quorum was asked."""
    observation = _observe(rec, pos, now)
    decisive = observation.finality or observation.failure
    if decisive is None:
        return observation
    if hold is not None:
        facts = dict(decisive.facts, awaiting=decisive.kind, reason=hold)
        return Observation(progress=Evidence.of("awaiting_quorum", decisive.observed_at, **facts))
    if observed_by:
        evidence = Evidence.of(
            decisive.kind,
            decisive.observed_at,
            **dict(decisive.facts),
            observed_by=list(observed_by),
        )
        if observation.failure is not None:
            return Observation(failure=evidence)
        return Observation(finality=evidence)
    return observation


def _observe(rec: TrackedTx, pos: ChainPosition, now: int) -> Observation:
    at = UnixMillis(now)
    base = {
        "chain": rec.chain,
        "tx_hash": rec.tx_hash,
        "required_confirmations": rec.required_confirmations,
        "finality_mode": rec.finality_mode,
        "head_number": pos.head_number,
        "head_hash": pos.head_hash,
        "finalized_number": pos.finalized_number,
    }
    if pos.safe_number is not None:
        base["safe_number"] = pos.safe_number
    if rec.replaced_by is not None and rec.replaced_block_number is not None:
        basis = _is_final(
            rec.finality_mode, rec.replaced_block_number, rec.required_confirmations, pos
        )
        if basis is not None:
            return Observation(
                failure=Evidence.of(
                    "replaced",
                    at,
                    **base,
                    basis=basis,
                    sender=rec.sender,
                    nonce=rec.nonce,
                    replaced_by=rec.replaced_by,
                    block_number=rec.replaced_block_number,
                    block_hash=rec.replaced_block_hash,
                    confirmations=depth_of(rec.replaced_block_number, pos.head_number),
                )
            )
    if rec.block_number is None:
        return Observation()
    facts = dict(
        base,
        block_number=rec.block_number,
        block_hash=rec.block_hash,
        tx_index=rec.tx_index,
        status=rec.receipt_status,
        confirmations=depth_of(rec.block_number, pos.head_number),
    )
    basis = _is_final(rec.finality_mode, rec.block_number, rec.required_confirmations, pos)
    if basis is None:
        untrusted = pos.untrusted_finalized
        if rec.finality_mode != "depth" and untrusted is not None and rec.block_number <= untrusted:
            facts["waiting"] = (
                f"the node's finalized tag ({untrusted}) covers block {rec.block_number}, but "
                f"the endpoints of the quorum only confirm finalized up to "
                f"{pos.finalized_number}: not trusted yet"
            )
        return Observation(progress=Evidence.of("included", at, **facts))
    if rec.receipt_status == 0:
        return Observation(failure=Evidence.of("reverted", at, basis=basis, **facts))
    return Observation(finality=Evidence.of(basis, at, **facts))


def decide(
    rec: SettlementRecord,
    pos: ChainPosition,
    policy: SettlementPolicy,
    now: int,
    hold: str | None = None,
    observed_by: tuple[str, ...] = (),
) -> Decision:
    """Evaluate ``rec`` with the guard (``hold``/``observed_by``: see :func:`observe`)."""
    settlement = Settlement(
        settlement_id=SettlementId(rec.settlement_id),
        initiated=True,
        initiated_at=UnixMillis(rec.initiated_at),
        timeout_ms=rec.timeout_ms,
    )
    observation = observe(rec, pos, now, hold, observed_by)
    return evaluate_settlement(settlement, observation, policy, UnixMillis(now))
