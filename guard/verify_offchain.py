"""Decision receipts about a payment or job source (Stripe, RQ, Celery): no chain behind them.

Such a receipt has ``chain_id`` 0, ``tx_hash`` = keccak256 of the source's reference, and
an ``offchain`` section instead of ``finality`` and ``proof``. What is checked offline:

* the section's shape, and that it names the receipt's own source (``chain``), reference
  (``tx_hash``) and decision digest;
* the **decision digest**: recomputed from the verdict, the settlement id, the terms
  (``initiated_at``, ``timeout_ms``, ``deadline``), the evidence and any late finality, so no
  fact of the evidence can be changed;
* the **objects digest**: recomputed from the objects carried, and both the objects and the
  event ids must be those the evidence recorded;
* for a timeout, that it was not issued before the deadline; the history ends at this
  decision.

What the source reported (Stripe said the payment succeeded and its balance transaction is
available; RQ said the job finished) is the processor's word as the watcher recorded it: it
is returned as claims, never as proof.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from guard import receipts as fmt
from guard.canonical import CanonicalError, digest
from guard.errors import ReceiptInvalid
from guard.fields import (
    array,
    child,
    digest_text,
    field,
    integer,
    keys,
    obj,
    strings,
    text,
)
from guard.source import objects_digest
from guard.verify_chain import ChainFacts
from guard.verify_terms import COMMON, DECIDED, offchain_subject

SECTION = (
    "type",
    "source_kind",
    "source",
    "ref",
    "decision_digest",
    "initiated_at",
    "timeout_ms",
    "deadline",
    "event_ids",
    "objects",
    "objects_digest",
    "history",
)
"""Fields of the ``offchain`` section."""
HISTORY = ("event", "at", "verdict", "decision_digest", "evidence_kind")
"""Fields of one ``offchain.history`` entry."""
STATUS_FACTS = ("status", "charge_status", "balance_status", "state", "exc_type")
"""Evidence facts that are the source's own statement of where things stand."""


def verify_offchain(
    kind: str, body: Mapping[str, Any], state: str | None
) -> tuple[ChainFacts, list[str]]:
    """A finality, failure or timeout receipt about a source settlement."""
    extra = ("late_finality",) if kind == fmt.TIMEOUT else ()
    keys(body, (*COMMON, *DECIDED, *extra, "offchain"), "")
    if integer(body, "chain_id", "") != fmt.OFFCHAIN_CHAIN_ID:
        raise ReceiptInvalid(
            f"chain_id: an off-chain receipt has chain id {fmt.OFFCHAIN_CHAIN_ID}, "
            f"not {body.get('chain_id')}"
        )
    off = child(body, "offchain", "")
    keys(off, SECTION, "offchain")
    source_kind, source, ref = offchain_subject(body, off)
    decision_digest = digest_text(body, "decision_digest", "") or ""  # never None: not nullable
    if digest_text(off, "decision_digest", "offchain") != decision_digest:
        raise ReceiptInvalid("offchain.decision_digest: is not the receipt's decision_digest")
    evidence, late, deadline = _verify_decision_digest(kind, body, off, decision_digest)
    facts = _facts(evidence)
    for key, value in (("source", source), ("source_kind", source_kind), ("ref", ref)):
        if key in facts and facts[key] != value:
            raise ReceiptInvalid(
                f"evidence.facts.{key}: {facts[key]!r} is not offchain.{key} {value!r}"
            )

    event_ids, actual = _verify_recorded(off, facts)
    _history(off, decision_digest)
    if kind == fmt.TIMEOUT and integer(body, "issued_at", "") < deadline:
        raise ReceiptInvalid(f"issued_at: is before the deadline {deadline}")

    what = "no evidence" if evidence is None else str(obj(evidence, "evidence").get("kind"))
    summary = (
        f"{source_kind} {source!r} ref {ref}: {what}, {len(event_ids)} event id(s), "
        f"objects {actual}"
    )
    return (
        ChainFacts(summary=summary, dependent_state_digest=state),
        _claims(source_kind, source, ref, evidence, facts, event_ids, late),
    )


def _verify_decision_digest(
    kind: str, body: Mapping[str, Any], off: Mapping[str, Any], decision_digest: str
) -> tuple[Any, Any, int]:
    """(evidence, late finality, deadline), once the decision's digest is recomputed from
    the verdict, the registration terms in ``off`` and the evidence (a finality or failure
    receipt must carry its evidence)."""
    initiated = integer(off, "initiated_at", "offchain")
    timeout_ms = integer(off, "timeout_ms", "offchain")
    deadline = integer(off, "deadline", "offchain")

    evidence = field(body, "evidence", "")
    late = body.get("late_finality") if kind == fmt.TIMEOUT else None
    if evidence is None and kind != fmt.TIMEOUT:
        raise ReceiptInvalid(
            "evidence: a finality or failure receipt needs the decision's evidence"
        )
    if late is not None:
        obj(late, "late_finality")
    bound = fmt.decision_bound(
        str(body["verdict"]),
        text(body, "settlement_id", ""),
        initiated,
        timeout_ms,
        deadline,
        evidence,
        late,
    )
    try:
        recomputed = digest(bound)
    except CanonicalError as exc:
        raise ReceiptInvalid(f"evidence: has no canonical JSON form: {exc}") from exc
    if recomputed != decision_digest:
        raise ReceiptInvalid(
            f"decision_digest: {decision_digest} does not match the verdict, terms and "
            f"evidence ({recomputed})"
        )
    return evidence, late, deadline


def _verify_recorded(off: Mapping[str, Any], facts: Mapping[str, Any]) -> tuple[list[str], str]:
    """(event ids, objects' digest), once both are shown to be what the evidence recorded
    and the objects hash to ``objects_digest``."""
    event_ids = strings(off, "event_ids", "offchain")
    if event_ids != list(facts.get("event_ids") or []):
        raise ReceiptInvalid("offchain.event_ids: are not the event ids the evidence recorded")
    objects = obj(field(off, "objects", "offchain"), "offchain.objects")
    claimed = digest_text(off, "objects_digest", "offchain")
    try:
        actual = objects_digest(objects)
    except CanonicalError as exc:
        raise ReceiptInvalid(f"offchain.objects: have no canonical JSON form: {exc}") from exc
    if claimed != actual:
        raise ReceiptInvalid(
            f"offchain.objects_digest: {claimed} does not match the objects ({actual})"
        )
    if dict(objects) != fmt.offchain_objects(facts):
        raise ReceiptInvalid("offchain.objects: are not the objects the evidence recorded")
    if "objects_digest" in facts and facts["objects_digest"] != actual:
        raise ReceiptInvalid(
            f"evidence.facts.objects_digest: {facts['objects_digest']!r} is not the objects' "
            f"digest ({actual})"
        )
    return event_ids, actual


def _facts(evidence: object) -> Mapping[str, Any]:
    if evidence is None:
        return {}
    facts = obj(evidence, "evidence").get("facts")
    return obj(facts, "evidence.facts")


def _history(off: Mapping[str, Any], decision_digest: str) -> None:
    entries = array(off, "history", "offchain", min_length=1)
    for i, value in enumerate(entries):
        where = f"offchain.history[{i}]"
        entry = obj(value, where)
        keys(entry, HISTORY, where)
        text(entry, "event", where)
        integer(entry, "at", where)
    last = entries[-1]
    if last.get("decision_digest") != decision_digest:
        raise ReceiptInvalid("offchain.history: does not end with this receipt's decision")


def _claims(
    source_kind: str,
    source: str,
    ref: str,
    evidence: object,
    facts: Mapping[str, Any],
    event_ids: list[str],
    late: object,
) -> list[str]:
    """What the receipt states on the processor's word (and the watcher's record of it)."""
    if evidence is None:
        return [f"{source_kind} {source!r} never reported {ref}: the watcher's record"]
    ev = obj(evidence, "evidence")
    said = ", ".join(f"{k} {facts[k]}" for k in STATUS_FACTS if facts.get(k) is not None)
    claims = [
        f"{source_kind} {source!r} reported {ref} as {ev.get('kind')}"
        + (f" ({said})" if said else "")
        + f" at {ev.get('observed_at')}: the processor's word as the watcher recorded it, "
        "not proven by this receipt"
    ]
    if event_ids:
        claims.append(
            f"events {', '.join(event_ids)} were received from {source!r}: the watcher's record"
        )
    if isinstance(facts.get("objects"), Mapping):
        claims.append(
            "offchain.objects holds one digest per source object: whoever holds an object can "
            "recompute its digest; the objects' contents are the processor's word"
        )
    if late is not None:
        claims.append(f"{source!r} reported finality after the deadline: reconcile")
    return claims
