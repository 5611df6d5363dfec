"""Deposits that become final: the ones a block makes final, decided together (nothing
written here).

A block of 1,000 deposits makes the 1,000 of a few blocks before it final, all alike: the
guard decides them a block at a time (:func:`guard.deposit_batch.decide_deposits`), from
whole settlement records (:func:`confirmed_deposits`, the due ones of
:func:`watcher.engine.payments_settle.decide_payment_settlements`) or from the narrow read of
the ripe ones (:func:`ripe_outcomes`, :mod:`watcher.store.deposits_ripe`). What is decided
is an :class:`Outcome`, stored by :mod:`watcher.engine.payments_settle`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from guard.deposit_batch import DepositItem, decide_deposits
from guard.late_watch import still_watched
from guard.payment import DEPOSIT_KIND, RulePosition
from guard.settlement import Decision, Settlement, Transition, Verdict, settle_transition
from guard.types import SettlementId, UnixMillis
from watcher.engine.observe import ChainPosition
from watcher.engine.payment_terms import rule_position, spec_of, transfer_of
from watcher.engine.settle import Rules, gate_hold
from watcher.store.deposits_ripe import RipeDeposit
from watcher.store.payment_records import PaymentSpecRecord, TransferRecord
from watcher.store.refs import DepositRef


@dataclass(frozen=True)
class Outcome:
    """One payment's fresh evaluation, combined with its stored decision (nothing written)."""

    rec: DepositRef
    spec: PaymentSpecRecord
    transfers: Sequence[TransferRecord]
    previous: Decision
    fresh: Decision
    transition: Transition
    watching: bool


def ripe_outcomes(
    ripe: Sequence[RipeDeposit], pos: ChainPosition, now: int, rules: Rules
) -> dict[str, Outcome]:
    """The deposits of ``ripe`` (read narrowly: :mod:`watcher.store.deposits_ripe`) that
    the guard confirms final now, by id, decided as
    :func:`~watcher.engine.payments_settle.decide_payment_settlements`
    decides them from whole records (:func:`confirmed_deposits`); the others are for the
    caller to decide the whole way."""
    items = [(d, d.spec, d.transfers, False) for d in ripe]
    return {
        ripe[at].settlement_id: outcome
        for at, outcome in confirmed_deposits(items, pos, now, rules).items()
    }


def confirmed_deposits(
    due: Sequence[tuple[DepositRef, PaymentSpecRecord, Sequence[TransferRecord], bool]],
    pos: ChainPosition,
    now: int,
    rules: Rules,
) -> dict[int, Outcome]:
    """The outcomes of the deposits of ``due`` that become final now, by their place in
    ``due``: waiting, not reversed, not held by a finality gate, their one transfer's block
    final by their rule. The guard decides them a block at a time
    (:func:`guard.deposit_batch.decide_deposits`: the first of a block alone, the others
    from its decision with their own facts); one it does not confirm is left to
    :mod:`watcher.engine.payments_settle` to evaluate. Their stored decision is a wait (its
    verdict column says so), so the transition is an advance whatever else it held: it is
    not read back."""
    chosen: dict[tuple[str, RulePosition], list[tuple[int, DepositItem]]] = {}
    places: dict[tuple[str, int], RulePosition] = {}  # the position under each rule
    bases: dict[tuple[tuple[str, int], int], str | None] = {}  # a block's basis under one
    for at, (rec, spec, transfers, reversed_) in enumerate(due):
        if (
            rec.kind != DEPOSIT_KIND
            or reversed_
            or len(transfers) != 1
            or rec.verdict != Verdict.AWAITING_FINALITY
            or gate_hold(rec, rules) is not None
        ):
            continue
        rule = (rec.finality_mode, rec.required_confirmations)
        where = places.get(rule) or places.setdefault(rule, rule_position(rec, pos))
        block = (rule, transfers[0].block_number)
        final = bases[block] if block in bases else bases.setdefault(block, where.basis(block[1]))
        if final is None:
            continue
        settlement = Settlement(
            SettlementId(rec.settlement_id), True, UnixMillis(rec.initiated_at), rec.timeout_ms
        )
        item = DepositItem(settlement, spec_of(spec), [transfer_of(transfers[0])])
        chosen.setdefault((rec.chain, where), []).append((at, item))
    out: dict[int, Outcome] = {}
    for (chain, where), items in chosen.items():
        fresh = decide_deposits(chain, [i for _, i in items], where, rules.policy, now)
        for (at, _item), decided in zip(items, fresh, strict=True):
            if decided.verdict is not Verdict.FINALITY_CONFIRMED:
                continue
            rec, spec, transfers, _ = due[at]
            waiting = Decision(
                Verdict.AWAITING_FINALITY, "", decided.settlement_id, decided.deadline, 0, 0, None
            )
            transition = settle_transition(waiting, decided)
            watching = still_watched(transition, rec.deadline, rules.late_watch_ms, now)
            out[at] = Outcome(rec, spec, transfers, waiting, decided, transition, watching)
    return out
