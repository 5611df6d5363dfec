"""Deposits: each transfer seen to a watched address, decided on its own (pure).

A subscription watches addresses for ever; every transfer to one of them (a successful
tx's native value, or an ERC-20 ``Transfer`` log of a listed token) becomes a **deposit**, a
settlement of kind ``evm_deposit``. Its terms are exactly what arrived: the amount, the
asset, the address and the sender, counted from that one transfer, so its finality receipt
is the payment receipt (:mod:`guard.receipt_payment`) proving that transfer offline.

A deposit is identified by (subscription, tx hash, asset, address, ordinal), where the
ordinal numbers a tx's transfers of one asset to one address in log order: a reorg that
includes the tx again (in another block, at another log index) finds the same deposit, so
it is never reported twice.

A reorg that takes the transfer out leaves the deposit waiting for it to be included again
(progress evidence :data:`AWAITING_REINCLUSION`, naming the lost transfer and its block).
Still out at the deadline, the deposit has **failed**: ``SETTLEMENT_FAILED`` on failure
evidence :data:`REORGED_OUT` (the transfer as seen, the block it was seen in, the reorg),
signed as a ``settlement_failure_receipt`` (:mod:`guard.verify_deposit` checks it). Unlike a
payment that nobody paid, a deposit did arrive once: what took it away is a fact to state,
not an absence of news to time out on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from guard.payment import DEPOSIT_KIND, NATIVE, PaymentSpec, RulePosition, Transfer, decide_payment
from guard.settlement import (
    Decision,
    Evidence,
    Observation,
    Settlement,
    SettlementPolicy,
    Verdict,
    deadline_of,
    evaluate_settlement,
)
from guard.types import UnixMillis

REORGED_OUT = "reorged_out"
"""Failure evidence (and ``failure.reason`` of its receipt): the deposit's transfer was taken
out by a reorg and not included again by the deadline."""

AWAITING_REINCLUSION = "awaiting_reinclusion"
"""Progress evidence of a deposit whose transfer a reorg took out, before its deadline."""

LOST_KEYS = ("tx_hash", "block_number", "block_hash", "log_index", "from", "value")
"""What the evidence says of the lost transfer (as it was seen; its tx index is the
receipt builder's to find in the block it names)."""


def deposit_id(subscription_id: str, tx_hash: str, asset: str, address: str, ordinal: int) -> str:
    """``dep_`` + 24 hex digits of sha256 over the deposit's identity (see the module doc):
    the same transfer seen again (a restart, another instance, a re-inclusion) has the same
    id."""
    key = f"{DEPOSIT_KIND}:{subscription_id}:{tx_hash}:{asset}:{address}:{ordinal}".encode()
    return "dep_" + hashlib.sha256(key).hexdigest()[:24]


def lost_transfer(
    settlement_id: str, previous: Decision | None, reorg: Evidence | None
) -> tuple[dict[str, Any], dict[str, Any] | None] | None:
    """(the deposit's transfer a reorg took out, that reorg's depth and common ancestor) —
    from ``reorg`` (the evidence of a reorg in this very block, whose ``removed`` names it),
    else carried over from the ``previous`` decision; None when no reorg took one."""
    if reorg is not None:
        facts = dict(reorg.facts)
        removed = facts.get("removed")
        mine = [
            r
            for r in (removed if isinstance(removed, list) else [])
            if isinstance(r, Mapping) and r.get("settlement_id") == settlement_id
        ]
        if mine:
            lost = {k: mine[-1].get(k) for k in LOST_KEYS}
            how: dict[str, Any] = {
                "depth": facts.get("depth"),
                "common_ancestor": facts.get("common_ancestor"),
            }
            return lost, how
    evidence = previous.evidence if previous is not None else None
    if evidence is None:
        return None
    said = dict(evidence.facts)
    if evidence.kind in (AWAITING_REINCLUSION, REORGED_OUT):
        gone, was = said.get("reorged"), said.get("reorg")
        if isinstance(gone, Mapping):
            return dict(gone), dict(was) if isinstance(was, Mapping) else None
        return None
    seen = said.get("transfers")
    if isinstance(seen, list) and seen and isinstance(seen[-1], Mapping):
        return {k: seen[-1].get(k) for k in LOST_KEYS}, None
    return None


def decide_deposit(
    settlement: Settlement,
    chain: str,
    spec: PaymentSpec,
    transfers: Sequence[Transfer],
    pos: RulePosition,
    policy: SettlementPolicy,
    now: int,
    hold: str | None = None,
    lost: tuple[dict[str, Any], dict[str, Any] | None] | None = None,
) -> Decision:
    """A deposit's decision: the payment decision over its one transfer
    (:func:`guard.payment.decide_payment`) while it is counted; while a reorg has taken it
    out (``lost``: see :func:`lost_transfer`), waiting for it to come back, and failed
    (:data:`REORGED_OUT`) once the deadline passes without it."""
    if transfers or lost is None:
        decision = decide_payment(settlement, chain, spec, list(transfers), pos, policy, now, hold)
        if decision.verdict is Verdict.TIMEOUT_TREATED_AS_FAILURE and not transfers:
            note = " Nothing was counted for the deposit by its deadline."
            return replace(decision, directive=decision.directive + note)
        return decision
    gone, reorg = dict(lost[0]), lost[1]
    if gone.get("from") is None:  # a reorg's evidence names no sender: the deposit's is it
        gone["from"] = spec.sender
    at = UnixMillis(now)
    deadline = deadline_of(settlement, policy)
    facts: dict[str, object] = {
        "chain": chain,
        "to": spec.to,
        "asset": spec.asset,
        "amount": str(spec.amount),
        "from": spec.sender,
        "paid": "0",
        "reorged": gone,
        "reorg": reorg,
        "deadline": deadline,
        "head_number": pos.head_number,
        "head_hash": pos.head_hash,
    }
    if now < deadline:
        waiting = Evidence.of(AWAITING_REINCLUSION, at, **facts)
        return evaluate_settlement(settlement, Observation(progress=waiting), policy, at)
    failure = Evidence.of(REORGED_OUT, at, **facts)
    decision = evaluate_settlement(settlement, Observation(failure=failure), policy, at)
    asset = "wei" if spec.asset == NATIVE else f"units of token {spec.asset}"
    note = (
        f" Its transfer of {spec.amount} {asset} to {spec.to} in tx {gone.get('tx_hash')}, seen"
        f" in block {gone.get('block_number')} ({gone.get('block_hash')}), was taken out by a"
        " reorg and not included again by the deadline."
    )
    return replace(decision, directive=decision.directive + note)
