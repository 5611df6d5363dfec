"""What goes over the wire: delivery bodies, their exact bytes, and their signature.

Every request the sender makes is a ``POST`` with a JSON body and these headers (the
receiver's side is described in ``docs/delivery.md``)::

    Content-Type:          application/json
    webhook-id:            fw:stl_…:commit          Standard Webhooks: the idempotency key
    webhook-timestamp:     1700000000               Unix seconds when this attempt was sent
    webhook-signature:     v1,<base64>              HMAC-SHA256(key, id + "." + timestamp + "." + body)
    Idempotency-Key:       fw:stl_…:commit          same for every attempt, across restarts
    X-Finality-Event:      commit | discard | finality_violation | provisional | alert kind
    X-Finality-Delivery:   42                       the outbox row id
    X-Finality-Attempt:    1, 2, …
    X-Finality-Timestamp:  1700000000               (deprecated) same as webhook-timestamp
    X-Finality-Signature:  v1=<hex>                 (deprecated) HMAC-SHA256(secret, timestamp + "." + body)

The ``webhook-*`` headers follow Standard Webhooks (standardwebhooks.com), so a receiver
verifies with its language's library: ``[delivery] secret = "whsec_<base64>"`` is the key
those libraries take (the base64 bytes after ``whsec_``; a secret without the prefix is its
UTF-8 bytes). ``X-Finality-Signature`` is the scheme of earlier releases, kept for one release
for receivers that check it. Both signature headers are absent when no secret is configured
(the daemon warns once at start): receivers must then not trust the body without another
check (the signed receipt inside a commit, or a TLS client certificate).

The body bytes are a pure function of the stored body (sorted keys, no white space), so
every retry, and every retry after a restart, sends the very same bytes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any

from guard.event_kinds import EventKind
from guard.receipt_format import BINDING, VERDICT_KIND
from guard.settlement import Verdict
from watcher.config.webhook_secret import webhook_key
from watcher.store import SettlementRecord
from watcher.store.outbox_store import DeliveryRecord, ReceiptRow

BODY_VERSION = 1
"""Bumped on an incompatible change of the body layout."""

SIGNATURE_VERSION = "v1"
"""Prefix of the signature value; a new scheme would get a new prefix, sent beside it."""


RECEIPT_KINDS = VERDICT_KIND
"""The signed receipt each terminal verdict's delivery carries."""

BINDING_RECEIPT_KIND = BINDING
"""The receipt binding the dependent state to the settlement (made at registration)."""

SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}
"""Severities in order, for ``min_severity`` filters."""

EVENT_KINDS = tuple(EventKind)
"""Every event kind the daemon emits (alerts filter on these)."""


def body_bytes(body: dict[str, Any]) -> bytes:
    """The exact bytes sent for ``body``: sorted keys, compact, UTF-8."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """(deprecated scheme) ``v1=`` + hex HMAC-SHA256 of ``b"<timestamp>." + body``."""
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return f"{SIGNATURE_VERSION}={mac.hexdigest()}"


def standard_signature(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    """Standard Webhooks' ``v1,`` + base64 HMAC-SHA256 of ``id.timestamp.body`` under ``key``."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    mac = hmac.new(key, signed, hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(mac).decode()}"


def headers(rec: DeliveryRecord, body: bytes, secret: str | None, now_s: int) -> dict[str, str]:
    """The headers of one attempt of ``rec`` (see the module doc)."""
    out = {
        "Content-Type": "application/json",
        "User-Agent": "finality-watcher/1",
        "webhook-id": rec.idempotency_key,
        "webhook-timestamp": str(now_s),
        "Idempotency-Key": rec.idempotency_key,
        "X-Finality-Event": rec.kind,
        "X-Finality-Delivery": str(rec.id),
        "X-Finality-Attempt": str(rec.attempts),
        "X-Finality-Timestamp": str(now_s),
    }
    if secret:
        key = webhook_key(secret)
        out["webhook-signature"] = standard_signature(key, rec.idempotency_key, now_s, body)
        out["X-Finality-Signature"] = signature(secret, now_s, body)
    return out


def event_json(event: Any) -> dict[str, Any]:
    """An event (``EventRecord`` or the same fields) as the alert body and SSE data carry it."""
    return {
        "id": event.id,
        "chain": event.chain,
        "settlement_id": event.settlement_id,
        "kind": event.kind,
        "severity": event.severity,
        "payload": event.payload,
        "created_at": event.created_at,
    }


def settlement_part(rec: SettlementRecord) -> dict[str, Any]:
    """The settlement facts every commit-channel body repeats."""
    return {
        "settlement_id": rec.settlement_id,
        "chain": rec.chain,
        "tx_hash": rec.tx_hash,
        "required_confirmations": rec.required_confirmations,
    }


def provisional_body(
    rec: SettlementRecord,
    stage: str,
    head_number: int,
    head_hash: str,
    now: int,
    confirmations: int,
    reorg: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A pre-finality update (the caller asked for them): always ``"provisional": true``."""
    return {
        "type": "provisional",
        "version": BODY_VERSION,
        "provisional": True,
        "stage": stage,
        **settlement_part(rec),
        "verdict": Verdict.AWAITING_FINALITY.value,
        "block_number": rec.block_number if stage != "reorged_out" else None,
        "block_hash": rec.block_hash if stage != "reorged_out" else None,
        "confirmations": confirmations,
        "head_number": head_number,
        "head_hash": head_hash,
        "observed_at": now,
        "reorg": reorg,
        "note": "reversible: do not commit irreversible state on a provisional update",
    }


def receipt_json(row: ReceiptRow | None) -> dict[str, Any] | None:
    """A stored receipt as bodies carry it: the signed document and where it came from."""
    if row is None:
        return None
    return {
        "kind": row.kind,
        "signer": row.signer,
        "digest": row.digest,
        "receipt": row.body,
    }


def terminal_body(
    rec: DeliveryRecord,
    settlement: SettlementRecord,
    decision: dict[str, Any],
    receipt: ReceiptRow | None,
    binding: ReceiptRow | None,
    unavailable: str | None = None,
) -> dict[str, Any]:
    """The body of a ``commit`` or ``discard``: the verdict, the state, and the receipt
    (None only for a decision that has none by design, ``unavailable`` saying why)."""
    body: dict[str, Any] = {
        "type": rec.kind,
        "version": BODY_VERSION,
        "provisional": False,
        "delivery_id": rec.id,
        "idempotency_key": rec.idempotency_key,
        **settlement_part(settlement),
        "verdict": decision.get("verdict"),
        "directive": decision.get("directive"),
        "decision": decision,
        "dependent_state": settlement.dependent_state,
        "binding": receipt_json(binding),
        "receipt": receipt_json(receipt),
        "receipt_unavailable": unavailable,
    }
    return body


def violation_directive(settlement_id: str, block: dict[str, Any] | None, now_verdict: str) -> str:
    """What a receiver of a ``finality_violation`` should do, in one paragraph."""
    where = (
        f"block {block.get('number')} ({block.get('hash')})"
        if block and block.get("number") is not None
        else "a decision"
    )
    return (
        f"HOLD OR COMPENSATE: the commit you applied for settlement {settlement_id} "
        f"(Idempotency-Key fw:{settlement_id}:commit) rests on {where}, which is no longer "
        f"in the chain (the settlement is now {now_verdict}); its finality receipt is revoked. "
        "Hold or compensate the dependent state you applied. If the settlement is confirmed "
        f"again, a new commit follows under the same Idempotency-Key fw:{settlement_id}:commit "
        "(a no-op if you applied it; its new receipt is the signal to release a hold); if it "
        f"fails or times out, a discard (fw:{settlement_id}:discard) follows. If you never "
        "applied that commit (it was in flight when the reorg came), there is nothing to undo."
    )


def reorg_part(reorg: Any, block: dict[str, Any] | None) -> dict[str, Any] | None:
    """The reorg of a violation (a ``ReorgRecord``) as the body carries it, with the block
    the commit rested on and what replaced it at that height."""
    if reorg is None:
        return None
    number = (block or {}).get("number")
    replaced_at = next((b for b in reorg.replaced if b.get("number") == number), None)
    return {
        "reorg_id": reorg.id,
        "depth": reorg.depth,
        "common_ancestor": {"number": reorg.ancestor_number, "hash": reorg.ancestor_hash},
        "old_head": {"number": reorg.old_head_number, "hash": reorg.old_head_hash},
        "new_head": {"number": reorg.new_head_number, "hash": reorg.new_head_hash},
        "replaced": reorg.replaced,
        "commit_block": block,
        "replaced_by": None if replaced_at is None else replaced_at.get("new_hash"),
        "detected_at": reorg.detected_at,
    }


def violation_body(
    rec: DeliveryRecord,
    settlement: SettlementRecord,
    event: dict[str, Any],
    reorg: dict[str, Any] | None,
    revoked: ReceiptRow | None,
    revocation: ReceiptRow | None,
    binding: ReceiptRow | None,
    missing_reason: str | None,
) -> dict[str, Any]:
    """The body of a ``finality_violation`` sent to a ``commit_url`` (``docs/delivery.md``):
    the commit the receiver may have applied lost its ground; what happened, the signed
    revocation, and what to do."""
    payload = event["payload"]
    previous = payload.get("previous") or {}
    now = payload.get("now") or {}
    facts = (previous.get("evidence") or {}).get("facts") or {}
    block = (
        {"number": facts.get("block_number"), "hash": facts.get("block_hash")}
        if "block_number" in facts
        else None
    )
    sid = settlement.settlement_id
    return {
        "type": EventKind.FINALITY_VIOLATION.value,
        "version": BODY_VERSION,
        "provisional": False,
        "delivery_id": rec.id,
        "idempotency_key": rec.idempotency_key,
        **settlement_part(settlement),
        "violation_event_id": event["id"],
        "detected_at": event["created_at"],
        "commit_idempotency_key": f"fw:{sid}:commit",
        "verdict": now.get("verdict"),
        "directive": violation_directive(sid, block, str(now.get("verdict"))),
        "reversed_decision": previous,
        "decision": now,
        "commit_block": block,
        "reorg": reorg,
        "revoked_receipt_digest": None if revoked is None else revoked.digest,
        "revocation": receipt_json(revocation),
        "revocation_missing": None if revocation is not None else missing_reason,
        "dependent_state": settlement.dependent_state,
        "binding": receipt_json(binding),
    }
