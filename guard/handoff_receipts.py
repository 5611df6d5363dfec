"""Signed receipts of a handoff: the four recorded elements of one takeover.

A takeover (an instance acquiring the lease of a chain or source from a predecessor, see
:mod:`guard.handoff`) records four elements. Each is signed as a receipt of the common
format (:mod:`guard.receipts`: version 1, canonical JSON body, ``digest``, EIP-712
``signature``), so a third party can check offline who attested which state at which
handoff. The kinds:

``transaction_state_checkpoint_receipt``
    the committed state at takeover: head and header window, verdict counts, outbox position;
``in_flight_operation_registry_receipt``
    every operation started and not known finished;
``handoff_lock_signature``
    the lease: previous and new owner, their fencing tokens, when the new lease lapses;
``transaction_recovery_predicate_receipt``
    per in-flight operation, the check the successor ran and what it found.

A caller's *workflow* (``/v1/workflows``) is handed between agents under the same four
elements, its name ``workflow:{id}``; its checkpoint is its steps
(:mod:`guard.workflow_checkpoint`).

A handoff receipt is not about a transaction, so the common fields are filled this way:
``settlement_id`` is the handoff's reference ``handoff:{name}:{to_token}`` (unique: a
name's token grows at every takeover), ``tx_hash`` is keccak256 of that reference,
``chain`` is the name handed over and ``chain_id`` the chain's id (0 for a payment or job
source). The body adds ``handoff`` (the takeover every element of it repeats: name, owners,
tokens, reason, time, the guard's verdict and its digest), ``element`` (the recorded
element itself) and ``element_digest`` (``sha256:`` of the element's canonical JSON, the
digest older records stored without a signature).

:func:`handoff_body` builds a body; :func:`verify_handoff` checks one (the signature and the
``digest`` are checked by :func:`guard.verify.verify_receipt`, which dispatches here).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from guard.canonical import digest
from guard.errors import ReceiptInvalid
from guard.fields import (
    array,
    child,
    digest_of,
    digest_text,
    field,
    integer,
    keys,
    obj,
    optional_integer,
    text,
)
from guard.handoff import HandoffVerdict
from guard.receipts import FORMAT_VERSION, ref_hash
from guard.verify_chain import ChainFacts
from guard.verify_terms import COMMON
from guard.workflow_checkpoint import WORKFLOW_KIND, WORKFLOW_PREFIX, verify_workflow_checkpoint

CHECKPOINT = "transaction_state_checkpoint_receipt"
REGISTRY = "in_flight_operation_registry_receipt"
LOCK = "handoff_lock_signature"
RECOVERY = "transaction_recovery_predicate_receipt"

HANDOFF_KINDS = (CHECKPOINT, REGISTRY, LOCK, RECOVERY)
"""The four recorded elements of a handoff, in the order they are recorded."""
REASONS = ("first", "released", "expired", "rebalance")
"""Why the lease changed owner: first owner ever, released (SIGTERM), lapsed, or given away
to a less loaded instance (rebalance)."""
HANDOFF_FIELDS = (
    "name",
    "from_owner",
    "from_token",
    "to_owner",
    "to_token",
    "reason",
    "at",
    "verdict",
    "decision_digest",
)
"""Fields of a body's ``handoff`` section."""
CHECKPOINT_FIELDS = (
    "name",
    "kind",
    "head_number",
    "head_hash",
    "finalized_number",
    "header_window",
    "header_window_size",
    "verdicts",
    "watching",
    "outbox_position",
)
"""Fields of a checkpoint element."""
LOCK_FIELDS = (
    "name",
    "from_owner",
    "from_token",
    "from_expires_at",
    "to_owner",
    "to_token",
    "acquired_at",
    "expires_at",
    "reason",
)
"""Fields of a lock element."""
CHECK_FIELDS = ("operation", "predicate", "outcome", "material")
"""Fields of one recovery check."""


def handoff_ref(name: str, to_token: int) -> str:
    """The handoff's reference (its receipts' ``settlement_id``): unique per takeover."""
    return f"handoff:{name}:{to_token}"


@dataclass(frozen=True)
class Takeover:
    """The takeover every element of one handoff is about (the ``handoff`` section)."""

    name: str
    """The chain or source handed over."""
    chain_id: int
    """The chain's EIP-155 id; 0 for a payment or job source."""
    from_owner: str | None
    """The predecessor instance (None: first owner ever)."""
    from_token: int | None
    """The predecessor's fencing token (None: first owner ever)."""
    to_owner: str
    """The successor instance (the signer's daemon)."""
    to_token: int
    """The successor's fencing token (above ``from_token``)."""
    reason: str
    """One of :data:`REASONS`."""
    at: int
    """When the successor recorded the takeover (ms)."""
    verdict: str
    """The handoff guard's verdict (:class:`guard.handoff.HandoffVerdict`)."""
    decision_digest: str
    """The guard decision's ``sha256:`` digest (binds the verdict to its facts)."""

    def as_json(self) -> dict[str, Any]:
        """The ``handoff`` section."""
        return {
            "name": self.name,
            "from_owner": self.from_owner,
            "from_token": self.from_token,
            "to_owner": self.to_owner,
            "to_token": self.to_token,
            "reason": self.reason,
            "at": self.at,
            "verdict": self.verdict,
            "decision_digest": self.decision_digest,
        }


def handoff_body(
    kind: str, takeover: Takeover, element: Mapping[str, Any], signer: str, issued_at: int
) -> dict[str, Any]:
    """The body of the handoff receipt of ``kind`` carrying ``element``."""
    if kind not in HANDOFF_KINDS:
        raise ValueError(f"kind: {kind!r} is not a handoff element ({', '.join(HANDOFF_KINDS)})")
    ref = handoff_ref(takeover.name, takeover.to_token)
    return {
        "version": FORMAT_VERSION,
        "kind": kind,
        "settlement_id": ref,
        "chain": takeover.name,
        "chain_id": takeover.chain_id,
        "tx_hash": ref_hash(ref),
        "issued_at": issued_at,
        "signer": signer,
        "handoff": takeover.as_json(),
        "element": dict(element),
        "element_digest": digest(element),
    }


# -- verification ------------------------------------------------------------------------------


def verify_handoff(kind: str, body: Mapping[str, Any]) -> tuple[ChainFacts, list[str]]:
    """Check a handoff receipt's body (not its digest and signature); returns what it
    showed and what rests on the signer's word. :class:`ReceiptInvalid` on the first fault."""
    keys(body, (*COMMON, "handoff", "element", "element_digest"), "")
    section = child(body, "handoff", "")
    keys(section, HANDOFF_FIELDS, "handoff")
    name = text(section, "name", "handoff")
    from_token = optional_integer(section, "from_token", "handoff")
    to_token = integer(section, "to_token", "handoff", minimum=1)
    from_owner = _optional_text(section, "from_owner", "handoff")
    to_owner = text(section, "to_owner", "handoff")
    reason = text(section, "reason", "handoff")
    at = integer(section, "at", "handoff")
    verdict = text(section, "verdict", "handoff")
    digest_text(section, "decision_digest", "handoff")
    if reason not in REASONS:
        raise ReceiptInvalid(f"handoff.reason: {reason!r} is not one of {REASONS}")
    if verdict not in {v.value for v in HandoffVerdict}:
        raise ReceiptInvalid(f"handoff.verdict: {verdict!r} is not a handoff verdict")
    if (reason == "first") != (from_token is None):
        raise ReceiptInvalid(
            "handoff.from_token: a first takeover has no predecessor token, any other has one"
        )
    if (from_owner is None) != (from_token is None):
        raise ReceiptInvalid("handoff.from_owner: given without from_token (or the reverse)")
    if from_token is not None and from_token >= to_token:
        raise ReceiptInvalid(
            f"handoff.to_token: {to_token} is not above the predecessor's token {from_token} "
            "(a fencing token only grows)"
        )
    if text(body, "chain", "") != name:
        raise ReceiptInvalid(f"chain: {body.get('chain')!r} is not handoff.name {name!r}")
    ref = handoff_ref(name, to_token)
    if text(body, "settlement_id", "") != ref:
        raise ReceiptInvalid(f"settlement_id: {body.get('settlement_id')!r} is not {ref!r}")
    if body.get("tx_hash") != ref_hash(ref):
        raise ReceiptInvalid(f"tx_hash: is not keccak256 of {ref!r} ({ref_hash(ref)})")
    if integer(body, "issued_at", "") < at:
        raise ReceiptInvalid(f"issued_at: is before the takeover (handoff.at {at})")

    element = child(body, "element", "")
    digest_of(body, "element_digest", "", element, "element")
    if text(element, "name", "element") != name:
        raise ReceiptInvalid(f"element.name: {element.get('name')!r} is not handoff.name {name!r}")
    what, claims = _ELEMENTS[kind](element, section)
    tokens = f"token {from_token}" if from_token is not None else "no token"
    summary = (
        f"handoff of {name!r}: {from_owner or '-'} ({tokens}) -> {to_owner} (token {to_token}), "
        f"{reason} at {at}, verdict {verdict}; {what}"
    )
    return ChainFacts(summary=summary), claims


def _optional_text(m: Mapping[str, Any], key: str, where: str) -> str | None:
    return None if field(m, key, where) is None else text(m, key, where)


def _checkpoint(element: Mapping[str, Any], _section: Mapping[str, Any]) -> tuple[str, list[str]]:
    if element.get("kind") == WORKFLOW_KIND:  # a caller's workflow: its steps
        return verify_workflow_checkpoint(element)
    keys(element, CHECKPOINT_FIELDS, "element")
    for key in CHECKPOINT_FIELDS:
        field(element, key, "element")
    kind = text(element, "kind", "element")
    if kind not in ("chain", "source"):
        raise ReceiptInvalid(f"element.kind: {kind!r} is not 'chain' or 'source'")
    head = optional_integer(element, "head_number", "element")
    if (head is None) != (element.get("head_hash") is None):
        raise ReceiptInvalid("element.head_hash: given without head_number (or the reverse)")
    window = array(element, "header_window", "element")
    for i, entry in enumerate(window):
        if (
            not isinstance(entry, list)
            or len(entry) != 2
            or not isinstance(entry[0], int)
            or not isinstance(entry[1], str)
        ):
            raise ReceiptInvalid(f"element.header_window[{i}]: must be [number, hash]")
    integer(element, "header_window_size", "element")
    verdicts = obj(field(element, "verdicts", "element"), "element.verdicts")
    for verdict in verdicts:
        integer(verdicts, verdict, "element.verdicts")
    watching = integer(element, "watching", "element")
    outbox = integer(element, "outbox_position", "element")
    where = "no head" if head is None else f"head {head} ({element['head_hash']})"
    return (
        f"checkpoint: {where}, {sum(verdicts.values())} settlement(s), {watching} watched, "
        f"outbox position {outbox}",
        [
            "the checkpoint is the store's committed state as the successor read it at "
            "takeover: the signer's word (a node or the store can confirm the head)"
        ],
    )


def _registry(element: Mapping[str, Any], _section: Mapping[str, Any]) -> tuple[str, list[str]]:
    keys(element, ("name", "operations"), "element")
    ops = array(element, "operations", "element")
    seen: set[str] = set()
    for i, value in enumerate(ops):
        where = f"element.operations[{i}]"
        op = obj(value, where)
        op_id = text(op, "id", where)
        text(op, "kind", where)
        if op_id in seen:
            raise ReceiptInvalid(f"{where}.id: {op_id!r} is listed twice")
        seen.add(op_id)
    return (
        f"in-flight registry: {len(ops)} operation(s)",
        ["the registry lists what the store showed started and not finished: the signer's word"],
    )


def _lock(element: Mapping[str, Any], section: Mapping[str, Any]) -> tuple[str, list[str]]:
    keys(element, LOCK_FIELDS, "element")
    for key in ("from_owner", "from_token", "to_owner", "to_token", "reason"):
        if field(element, key, "element") != section[key]:
            raise ReceiptInvalid(
                f"element.{key}: {element.get(key)!r} is not handoff.{key} {section[key]!r}"
            )
    optional_integer(element, "from_expires_at", "element")
    acquired = integer(element, "acquired_at", "element")
    expires = integer(element, "expires_at", "element")
    if expires <= acquired:
        raise ReceiptInvalid(f"element.expires_at: {expires} is not after acquired_at {acquired}")
    fence = (
        "a workflow's write under any other token was refused by the watcher from the "
        "takeover on (the signer's word)"
        if str(section["name"]).startswith(WORKFLOW_PREFIX)
        else "a write with a lower token was refused by the store from the takeover on (the "
        "signer's word; fencing_rejections records refusals)"
    )
    return (
        f"lease token {section['to_token']} held from {acquired} until {expires} unless renewed",
        [f"the lease row is the store's: {fence}"],
    )


def _recovery(element: Mapping[str, Any], _section: Mapping[str, Any]) -> tuple[str, list[str]]:
    keys(element, ("name", "checks"), "element")
    checks = array(element, "checks", "element")
    material = 0
    for i, value in enumerate(checks):
        where = f"element.checks[{i}]"
        check = obj(value, where)
        keys(check, CHECK_FIELDS, where)
        text(check, "operation", where)
        text(check, "predicate", where)
        text(check, "outcome", where)
        flag = field(check, "material", where)
        if not isinstance(flag, bool):
            raise ReceiptInvalid(f"{where}.material: must be true or false")
        material += flag
    return (
        f"recovery: {len(checks)} check(s), {material} with a material partial effect",
        ["each recovery outcome is what the successor found when it ran the check: its word"],
    )


_ELEMENTS = {
    CHECKPOINT: _checkpoint,
    REGISTRY: _registry,
    LOCK: _lock,
    RECOVERY: _recovery,
}
