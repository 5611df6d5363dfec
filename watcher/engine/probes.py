"""Looking watched txs up by hash at the fewest calls: what the engine's probe asks the node.

A probe learns a new settlement's sender and nonce (replacement is provable only while the
tx is pending) and finds a tx already included before it was registered. Done naively that
is three calls per tx: ``eth_getTransactionByHash``, then ``eth_getRawTransactionByHash``
(pending) or ``eth_getTransactionReceipt`` (included). Here it is one per tx plus one per
block:

* the signed bytes of a pending tx are rebuilt from the tx object the lookup returned
  (guard/tx_encode.py, checked against its hash); only a tx that cannot be rebuilt is
  fetched raw;
* the receipts of included txs come per block, from the engine's held
  ``eth_getBlockReceipts`` answer or one such call per block (which the receipt builder then
  proves from);
* a registration that gave ``sender`` and ``nonce`` (or ``raw_tx``) is not looked up at
  all: its tx is found by hash in the blocks the tracker holds, else block scanning finds
  it when it is mined;
* a tx registered by its hash alone after the block that includes it was followed is not
  asked either: the tracker fetched that block with its tx objects, which are what
  ``eth_getTransactionByHash`` would answer (:func:`held_tx_objects`: only a block the
  engine's window holds as canonical). Half the registrations of a load that registers
  after mining cost no call.

Several settlements of one tx (one per caller that registered it) are asked about once:
every call here takes the distinct hashes (:func:`per_hash`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from chains.block_checks import checked_receipts, sender_mismatch
from chains.block_facts import BlockFacts
from chains.models import TxInfo, TxReceipt
from chains.rpc import RpcClient
from chains.tracker import HeaderWindow
from chains.transport import Call
from guard import rlp
from guard.tx_encode import encode_checked
from guard.txs import TransactionError
from guard.types import Address, BlockHash, BlockNumber, TxHash

T = TypeVar("T")


def per_hash(ask: Callable[[Sequence[str]], Sequence[T]], tx_hashes: Sequence[str]) -> list[T]:
    """``ask`` (a batched call, one answer per hash) over the distinct hashes of
    ``tx_hashes``, answered per item: a hash several settlements share costs one call."""
    unique = list(dict.fromkeys(tx_hashes))
    if not unique:
        return []
    answers = dict(zip(unique, ask(unique), strict=True))
    return [answers[h] for h in tx_hashes]


def lookup(
    client: RpcClient,
    tx_hashes: Sequence[str],
    max_batch: int | None = None,
    held: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[tuple[TxInfo | None, str | None]]:
    """(``eth_getTransactionByHash`` parsed, signed bytes) per hash, in batches of at most
    ``max_batch`` (each distinct hash asked once); the bytes are rebuilt locally, fetched raw
    only for a pending tx where that fails (an included one's may be None). Bytes returned
    were checked: they hash to the tx and their signature names the sender and nonce given.
    ``held``: tx objects already in hand by hash (:func:`held_tx_objects`), taken as the
    node's answer and checked the same way, not asked."""
    return per_hash(lambda hashes: _lookup(client, hashes, max_batch, held or {}), tx_hashes)


def held_tx_objects(
    facts: BlockFacts, window: HeaderWindow, tx_hashes: Sequence[str]
) -> dict[str, Mapping[str, Any]]:
    """The tx objects of those of ``tx_hashes`` in a block the tracker fetched whole and
    ``window`` holds as canonical (its hash at its height), by hash. A block object's tx is
    what ``eth_getTransactionByHash`` answers for an included tx (its block, index, sender,
    nonce and signed fields); a tx seen only in a block a reorg took away is not here, nor
    one whose object names another block than the one that carried it."""
    by_block: dict[tuple[str, str], list[str]] = {}
    for tx_hash in dict.fromkeys(tx_hashes):
        where = facts.located(tx_hash)
        header = None if where is None else window.get(where[0])
        if where is not None and header is not None and header.hash == where[1]:
            by_block.setdefault((where[1], hex(where[0])), []).append(tx_hash)
    found: dict[str, Mapping[str, Any]] = {}
    for (block_hash, number), wanted in by_block.items():
        block = facts.tx_objects.get(block_hash)
        objects = {
            tx.get("hash"): tx
            for tx in (block or {}).get("transactions", ())
            if isinstance(tx, Mapping)
            and tx.get("blockHash") == block_hash
            and tx.get("blockNumber") == number
        }
        found.update((h, objects[h]) for h in wanted if h in objects)
    return found


def _lookup(
    client: RpcClient,
    tx_hashes: Sequence[str],
    max_batch: int | None,
    held: Mapping[str, Mapping[str, Any]],
) -> list[tuple[TxInfo | None, str | None]]:
    """:func:`lookup` of distinct hashes."""
    if not tx_hashes:
        return []
    asked = [h for h in tx_hashes if h not in held]
    calls: list[Call] = [("eth_getTransactionByHash", [h]) for h in asked]
    answered = dict(zip(asked, client.batch(calls, max_batch), strict=True)) if asked else {}
    raws = [held[h] if h in held else answered[h] for h in tx_hashes]
    out: list[tuple[TxInfo | None, str | None]] = []
    unbuilt: list[int] = []
    for i, raw in enumerate(raws):
        if raw is None:
            out.append((None, None))
            continue
        info = client.parse_tx_info(raw)
        signed = _rebuilt(raw)  # an included tx's too: its sender is then proven without a call
        if signed is None and info.block_number is None:
            unbuilt.append(i)
        out.append((info, signed))
    if unbuilt:
        fetched = client.raw_transactions([tx_hashes[i] for i in unbuilt])
        for i, signed in zip(unbuilt, fetched, strict=True):
            out[i] = (out[i][0], signed)
    for said, signed in out:  # a replacement is matched on these: the signature decides
        if said is not None and signed is not None:
            raw = bytes.fromhex(signed[2:])
            wrong = sender_mismatch(said.hash, said.sender, said.nonce, raw)
            if wrong is not None:
                raise client.distrust(client.answering_endpoint(), wrong)
    return out


def _rebuilt(tx: Mapping[str, Any]) -> str | None:
    """The signed bytes (canonical form) of a tx object, if they rebuild its hash."""
    try:
        return "0x" + encode_checked(tx).canonical.hex()
    except (TransactionError, rlp.RlpError, KeyError, TypeError, ValueError):
        return None


def receipts_by_block(
    client: RpcClient, facts: BlockFacts, included: Sequence[tuple[str, str]]
) -> dict[str, TxReceipt]:
    """Receipts of ``included`` (tx hash, block hash), checked against their blocks' roots
    (chains/block_checks.py): one ``eth_getBlockReceipts`` per block not already held (then
    held for the receipt builder too)."""
    by_block: dict[str, dict[str, None]] = {}
    for tx_hash, block_hash in included:
        by_block.setdefault(block_hash, {})[tx_hash] = None
    found: dict[str, TxReceipt] = {}
    for block_hash, distinct in by_block.items():
        receipts = checked_receipts(client, facts, block_hash, list(distinct))
        found.update((r.tx_hash, r) for r in receipts)
    return found


def located_info(facts: BlockFacts, tx_hash: str, sender: str, nonce: int) -> TxInfo | None:
    """A tx given with its sender and nonce, found in a block the tracker holds (no call)."""
    where = facts.located(tx_hash)
    if where is None:
        return None
    return TxInfo(
        hash=TxHash(tx_hash),
        sender=Address(sender),
        nonce=nonce,
        block_number=BlockNumber(where[0]),
        block_hash=BlockHash(where[1]),
    )
