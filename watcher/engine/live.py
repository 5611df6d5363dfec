"""Answering "is this tx final?" for a hash nobody registered, straight from the chain.

One batched request (tx, receipt, latest header, and the ``finalized`` header when the
chain's policy uses it) gives everything the guard needs. Nothing is stored: an unregistered
hash stays unregistered.

The API waits for it at most ``[api] live_lookup_timeout_s`` (:func:`live_view_within`): a
stalled node held a request past 10 s (its own RPC timeout, then failover). The look-up
runs on a small pool of its own, so stalled look-ups cannot take every API thread; one past
its limit is answered by :func:`timed_out_view` (what the store knows: the recorded head).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from chains.finality_modes import NEEDS_SAFE
from chains.models import BlockHeader, TxInfo, TxReceipt
from chains.rpc import RpcClient
from guard.settlement import (
    Observation,
    Settlement,
    SettlementPolicy,
    Verdict,
    decision_as_json,
    evaluate_settlement,
)
from guard.types import SettlementId, UnixMillis
from watcher.config.chains import ChainConfig
from watcher.engine.observe import ChainPosition, observe
from watcher.settlements import depth_of, settlement_id_for

LOOKUP_THREADS = 4
"""Live look-ups running at once; more wait their turn (within their time limit)."""

_lookups = ThreadPoolExecutor(max_workers=LOOKUP_THREADS, thread_name_prefix="live-lookup")


class LiveTimeout(Exception):
    """The node did not answer a live look-up within its time limit."""


@dataclass(frozen=True)
class LiveTx:
    """An unregistered tx as the node shows it now (a :class:`watcher.engine.observe.TrackedTx`).

    A live look-up cannot see a replacement: that needs the sender's nonce followed over
    blocks, which only a registered settlement gets."""

    chain: str
    tx_hash: str
    required_confirmations: int
    finality_mode: str
    sender: str | None
    nonce: int | None
    block_number: int | None
    block_hash: str | None
    tx_index: int | None
    receipt_status: int | None
    replaced_by: str | None = None
    replaced_block_number: int | None = None
    replaced_block_hash: str | None = None


def live_view(
    client: RpcClient, chain: ChainConfig, tx_hash: str, confirmations: int | None, now: int
) -> dict[str, Any]:
    """The settlement view of an unregistered tx, computed from the node right now."""
    required = confirmations or chain.resolved_confirmations
    tx, receipt, head, finalized, safe = _ask(client, chain, tx_hash)
    sid = settlement_id_for(chain.name, tx_hash)
    looked_up = LiveTx(
        chain=chain.name,
        tx_hash=tx_hash,
        required_confirmations=required,
        finality_mode=chain.resolved_finality,
        sender=tx.sender if tx else None,
        nonce=tx.nonce if tx else None,
        block_number=receipt.block_number if receipt else None,
        block_hash=receipt.block_hash if receipt else None,
        tx_index=receipt.tx_index if receipt else None,
        receipt_status=receipt.status if receipt else None,
    )
    timeout_ms = int(chain.max_wait_s * 1000)
    known = tx is not None or receipt is not None
    settlement = Settlement(SettlementId(sid), known, UnixMillis(now), timeout_ms)
    position = ChainPosition(head.number, head.hash, finalized, safe_number=safe)
    observation = observe(looked_up, position, now) if known else Observation()
    policy = SettlementPolicy(max_wait_ms=timeout_ms)
    decision = evaluate_settlement(settlement, observation, policy, UnixMillis(now))
    directive = decision.directive
    if not known:
        directive = f"UNKNOWN: the node of chain {chain.name!r} does not know tx {tx_hash}."
    return {
        "settlement_id": None,
        "registered": False,
        "chain": chain.name,
        "tx_hash": tx_hash,
        "verdict": decision.verdict.value,
        "directive": directive,
        "block_number": looked_up.block_number,
        "block_hash": looked_up.block_hash,
        "status": looked_up.receipt_status,
        "confirmations": depth_of(looked_up.block_number, head.number),
        "required_confirmations": required,
        "finality_mode": looked_up.finality_mode,
        "head_number": head.number,
        "reorg_count": 0,
        "replaced_by": None,
        "digest": decision.digest,
        "evidence": decision_as_json(decision)["evidence"],
        "receipt": None,
    }


def live_view_within(
    timeout_s: float,
    client: RpcClient,
    chain: ChainConfig,
    tx_hash: str,
    confirmations: int | None,
    now: int,
) -> dict[str, Any]:
    """:func:`live_view`, or :class:`LiveTimeout` after ``timeout_s`` (the look-up finishes
    in the background, bounded by the RPC client's own timeout)."""
    future = _lookups.submit(live_view, client, chain, tx_hash, confirmations, now)
    try:
        return future.result(timeout=timeout_s)
    except TimeoutError:
        future.cancel()  # still queued: never runs
        raise LiveTimeout(
            f"the live check of chain {chain.name!r} timed out after {timeout_s:g} s"
        ) from None


def timed_out_view(
    chain: ChainConfig,
    tx_hash: str,
    confirmations: int | None,
    head_number: int | None,
    why: str,
) -> dict[str, Any]:
    """What the store knows of an unregistered tx when the node did not answer in time: no
    settlement, the recorded head; ``live_check`` says the check timed out (``NO_SETTLEMENT``
    here means "not seen", never "does not exist")."""
    return {
        "settlement_id": None,
        "registered": False,
        "chain": chain.name,
        "tx_hash": tx_hash,
        "verdict": Verdict.NO_SETTLEMENT,
        "directive": f"UNKNOWN: {why} (the node is slow or stalled); no settlement is "
        "registered for this tx: retry, or register it to have it watched.",
        "block_number": None,
        "block_hash": None,
        "status": None,
        "confirmations": 0,
        "required_confirmations": confirmations or chain.resolved_confirmations,
        "finality_mode": chain.resolved_finality,
        "head_number": head_number,
        "reorg_count": 0,
        "replaced_by": None,
        "digest": None,
        "evidence": None,
        "receipt": None,
        "live_check": "timed_out",
    }


def lookup_cost(chain: ChainConfig) -> int:
    """The JSON-RPC calls one live look-up on ``chain`` makes (what its budget counts)."""
    return len(_calls(chain, ""))


def _calls(chain: ChainConfig, tx_hash: str) -> list[tuple[str, list[Any]]]:
    """The batch of a look-up: tx, receipt, head, and the chain's tag unless depth only."""
    calls: list[tuple[str, list[Any]]] = [
        ("eth_getTransactionByHash", [tx_hash]),
        ("eth_getTransactionReceipt", [tx_hash]),
        ("eth_getBlockByNumber", ["latest", False]),
    ]
    if chain.resolved_finality != "depth":
        tag = "safe" if chain.resolved_finality in NEEDS_SAFE else "finalized"
        calls.append(("eth_getBlockByNumber", [tag, False]))
    return calls


def _ask(
    client: RpcClient, chain: ChainConfig, tx_hash: str
) -> tuple[TxInfo | None, TxReceipt | None, BlockHeader, int | None, int | None]:
    """One batch: the tx, its receipt, the head and (unless the chain uses depth only) its
    ``finalized`` or ``safe`` tag. Returns (tx, receipt, head, finalized, safe)."""
    tag = "safe" if chain.resolved_finality in NEEDS_SAFE else "finalized"
    raw = client.batch(_calls(chain, tx_hash))
    tx = None if raw[0] is None else client.parse_tx_info(raw[0])
    receipt = None if raw[1] is None else client.parse_receipt(raw[1], "eth_getTransactionReceipt")
    head = client.parse_block(raw[2], "eth_getBlockByNumber").header
    tagged = None
    if len(raw) > 3 and raw[3] is not None:
        tagged = client.parse_block(raw[3], "eth_getBlockByNumber").header.number
    finalized, safe = (None, tagged) if tag == "safe" else (tagged, None)
    return tx, receipt, head, finalized, safe
