"""The final decisions of many deposits of one block, alike (pure).

A block's deposits become final together: one block, one finality rule, one head, one
instant. For each of them :func:`guard.deposit.decide_deposit` asks the same rule about the
same block and writes the same evidence around that deposit's own transfer (its amount,
asset, address, sender, tx and log), then digests its canonical JSON. Here the guard decides
the **first** deposit of each group exactly as alone (:func:`~guard.deposit.decide_deposit`:
the rule, the verdict, the evidence, the digest), and the others of the group take that
decision with their own transfer's facts put in place: the canonical text is built once
around them, and each digest hashes it with the deposit's own values in their places.

Nothing is assumed that is not checked: a group is deposits whose evidence can differ only
in those facts (same block and hash, same registration instant and timeout, same asset
kind), each with exactly one counted transfer of exactly its amount; the first one's
decision must be ``FINALITY_CONFIRMED`` on a basis of the rule, and the decision rebuilt
here for it must equal the guard's own, field by field and digest by digest. Any deposit
outside those conditions, or any group whose check fails, is decided alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from guard.canonical import MAX_SAFE_INTEGER, canonical_json
from guard.deposit import decide_deposit
from guard.payment import NATIVE, PaymentSpec, RulePosition, Transfer
from guard.settlement import Decision, Evidence, Settlement, SettlementPolicy, Verdict
from guard.types import UnixMillis

_FACTS = ("to", "asset", "from", "amount", "paid", "paid_final")
"""The evidence facts of a deposit's own (its spec's, and what it paid)."""
_TRANSFER = ("tx_hash", "tx_index", "log_index", "from", "value")
"""The facts of its transfer that are its own (the block's are the group's)."""
_MOVED = -1
"""Where a template's evidence holds the transfers."""


@dataclass(frozen=True)
class DepositItem:
    """One deposit to decide: its settlement, spec and counted transfers."""

    settlement: Settlement
    spec: PaymentSpec
    transfers: Sequence[Transfer]


def decide_deposits(
    chain: str,
    items: Sequence[DepositItem],
    pos: RulePosition,
    policy: SettlementPolicy,
    now: int,
) -> list[Decision]:
    """``decide_deposit(item.settlement, chain, item.spec, item.transfers, pos, policy,
    now)`` for each of ``items``, in order (see the module doc); no finality gate (a held
    deposit is decided alone by the caller)."""
    out: list[Decision | None] = [None] * len(items)
    groups: dict[tuple[object, ...], list[int]] = {}
    for at, item in enumerate(items):
        key = _group_key(item)
        if key is None:
            out[at] = _alone(chain, item, pos, policy, now)
        else:
            groups.setdefault(key, []).append(at)
    for members in groups.values():
        first = items[members[0]]
        decided = _alone(chain, first, pos, policy, now)
        out[members[0]] = decided
        template = _Template.of(first, decided) if len(members) > 1 else None
        for at in members[1:]:
            item = items[at]
            out[at] = (
                template.decide(item)
                if template is not None
                else _alone(chain, item, pos, policy, now)
            )
    return [d for d in out if d is not None]


def _alone(
    chain: str, item: DepositItem, pos: RulePosition, policy: SettlementPolicy, now: int
) -> Decision:
    return decide_deposit(item.settlement, chain, item.spec, item.transfers, pos, policy, now)


def _group_key(item: DepositItem) -> tuple[object, ...] | None:
    """Deposits whose decisions differ only in their own facts share a key; None: this one
    is decided alone (not exactly one transfer of exactly its amount)."""
    if len(item.transfers) != 1:
        return None
    t, spec, s = item.transfers[0], item.spec, item.settlement
    if t.value != spec.amount or spec.amount <= 0 or not s.initiated:
        return None
    kind = (NATIVE if spec.asset == NATIVE else "token", t.log_index is None)
    return (t.block_number, t.block_hash, s.initiated_at, s.timeout_ms, *kind)


def _own(item: DepositItem) -> tuple[object, ...]:
    """The deposit's own values: its id, then :data:`_FACTS`, then :data:`_TRANSFER`."""
    spec, t = item.spec, item.transfers[0]
    amount = str(spec.amount)
    return (
        item.settlement.settlement_id,
        spec.to,
        spec.asset,
        spec.sender,
        amount,
        amount,
        amount,
        t.tx_hash,
        t.tx_index,
        t.log_index,
        t.sender,
        str(t.value),
    )


def _encode(value: object) -> str:
    """``value``'s canonical JSON (the plain cases written directly)."""
    if type(value) is str and value.isascii() and value.replace("_", "a").isalnum():
        return f'"{value}"'  # letters, digits, "_": ids, hex, "native"
    if type(value) is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return int.__repr__(value)
    if value is None:
        return "null"
    return canonical_json(value).decode()


def _encoded(values: tuple[object, ...]) -> list[str]:
    """:func:`_encode` of each of ``values``, the strings checked together: when every one is
    letters, digits and "_" (ids, hex, "native", amounts: the common case), each is written
    directly; otherwise each value goes its own way."""
    joined = "".join([v for v in values if type(v) is str])
    if not (joined.isascii() and joined.replace("_", "a").isalnum()):
        return [_encode(v) for v in values]
    return [f'"{v}"' if type(v) is str else _encode(v) for v in values]


@dataclass(frozen=True)
class _Template:
    """A group's decision with its deposit's own values taken out: the canonical text's
    pieces between them, in text order."""

    decided: Decision
    pieces: tuple[str, ...]
    gaps: tuple[tuple[int, str], ...]
    """Each value's place in :func:`_own`, with the piece of text after it."""
    slots: tuple[tuple[str, object, int | None], ...]
    """Each evidence fact: its key, the group's value, and where the deposit's own value is
    in :func:`_own` (None: the group's; :data:`_MOVED`: the transfer)."""
    transfer: dict[str, object]
    basis: str
    observed_at: UnixMillis

    @classmethod
    def of(cls, item: DepositItem, decided: Decision) -> _Template | None:
        """The template of ``decided`` (the guard's decision of ``item``), or None when it is
        not a plain confirmation or the text rebuilt here does not digest to the guard's."""
        evidence = decided.evidence
        if (
            decided.verdict is not Verdict.FINALITY_CONFIRMED
            or evidence is None
            or decided.late_finality is not None
        ):
            return None
        marks = [f"\x00{i}\x00" for i in range(1 + len(_FACTS) + len(_TRANSFER))]
        facts = dict(evidence.facts)
        moved = facts.get("transfers")
        if not isinstance(moved, list) or len(moved) != 1 or not isinstance(moved[0], dict):
            return None
        s = item.settlement
        marked_facts = {**facts, **dict(zip(_FACTS, marks[1:], strict=False))}
        marked_facts["transfers"] = [
            {**moved[0], **dict(zip(_TRANSFER, marks[1 + len(_FACTS) :], strict=True))}
        ]
        bound = _bound(decided, s, marks[0], evidence, marked_facts)
        text = canonical_json(bound).decode()
        written = [canonical_json(m).decode() for m in marks]
        if any(text.count(w) != 1 for w in written):
            return None
        cuts = sorted((text.index(w), i) for i, w in enumerate(written))
        pieces, start = [], 0
        for place, i in cuts:
            pieces.append(text[start:place])
            start = place + len(written[i])
        pieces.append(text[start:])
        where = {k: 1 + n for n, k in enumerate(_FACTS)} | {"transfers": _MOVED}
        slots = tuple((k, v, where.get(k)) for k, v in evidence.facts)
        gaps = tuple(zip((i for _, i in cuts), pieces[1:], strict=True))
        template = cls(
            decided, tuple(pieces), gaps, slots, moved[0], evidence.kind, evidence.observed_at
        )
        return template if template.decide(item) == decided else None

    def decide(self, item: DepositItem) -> Decision:
        """``item``'s decision from the template."""
        own = _own(item)
        encoded = _encoded(own)
        text = self.pieces[0] + "".join([encoded[i] + piece for i, piece in self.gaps])
        moved = {**self.transfer, **dict(zip(_TRANSFER, own[1 + len(_FACTS) :], strict=True))}
        facts = tuple(
            [(k, [moved] if i == _MOVED else v if i is None else own[i]) for k, v, i in self.slots]
        )
        d, spec, sid = self.decided, item.spec, item.settlement.settlement_id
        asset = "wei" if spec.asset == NATIVE else f"units of token {spec.asset}"
        return Decision(
            verdict=d.verdict,
            directive=(
                f"COMMIT: settlement {sid} is final ({self.basis}); commit dependent"
                f" state. Paid {spec.amount} of {spec.amount} {asset} finally to {spec.to}."
            ),
            settlement_id=sid,
            deadline=d.deadline,
            elapsed_ms=d.elapsed_ms,
            remaining_ms=d.remaining_ms,
            evidence=Evidence(self.basis, self.observed_at, facts),
            digest="sha256:" + hashlib.sha256(text.encode()).hexdigest(),
        )


def _bound(
    decided: Decision,
    s: Settlement,
    sid: str,
    evidence: Evidence,
    facts: dict[str, object],
) -> dict[str, object]:
    """What the guard's digest of a confirmation binds (guard/settlement.py ``_decide``)."""
    return {
        "verdict": decided.verdict.value,
        "settlement_id": sid,
        "initiated": s.initiated,
        "initiated_at": s.initiated_at,
        "timeout_ms": s.timeout_ms,
        "deadline": decided.deadline,
        "evidence": {"kind": evidence.kind, "observed_at": evidence.observed_at, "facts": facts},
    }
