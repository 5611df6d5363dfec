"""Registering settlements and presenting them: the operations the API and CLI share."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from guard.canonical import canonical_json
from guard.directive import waiting_directive
from guard.first_decisions import first_decisions
from guard.settlement import (
    TERMINAL_VERDICTS,
    Decision,
    Observation,
    Settlement,
    SettlementPolicy,
    Verdict,
    deadline_of,
    decision_as_json,
    evaluate_settlement,
)
from guard.types import SettlementId, UnixMillis
from watcher.config.chains import ChainConfig
from watcher.store import NewSettlement, SettlementRecord, Store


def depth_of(block_number: int | None, head_number: int | None) -> int:
    """Confirmations: head - block + 1, 0 when not included (or head unknown)."""
    if block_number is None or head_number is None or head_number < block_number:
        return 0
    return head_number - block_number + 1


ANONYMOUS_OWNER = "anonymous"
"""The owner of a settlement registered without a token (and of every row before 0008)."""


def settlement_id_for(chain: str, tx_hash: str, owner: str = ANONYMOUS_OWNER) -> str:
    """Deterministic id: the same (chain, tx hash, owner) always gets the same id, on any
    instance. The anonymous owner's id is the one used before owners existed, so stored
    settlements keep their ids; another owner's id depends on its name too, so two callers'
    settlements of one tx never share an id."""
    key = f"evm_tx:{chain}:{tx_hash}"
    if owner != ANONYMOUS_OWNER:
        key += f":{owner}"
    return "stl_" + hashlib.sha256(key.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Registration:
    """What the caller asked to watch, validated."""

    chain: ChainConfig
    """The chain it settles on."""
    tx_hash: str
    """Lower-case 0x hash."""
    confirmations: int | None = None
    """N; None uses the chain's default."""
    timeout_s: float | None = None
    """Timeout; None uses the chain's default."""
    dependent_state: dict[str, Any] | None = None
    """State to commit on finality."""
    commit_url: str | None = None
    """Where commits go."""
    sender: str | None = None
    """The sender (lower-case 0x), when the caller knows it: given with ``nonce`` (or
    recovered from ``raw_tx``), the tx is not looked up by hash (watcher/probes.py)."""
    nonce: int | None = None
    """Its nonce."""
    raw_tx: str | None = None
    """The signed bytes (0x hex), checked against ``tx_hash``: a replacement is provable."""
    owner: str = ANONYMOUS_OWNER
    """The API caller registering it (``Caller.name``): its settlement, nobody else's."""


def differing_terms(stored: SettlementRecord, new: NewSettlement) -> list[str]:
    """The request fields on which ``new`` asks for other terms than the ``stored``
    settlement it repeats (empty: the same registration, answered as it stands). The terms
    are what the watcher promises the caller: depth, deadline, the state it will deliver
    and where; a repeat must not silently keep the old ones."""
    state = (canonical_json(stored.dependent_state), canonical_json(new.dependent_state))
    return [
        name
        for name, differs in (
            ("confirmations", stored.required_confirmations != new.required_confirmations),
            ("timeout_s", stored.timeout_ms != new.timeout_ms),
            ("dependent_state", state[0] != state[1]),
            ("commit_url", stored.commit_url != new.commit_url),
        )
        if differs
    ]


def register(store: Store, reg: Registration, now: int) -> tuple[SettlementRecord, bool]:
    """Store a new settlement (AWAITING_FINALITY), or return the one its owner already
    registered and False."""
    return store.register(new_settlement(reg, now))


def new_settlement(reg: Registration, now: int) -> NewSettlement:
    """The row for a registration at ``now``: its id, deadline and initial decision."""
    sid = SettlementId(settlement_id_for(reg.chain.name, reg.tx_hash, reg.owner))
    return awaiting_row(
        Awaiting(reg.chain, reg.confirmations, reg.timeout_s, reg.dependent_state, reg.commit_url),
        sid,
        reg.tx_hash,
        reg.owner,
        now,
        sender=reg.sender,
        nonce=reg.nonce,
        raw_tx=reg.raw_tx,
    )


@dataclass(frozen=True)
class Awaiting:
    """What every kind of registration gives alike (a tx's, a payment's)."""

    chain: ChainConfig
    confirmations: int | None
    """N; None uses the chain's default."""
    timeout_s: float | None
    """Timeout; None uses the chain's default."""
    dependent_state: dict[str, Any] | None
    commit_url: str | None


class WaitLimits(NamedTuple):
    """How long a new settlement waits: its own timeout, and the longest wait of its chain or
    source (the guard caps the one by the other)."""

    timeout_s: float
    max_wait_s: float


def _limits(reg: Awaiting) -> WaitLimits:
    """The registration's timeout (the chain's unless given) and the chain's longest wait."""
    chain = reg.chain
    timeout_s = reg.timeout_s if reg.timeout_s is not None else chain.timeout_s
    return WaitLimits(timeout_s, chain.max_wait_s)


def first_decisions_of(reg: Awaiting, ids: Sequence[SettlementId], now: int) -> list[Decision]:
    """The first decisions :func:`awaiting_row` makes for ``ids`` registered alike at
    ``now``, built together (:mod:`guard.first_decisions`: a block's 1,000 new deposits)."""
    limits = _limits(reg)
    policy = SettlementPolicy(max_wait_ms=int(limits.max_wait_s * 1000))
    at = UnixMillis(now)
    return first_decisions(ids, at, int(limits.timeout_s * 1000), policy, at)


def awaiting_row(
    reg: Awaiting,
    sid: SettlementId,
    tx_hash: str,
    owner: str,
    now: int,
    first: Decision | None = None,
    **facts: Any,
) -> NewSettlement:
    """A new settlement row of ``owner``'s at ``now``, AWAITING_FINALITY: its deadline from
    the timeout and the chain's longest wait, its initial decision and digest (``first``:
    that decision, made already by :func:`first_decisions_of`). ``facts``: the kind's own
    columns (a tx's sender and nonce, a payment's kind)."""
    chain = reg.chain
    return first_row(
        sid,
        chain.name,
        tx_hash,
        now,
        _limits(reg),
        first=first,
        required_confirmations=reg.confirmations or chain.resolved_confirmations,
        finality_mode=chain.resolved_finality,
        dependent_state=reg.dependent_state,
        commit_url=reg.commit_url,
        owner=owner,
        **facts,
    )


def first_row(
    sid: SettlementId,
    name: str,
    ref: str,
    now: int,
    wait_s: WaitLimits,
    *,
    required_confirmations: int,
    finality_mode: str,
    dependent_state: dict[str, Any] | None,
    commit_url: str | None,
    owner: str,
    first: Decision | None = None,
    **facts: Any,
) -> NewSettlement:
    """The row of a settlement registered at ``now`` on the chain or source ``name`` (``ref``
    its tx hash or reference), AWAITING_FINALITY: its decision by the guard with nothing
    observed yet, and its deadline from ``wait_s``. ``facts``: the kind's own columns (a
    tx's sender and nonce, a payment's kind). Chains and sources register through this one
    function, so their first decision and deadline are made alike (``first``: the decision
    :func:`guard.first_decisions.first_decisions` made for it with the others of a batch,
    the same one)."""
    timeout_ms = int(wait_s.timeout_s * 1000)
    settlement = Settlement(sid, True, UnixMillis(now), timeout_ms)
    policy = SettlementPolicy(max_wait_ms=int(wait_s.max_wait_s * 1000))
    if first is not None and first.settlement_id == sid:
        decision = first
    else:
        decision = evaluate_settlement(settlement, Observation(), policy, UnixMillis(now))
    return NewSettlement(
        settlement_id=sid,
        chain=name,
        tx_hash=ref,
        required_confirmations=required_confirmations,
        finality_mode=finality_mode,
        timeout_ms=timeout_ms,
        initiated_at=now,
        deadline=deadline_of(settlement, policy),
        digest=decision.digest,
        decision=decision_as_json(decision),
        dependent_state=dependent_state,
        commit_url=commit_url,
        owner=owner,
        **facts,
    )


def live_directive(rec: SettlementRecord, now: int) -> str | None:
    """The directive as of ``now``: a settlement still waiting says the time elapsed and
    left now (the stored one was true only when it was decided); a terminal one's stands."""
    if rec.verdict == Verdict.AWAITING_FINALITY.value:
        return waiting_directive(rec.settlement_id, rec.initiated_at, rec.deadline, now)
    directive = rec.decision.get("directive")
    return None if directive is None else str(directive)


def waiting_for(rec: SettlementRecord, head: int | None, finalized: int | None) -> str | None:
    """What the settlement's finality rule still waits for, in words (None once terminal):
    inclusion; a depth (``depth 8; now 3``); or the chain's ``finalized`` block to reach the
    tx's block (``the finalized block to reach 812; finalized now 760``), which a depth
    count like 52/600 would misstate."""
    if rec.verdict != Verdict.AWAITING_FINALITY.value:
        return None
    if rec.block_number is None:
        return "inclusion in a block"
    depth = f"depth {rec.required_confirmations}; now {depth_of(rec.block_number, head)}"
    if rec.finality_mode == "safe":
        tag = f"the safe block to reach {rec.block_number}"
    else:
        now = "unknown" if finalized is None else finalized
        tag = f"the finalized block to reach {rec.block_number}; finalized now {now}"
    return {
        "depth": depth,
        "finalized": tag,
        "safe": tag,
        "depth_or_finalized": f"{depth}; or {tag}",
        "depth_and_finalized": f"{depth}; and {tag}",
    }.get(rec.finality_mode, depth)


def settlement_view(
    rec: SettlementRecord,
    head_number: int | None,
    receipt: Mapping[str, Any] | None = None,
    binding: Mapping[str, Any] | None = None,
    notes: Mapping[str, str] | None = None,
    *,
    now: int,
    finalized: int | None = None,
) -> dict[str, Any]:
    """The public JSON view of a settlement (DESIGN.md's contract), as of ``now``.

    ``notes`` are keys present only when there is something to say about the node data the
    settlement rests on (``waiting``, ``attestation``: watcher/api/views.py ``node_notes``).

    ``receipt`` is the latest signed receipt of the decision, when there is one; until it is
    signed (moments after the verdict commits) a terminal settlement shows its decision,
    unsigned, and ``receipt_signed`` is false. ``binding`` is the signed
    dependent_state_binding_receipt, when the settlement has dependent state.
    ``finalized``: the chain's recorded ``finalized`` block, for ``waiting_for`` under a
    rule that uses it. The ``directive`` and ``waiting_for`` are computed now, never read
    back as they were at the last decision."""
    decision = rec.decision
    terminal = rec.verdict in TERMINAL_VERDICTS
    return {
        "settlement_id": rec.settlement_id,
        "registered": True,
        "chain": rec.chain,
        "tx_hash": rec.tx_hash,
        "verdict": rec.verdict,
        "directive": live_directive(rec, now),
        "waiting_for": waiting_for(rec, head_number, finalized),
        "block_number": rec.block_number,
        "block_hash": rec.block_hash,
        "status": rec.receipt_status,
        "confirmations": depth_of(rec.block_number, head_number),
        "required_confirmations": rec.required_confirmations,
        "finality_mode": rec.finality_mode,
        "head_number": head_number,
        "reorg_count": rec.reorg_count,
        "replaced_by": rec.replaced_by,
        "initiated_at": rec.initiated_at,
        "deadline": rec.deadline,
        "terminal_at": rec.terminal_at,
        "digest": rec.digest,
        "evidence": decision.get("evidence"),
        "receipt": dict(receipt) if receipt is not None else (decision if terminal else None),
        "receipt_signed": receipt is not None,
        "binding": None if binding is None else dict(binding),
        "dependent_state": rec.dependent_state,
        "commit_url": rec.commit_url,
        **(notes or {}),
    }
