"""A block's receipts, believed only once the block's header commits to them.

The engine decides on receipts (a tx's status, its index, its block): a node that flips a
status from 0 to 1 would turn a reverted tx into a confirmed one. Before any receipt is
used, both tries of its block are rebuilt, with the code the finality receipts prove from
(:func:`chains.block_tries.fetch_block_tries`): the receipts against ``receiptsRoot`` and the
block's txs (whose hashes the receipts name, by index) against ``transactionsRoot``, under a
header whose fields hash to its ``hash`` (checked when the client parsed it:
chains/header_hash.py). Data that fails is :class:`~chains.errors.NodeDataInvalid` and the
endpoint that gave it is marked ``inconsistent`` (:meth:`chains.rpc.RpcClient.distrust`).

Cost: nothing more than before in steady state. The block's header and tx objects are those
the head tracker fetched; its receipts are the one ``eth_getBlockReceipts`` the engine made
anyway; the tries are kept (:meth:`BlockFacts.offer_tries`) for the receipt builder, which
then proves from them instead of building them again. Only a block the tracker did not
fetch (a tx included before it was registered) costs one ``eth_getBlockByHash``.

A tx's sender (the ``from`` a replacement is matched on) is checked too, against the
signature of the bytes the block committed (:func:`check_senders`): a node that names
another sender for a tx cannot make a watched tx look replaced.

A tx's signer is recovered once (:func:`signed_tx`): the look-up that found it pending, or
included before its registration, recovered it from the same bytes its block commits, and
those bytes are the memo's key (not their hash, not the node's word).

A chain whose headers do not re-hash (the registry says which) cannot be checked this way:
its receipts are taken as the node gives them, and its receipts say they are attestations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chains.block_facts import BlockFacts, header_from_compact
from chains.block_tries import fetch_block_tries
from chains.errors import ProofUnavailable, RpcErrorResponse
from chains.models import TxReceipt
from chains.rpc import RpcClient
from guard import rlp
from guard.memo import remember
from guard.txs import SignedTx, TransactionError, decode_signed

METHOD = "eth_getBlockReceipts"

SIGNED_HELD = 4096
"""Signed txs read lately (:func:`signed_tx`): a watched tx is read when a look-up finds it
and again when its block arrives (W = 1,000 spreads over ~10 blocks); the oldest go first."""

SIGNED_BYTES_HELD = 4096
"""The largest tx remembered (a blob tx with its sidecar is over 128 KiB): the memo stays
under 16 MiB of keys."""

_signed: dict[bytes, SignedTx] = {}


RawReceipts = list[Mapping[str, Any]]
"""One block's ``eth_getBlockReceipts`` answer as the node gave it, in tx order."""


def fetch_receipts_of(
    client: RpcClient, block_hashes: Sequence[str], max_batch: int | None = None
) -> dict[str, RawReceipts]:
    """The raw receipts of several blocks in batched ``eth_getBlockReceipts`` calls (a
    catch-up's blocks with watched txs: one round trip, not one per block), by block hash,
    for :func:`checked_receipts` to check. Nothing is believed here: a block whose answer is
    not a list of objects is left out (and asked alone, which says why), as is every block
    when the node lacks the method or refuses a batch of them (each is then asked alone, as
    :func:`checked_receipts` does without them)."""
    if len(block_hashes) < 2:
        return {}
    try:
        answers = client.optional(METHOD, [[h] for h in block_hashes])
    except RpcErrorResponse:
        return {}
    out: dict[str, RawReceipts] = {}
    for block_hash, answer in zip(block_hashes, answers or (), strict=True):
        if not isinstance(answer, list) or not all(isinstance(r, Mapping) for r in answer):
            continue
        at = [_tx_index(r) for r in answer]
        if None not in at:
            out[block_hash] = [r for _, r in sorted(zip(at, answer, strict=True), key=_first)]
    return out


def checked_receipts(
    client: RpcClient,
    facts: BlockFacts,
    block_hash: str,
    tx_hashes: Sequence[str],
    fetched: RawReceipts | None = None,
    listed: Sequence[str] | None = None,
) -> list[TxReceipt]:
    """The receipts of ``tx_hashes`` in block ``block_hash``, checked against the block's
    roots (see the module doc); those of another block are left out, as a block the node no
    longer has gives none. ``fetched``: the block's raw receipts already asked for
    (:func:`fetch_receipts_of`; checked here as if asked now). ``listed``: the block's tx
    hashes in order as the caller's parsed copy of it lists them, used when the facts'
    index (the last :data:`~chains.block_facts.TX_BLOCKS_HELD` blocks) let the block go: a
    catch-up's run holds up to a poll of blocks, and without them most of its watched
    blocks were asked for again by hash. The list is believed no more than the facts' one:
    both tries are rebuilt from it and checked against the header's roots. Raises
    NodeDataInvalid when the node's data does not check out, BranchMoved when the node's
    answers belong to another branch (wait and retry)."""
    facts.offer_watched(block_hash, list(tx_hashes))  # proven ahead (watcher/receipts)
    if not client.check_headers:
        if fetched is None:
            return client.block_receipts(block_hash, tx_hashes)
        for observe in client.receipt_observers:
            observe(block_hash, fetched)
        return _wanted(client, fetched, block_hash, tx_hashes)
    known = _header_and_txs(client, facts, block_hash, listed)
    if known is None:
        return []
    compact, hashes = known
    held = facts.receipts(block_hash)
    if held is not None:
        answers = list(held)
    else:
        answers = fetched if fetched is not None else client.raw_block_receipts(block_hash)
    if not answers or any(_block_of(r) != block_hash.lower() for r in answers):
        return []  # the node no longer has the block, or answered for another branch
    said = [str(r.get("transactionHash", "")).lower() for r in answers]
    if said != [h.lower() for h in hashes]:
        raise client.distrust(
            client.answering_endpoint(),
            f"block {block_hash}: its receipts name other txs than the block holds",
        )
    tries = facts.tries(block_hash)
    if tries is None:
        block = {**header_from_compact(compact), "transactions": list(hashes)}
        try:
            tries = fetch_block_tries(client, block, facts.tx_objects, answers)
        except ProofUnavailable as exc:
            raise client.distrust(client.answering_endpoint(), str(exc)) from exc
        facts.offer_tries(tries)
    if held is None:
        for observe in client.receipt_observers:
            observe(block_hash, answers)
    return _wanted(client, answers, block_hash, tx_hashes)


def _header_and_txs(
    client: RpcClient, facts: BlockFacts, block_hash: str, listed: Sequence[str] | None
) -> tuple[bytes, list[str]] | None:
    """The compact header and the tx hashes of ``block_hash`` (``listed`` when the facts let
    the list go: :func:`checked_receipts`); the block asked for by hash (and checked as it is
    parsed) only when they are not known. None: the node no longer has the block."""
    compact = facts.header(block_hash)
    hashes = facts.tx_hashes(block_hash)
    if hashes is None and listed:
        hashes = list(listed)
    if compact is not None and hashes is not None:
        return compact, hashes
    full = client.call("eth_getBlockByHash", [block_hash, True])
    if full is None:
        return None
    client.parse_block(full, "eth_getBlockByHash")  # checks it; the facts then hold it
    compact, hashes = facts.header(block_hash), facts.tx_hashes(block_hash)
    if compact is None or hashes is None:
        raise client.distrust(
            client.answering_endpoint(), f"block {block_hash}: not kept after its check"
        )
    return compact, hashes


def check_senders(
    client: RpcClient, facts: BlockFacts, block_hash: str, said: Sequence[tuple[str, str, int]]
) -> None:
    """Each (tx hash, sender, nonce) the node ``said`` of a tx of ``block_hash`` must be what
    the tx's committed bytes say (the signature's signer, its nonce); the block's tries were
    checked by :func:`checked_receipts` first (nothing to check without them: a chain whose
    headers do not re-hash). Raises NodeDataInvalid otherwise."""
    tries = facts.tries(block_hash)
    if tries is None or not said:
        return
    at = {h.lower(): i for i, h in enumerate(tries.tx_hashes)}
    for tx_hash, sender, nonce in said:
        index = at.get(tx_hash.lower())
        if index is None:
            raise client.distrust(client.answering_endpoint(), f"tx {tx_hash}: not in {block_hash}")
        wrong = sender_mismatch(tx_hash, sender, nonce, tries.transactions.values[index])
        if wrong is not None:
            raise client.distrust(client.answering_endpoint(), wrong)


def sender_mismatch(tx_hash: str, sender: str, nonce: int, raw: bytes) -> str | None:
    """Why the node's word that ``tx_hash`` was sent by ``sender`` with ``nonce`` is not what
    its signed bytes ``raw`` say (their hash, their signature's signer, their nonce), else
    None."""
    try:
        signed = signed_tx(raw)
    except (TransactionError, rlp.RlpError) as exc:
        return f"tx {tx_hash}: its signed bytes cannot be read ({exc})"
    if signed.tx_hash.lower() != tx_hash.lower():
        return f"tx {tx_hash}: the bytes the node gives for it hash to {signed.tx_hash}"
    if signed.sender.lower() == sender.lower() and signed.nonce in (None, nonce):
        return None  # (an L2 type that states no nonce is matched on its sender alone)
    return (
        f"tx {tx_hash}: the node says sender {sender} nonce {nonce}, its signed bytes say "
        f"sender {signed.sender} nonce {signed.nonce}"
    )


def signed_tx(raw: bytes) -> SignedTx:
    """:func:`guard.txs.decode_signed` of ``raw``, remembered by the exact bytes (a pure
    function of them: the same bytes recover the same signer); a failure is not remembered
    and raises as decode_signed does. Recovery is most of a tx's check (~55 of ~80 us)."""
    held = _signed.get(raw)
    if held is not None:
        return held
    signed = decode_signed(raw)
    if len(raw) <= SIGNED_BYTES_HELD:
        remember(_signed, bytes(raw), signed, SIGNED_HELD)
    return signed


def _tx_index(receipt: Mapping[str, Any]) -> int | None:
    """A receipt's ``transactionIndex`` (None: not a hex quantity)."""
    value = receipt.get("transactionIndex")
    if not isinstance(value, str) or not value.startswith("0x"):
        return None
    try:
        return int(value, 16)
    except ValueError:
        return None


def _first(pair: tuple[int | None, Any]) -> int:
    return pair[0] or 0


def _block_of(receipt: Mapping[str, Any]) -> str:
    return str(receipt.get("blockHash", "")).lower()


def _wanted(
    client: RpcClient,
    answers: Sequence[Mapping[str, Any]],
    block_hash: str,
    tx_hashes: Sequence[str],
) -> list[TxReceipt]:
    """The parsed receipts of ``tx_hashes`` among the block's ``answers``."""
    wanted = {h.lower() for h in tx_hashes}
    receipts = [client.parse_receipt(r, METHOD) for r in answers]
    return [r for r in receipts if r.tx_hash in wanted and r.block_hash == block_hash]
