"""What several routers show the same way: a settlement with its receipt parts, a
chain's endpoints, and the lookups they start from (a configured chain, its head)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from chains.beacon import BeaconClient
from chains.redact import redact_text, redact_url
from guard.settlement import TERMINAL_VERDICTS, Verdict
from watcher.api.deps import ApiDeps
from watcher.api.errors import ApiError
from watcher.api.recorded_heads import HeadsOnce, recorded_head
from watcher.config.chains import ChainConfig
from watcher.config.errors import UnknownChainName
from watcher.config.secrets import configured_secrets
from watcher.delivery.format import event_json
from watcher.receipts.attestation import attests_only
from watcher.receipts.consensus import beacon_clients
from watcher.settlements import settlement_view
from watcher.store import SettlementNotFound, SettlementRecord
from watcher.store.receipts_store import receipt_store

RECEIPT_WAIT_S = 3.0
"""How long ``GET …/receipt`` without ``?wait=`` waits for the receipt of a verdict that just
committed (a settlement not terminal yet is answered 404 at once)."""

RECEIPT_WAIT_MAX_S = 60.0
"""The longest ``?wait=`` of ``GET …/receipt``: a waiting read is one sleeping task, but a
connection held longer than a minute is one that proxies and load balancers cut."""

REREAD_OWN_S = 1.0
"""While waiting for a receipt this instance builds (it holds the chain's lease, or there
are no leases), the store is re-read this often at most: each stored batch wakes the wait."""

REREAD_OTHERS_S = 0.05
"""While waiting for a receipt another instance builds (it holds the lease), the store is
re-read this often: its batches wake nothing here."""


def chain_or_error(deps: ApiDeps, name: str, status: int = 404) -> ChainConfig:
    """The configured chain ``name``; an :class:`ApiError` listing the known ones if none."""
    try:
        return deps.config.chain(name)
    except UnknownChainName:
        known = [c.name for c in deps.config.chains]
        raise ApiError(
            status,
            f"chain: unknown chain {name!r}; known chains: {', '.join(known)}",
            fields=["chain"],
            known_chains=known,
        ) from None


def settlement_or_error(
    deps: ApiDeps, settlement_id: str, owner: str | None = None
) -> SettlementRecord:
    """The stored settlement (``owner``'s: another caller's is answered as missing, so its
    existence is not revealed); a 404 :class:`ApiError` if there is none."""
    try:
        return deps.store.settlement(settlement_id, owner=owner)
    except SettlementNotFound:
        raise ApiError(404, f"settlement_id: no settlement {settlement_id!r}") from None


def beacon_of(deps: ApiDeps, chain: str) -> BeaconClient | None:
    """The chain's Beacon API client, when its receipts carry a consensus section."""
    return None if deps.receipts is None else beacon_clients(deps.receipts.builders).get(chain)


def head_of(deps: ApiDeps, chain: str) -> int | None:
    """The chain's head as its owner recorded it (not this instance's tracker)."""
    return recorded_head(deps.store, chain)


def latest_signed(deps: ApiDeps, settlement_id: str) -> dict[str, Any] | None:
    """The latest decision receipt no revocation withdraws (None if not signed yet)."""
    record = receipt_store(deps.store).latest(settlement_id)
    return None if record is None else record.body


def reread_s(deps: ApiDeps, chain: str) -> float:
    """How often a wait for a receipt of ``chain`` re-reads the store: rarely when this
    instance builds it (its batches wake the wait), often when another instance does."""
    return REREAD_OWN_S if deps.handoff.owns(chain) else REREAD_OTHERS_S


def binding_for(deps: ApiDeps, rec: SettlementRecord) -> dict[str, Any] | None:
    """The binding receipt of a registration (made now if missing); None without dependent
    state or without a receipts component."""
    if rec.dependent_state is None or deps.receipts is None:
        return None
    return deps.receipts.binding(rec)


def view_parts(deps: ApiDeps, rec: SettlementRecord) -> dict[str, Any]:
    """The ``receipt``, ``binding`` and ``notes`` arguments of ``settlement_view`` for
    ``rec``."""
    receipt = latest_signed(deps, rec.settlement_id) if rec.verdict in TERMINAL_VERDICTS else None
    return {"receipt": receipt, "binding": binding_for(deps, rec), "notes": node_notes(deps, rec)}


def node_notes(deps: ApiDeps, rec: SettlementRecord) -> dict[str, str]:
    """What a settlement's view says about the node data it rests on, when there is
    something to say: ``waiting`` (why it cannot progress now: its chain's polls fail, e.g.
    the node's data did not check out and no other endpoint is left) and ``attestation``
    (its chain's headers cannot be re-hashed, so its verdict rests on the node's word: the
    receipt signs that word, it cannot prove it)."""
    try:
        chain = deps.config.chain(rec.chain)
    except UnknownChainName:
        return {}  # an off-chain source's settlement
    notes: dict[str, str] = {}
    reason = attests_only(chain.chain_id)
    if reason is not None:
        notes["attestation"] = reason
    error = (
        deps.status(rec.chain).health.last_error if rec.verdict not in TERMINAL_VERDICTS else None
    )
    if error is not None:
        shown = shown_error(error, configured_secrets(deps.config))
        notes["waiting"] = f"the chain is not followed now, nothing on it can progress: {shown}"
    return notes


def chain_settlement_view(
    deps: ApiDeps, rec: SettlementRecord, heads: Callable[[str], int | None] | None = None
) -> dict[str, Any]:
    """A chain settlement's view, at its chain's recorded head, with its receipt parts, as of
    now. ``heads``: the head already read (a ``HeadsOnce`` of a batch, or the head read with
    the row); without it the head is read from the store."""
    head = heads(rec.chain) if heads is not None else head_of(deps, rec.chain)
    finalized = finalized_for(deps, rec, heads)
    return settlement_view(
        rec, head, **view_parts(deps, rec), now=deps.clock(), finalized=finalized
    )


def waits_on_finalized(rec: SettlementRecord) -> bool:
    """Whether the view says how far the chain's ``finalized`` block is (an included tx,
    still waiting, under a rule that uses the tag)."""
    return (
        rec.finality_mode not in ("depth", "safe")
        and rec.verdict == Verdict.AWAITING_FINALITY
        and rec.block_number is not None
    )


def finalized_for(
    deps: ApiDeps, rec: SettlementRecord, heads: Callable[[str], int | None] | None = None
) -> int | None:
    """The chain's recorded ``finalized`` block, read only when the view says it (from a
    page's or batch's one read of the chains when ``heads`` is that read)."""
    if not waits_on_finalized(rec):
        return None
    if isinstance(heads, HeadsOnce):
        return heads.finalized(rec.chain)
    record = deps.store.chain(rec.chain)
    return None if record is None else record.finalized_number


def endpoints(urls: list[str], health: list[dict[str, object]] | None) -> list[dict[str, object]]:
    """The chain's endpoints (redacted), with each one's health when there are several."""
    if health is None:
        return [{"endpoint": redact(url)} for url in urls]
    return [{**h, "endpoint": redact(url)} for url, h in zip(urls, health, strict=True)]


def redact(url: str) -> str:
    """Hide credentials and API keys in an endpoint URL (the one redaction, chains/redact)."""
    return redact_url(url)


def shown_error(text: str | None, secrets: Sequence[str]) -> str | None:
    """An error text as an answer may show it: scrubbed of the configured URLs and secrets
    (chains/redact; the chain errors are redacted where they are made, this is the net)."""
    return None if text is None else redact_text(text, secrets)


def shown_event(event: Any, secrets: Sequence[str]) -> dict[str, Any]:
    """An event as the API answers it (``event_json``), its payload scrubbed of the
    configured URLs and secrets when it holds one: events are redacted where they are
    made, but rows stored by older versions carry a failing endpoint's full URL."""
    shown = event_json(event)
    if secrets:
        text = json.dumps(shown["payload"])
        if any(secret in text for secret in secrets):
            shown["payload"] = _scrubbed(shown["payload"], secrets)
    return shown


def _scrubbed(value: Any, secrets: Sequence[str]) -> Any:
    """``value`` with every string in it scrubbed (keys included)."""
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {_scrubbed(k, secrets): _scrubbed(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(v, secrets) for v in value]
    return value
