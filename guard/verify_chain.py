"""Chain evidence, checked offline: headers and their links, and a tx with its receipt.

Headers: each header's hash is recomputed (:mod:`guard.headers`), and each one must be the
parent of the next (``parentHash`` and ``number``), so the last one, the confirming head,
sits ``len(headers) - 1`` blocks above the inclusion block: depth = number of headers. Or,
with a ``history_storage`` ancestry (:mod:`guard.history`), the inclusion header alone and
the confirming head's state holding its hash: depth = head - block + 1.

Inclusion: the trie key of the tx is ``rlp(tx_index)``; the receipt proof leads from the
inclusion header's ``receiptsRoot`` to the receipt (``status`` 1 success, 0 reverted; a
typed receipt is its type byte then the RLP list), the transaction proof from
``transactionsRoot`` to the signed tx, whose hash must be the tx the receipt is about.

Receipts and txs come in each chain's forms (chains/receipt_encode.py, guard/tx_types_l2.py):
an OP Stack deposit receipt (0x7e) since Canyon carries two more fields, ``depositNonce``
and ``depositReceiptVersion``; an Arbitrum classic-era receipt (0x78) is untyped; every
other receipt is the four fields. The unsigned L2 txs are proven as any tx: their hash is
taken from their bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from guard import rlp
from guard.canonical import json_key
from guard.errors import ReceiptInvalid
from guard.fields import array, child, hex_nodes, integer, keys, obj
from guard.header_chain import decode_header_chain
from guard.headers import HeaderError, field_bytes, header_hash, header_number
from guard.history import (
    HEADER_CHAIN,
    HISTORY_STORAGE,
    HistoryLink,
    ancestry_head,
    ancestry_kind,
    header_chain_reason,
    verify_history_ancestry,
)
from guard.memo import remember
from guard.mpt import ProofError, verify_proof
from guard.tx_types_l2 import OP_DEPOSIT
from guard.txs import TransactionError, canonical_bytes, transaction_hash


@dataclass(frozen=True)
class ChainFacts:
    """What a receipt's evidence showed, once checked."""

    summary: str
    """One line: block, depth, status or deadline."""
    block_number: int | None = None
    """Block holding the proven tx (the watched one, or its replacement)."""
    block_hash: str | None = None
    """Its hash."""
    tx_index: int | None = None
    """Position of the proven tx."""
    status: int | None = None
    """Its receipt status (1 success, 0 reverted)."""
    confirmations: int | None = None
    """Depth the proof shows (the number of headers, or head - block + 1 with a history
    proof)."""
    transaction_form: str | None = None
    """``canonical``, or ``network`` (a blob tx with its sidecar, as anvil commits it)."""
    ancestry: str | None = None
    """How the block's link to the head is proven, when the receipt says
    (:attr:`Inclusion.ancestry`)."""
    anchor: tuple[int, str] | None = None
    """(number, hash) of the highest block the receipt proves; ``--rpc`` checks it."""
    dependent_state_digest: str | None = None
    """The bound dependent state's digest, if any."""
    revokes: str | None = None
    """Digest of the revoked receipt (revocations)."""


@dataclass(frozen=True)
class Inclusion:
    """A verified inclusion: the tx bytes at ``tx_index`` of a block, and the blocks above."""

    block_number: int
    block_hash: str
    tx_index: int
    status: int
    tx_bytes: bytes
    tx_hash: str
    form: str
    head_number: int
    head_hash: str
    depth: int
    ancestry: str | None = None
    """How the proof says the block is linked to the head (guard/history.py):
    ``history_storage``, ``header_chain (REASON)``, or None when it carries no ``ancestry``
    (the header chain, as every receipt before that section)."""


# -- headers ----------------------------------------------------------------------------------


def verify_header(value: object, what: str) -> tuple[int, str, Mapping[str, Any]]:
    """(number, recomputed hash, header) of one header whose claimed ``hash`` is right."""
    header = obj(value, what)
    number = _number(header, what)
    return number, _checked_hash(header, number), header


def _number(header: Mapping[str, Any], what: str) -> int:
    try:
        return header_number(header)
    except HeaderError as exc:
        raise ReceiptInvalid(f"{what}: {exc}") from exc


def _checked_hash(header: Mapping[str, Any], number: int) -> str:
    try:
        actual = header_hash(header)
    except HeaderError as exc:
        raise ReceiptInvalid(f"header {number}: {exc}") from exc
    claimed = header.get("hash")
    if claimed != actual:
        raise ReceiptInvalid(
            f"header {number}: hash {claimed} does not match its fields (keccak256(rlp) = {actual})"
        )
    return actual


def verify_headers(values: list[Any], where: str) -> list[tuple[int, str, Mapping[str, Any]]]:
    """Every header checked, and each the parent of the next (the link is checked first, so
    a changed ``parentHash`` is reported as such, not as a changed hash)."""
    out: list[tuple[int, str, Mapping[str, Any]]] = []
    for i, value in enumerate(values):
        what = f"{where}[{i}]"
        header = obj(value, what)
        number = _number(header, what)
        if out:
            below_number, below_hash, _ = out[-1]
            if header.get("parentHash") != below_hash:
                raise ReceiptInvalid(
                    f"header {number}: parentHash does not match block {below_number}"
                )
            if number != below_number + 1:
                raise ReceiptInvalid(f"header {number}: does not follow block {below_number}")
        out.append((number, _checked_hash(header, number), header))
    return out


def proof_headers(proof: Mapping[str, Any]) -> list[tuple[int, str, Mapping[str, Any]]]:
    """The checked header chain of a proof: ``headers`` (JSON objects) or ``header_chain``
    (the compact, versioned encoding of guard/header_chain.py), exactly one of them."""
    if "header_chain" in proof:
        if "headers" in proof:
            raise ReceiptInvalid("proof: carries both headers and header_chain")
        return decode_header_chain(child(proof, "header_chain", "proof"), "proof.header_chain")
    return verify_headers(array(proof, "headers", "proof", min_length=1), "proof.headers")


def _root(header: Mapping[str, Any], name: str) -> bytes:
    return field_bytes(name, "hash32", header[name])


# -- inclusion --------------------------------------------------------------------------------


def _nodes(proof: Mapping[str, Any], key: str, label: str) -> list[bytes]:
    values = array(proof, key, "proof", min_length=1)
    return hex_nodes(values, lambda i: f"{label}: node {i}")


def receipt_status(value: bytes) -> int:
    """The status of an encoded receipt: ``rlp([status, gas, bloom, logs])``, typed or not,
    or an OP Stack deposit receipt since Canyon, ``0x7e || rlp([status, gas, bloom, logs,
    depositNonce, depositReceiptVersion])``."""
    if not value:
        raise ReceiptInvalid("receipt proof: the receipt is empty")
    typed = value[0] < 0x80
    payload = value[1:] if typed else value
    try:
        fields = rlp.decode(payload)
    except rlp.RlpError as exc:
        raise ReceiptInvalid(f"receipt proof: the receipt is not valid RLP: {exc}") from exc
    if isinstance(fields, bytes) or not isinstance(fields[0] if fields else None, bytes):
        raise ReceiptInvalid("receipt proof: the receipt is not [status, gas, bloom, logs]")
    deposit = typed and value[0] == OP_DEPOSIT
    if deposit and len(fields) == 6:
        _deposit_fields(fields[4], fields[5])
    elif len(fields) != 4:
        raise ReceiptInvalid(
            "receipt proof: the receipt is not [status, gas, bloom, logs]"
            + (" nor a deposit receipt with its nonce and version" if deposit else "")
        )
    status = fields[0]
    if status not in (b"", b"\x01"):
        raise ReceiptInvalid(
            "receipt proof: the receipt has a state root, not a status (pre-Byzantium)"
        )
    return 1 if status == b"\x01" else 0


def _deposit_fields(nonce: rlp.Item, version: rlp.Item) -> None:
    """A post-Canyon deposit receipt's nonce and version must be integers (version >= 1)."""
    for item, name in ((nonce, "depositNonce"), (version, "depositReceiptVersion")):
        if not isinstance(item, bytes) or item[:1] == b"\x00":
            raise ReceiptInvalid(f"receipt proof: the deposit receipt's {name} is not an integer")
    if not version:
        raise ReceiptInvalid(
            "receipt proof: the deposit receipt's depositReceiptVersion is 0 (versions start at 1)"
        )


def verify_inclusion(proof: Mapping[str, Any]) -> Inclusion:
    """The headers, then the receipt and transaction proofs against the first header."""
    keys(
        proof,
        ("tx_index", "headers", "header_chain", "receipt_proof", "transaction_proof", "ancestry"),
        "proof",
    )
    tx_index = integer(proof, "tx_index", "proof")
    headers = proof_headers(proof)
    number, block_hash, header = headers[0]
    head_number, head_hash, depth, ancestry = _ancestry(proof, headers)
    tx = check_tx_proofs(header, number, tx_index, proof)
    return Inclusion(
        block_number=number,
        block_hash=block_hash,
        tx_index=tx_index,
        status=tx.status,
        tx_bytes=tx.tx_bytes,
        tx_hash=tx.tx_hash,
        form=tx.form,
        head_number=head_number,
        head_hash=head_hash,
        depth=depth,
        ancestry=ancestry,
    )


@dataclass(frozen=True)
class ProvenTx:
    """What a tx's two proofs showed against its block's roots."""

    status: int
    """Its receipt's status (1 success, 0 reverted)."""
    tx_bytes: bytes
    """The signed tx the transaction proof leads to."""
    tx_hash: str
    """Its hash."""
    form: str
    """``canonical``, or ``network`` (a blob tx with its sidecar)."""


TX_PROOFS_HELD = 4096
"""Tx proofs checked lately, by content (:func:`check_tx_proofs`): a daemon checks each
watched tx's proofs when its block arrives, N blocks before the receipt (W = 1,000 at N = 12
and a block every 0.5 s holds about 1,300 at once); the oldest go first."""

TX_BYTES_HELD = 4096
"""The largest tx remembered (a blob tx with its sidecar is over 128 KiB): what the memo
holds stays under 16 MiB."""

_tx_proofs: dict[bytes, ProvenTx] = {}


def check_tx_proofs(
    header: Mapping[str, Any], number: int, tx_index: int, proof: Mapping[str, Any]
) -> ProvenTx:
    """The ``receipt_proof`` and ``transaction_proof`` of ``proof`` for the ``tx_index``-th
    tx, checked against the roots of ``header`` (block ``number``, its hash already
    recomputed); :class:`ReceiptInvalid` names the first failure.

    Remembered by the content it depends on (both roots, the index, both node lists:
    guard/canonical.json_key), as a pure function of it: the issuing daemon checks a watched
    tx's proofs as soon as its block is seen (watcher/receipts/builder.py, ``prepare``), and
    the self-check of its receipt, N blocks later, finds the same content checked instead of
    walking the tries again. A failure is not remembered; content that is not plain JSON is
    checked every time."""
    content = json_key(
        [
            header.get("receiptsRoot"),
            header.get("transactionsRoot"),
            tx_index,
            proof.get("receipt_proof"),
            proof.get("transaction_proof"),
        ]
    )
    if content is not None:
        held = _tx_proofs.get(content)
        if held is not None:
            return held
    proven = _check_tx_proofs(header, number, tx_index, proof)
    if content is not None and len(proven.tx_bytes) <= TX_BYTES_HELD:
        remember(_tx_proofs, content, proven, TX_PROOFS_HELD)
    return proven


def _check_tx_proofs(
    header: Mapping[str, Any], number: int, tx_index: int, proof: Mapping[str, Any]
) -> ProvenTx:
    key = rlp.encode(rlp.encode_uint(tx_index))
    try:
        receipt = verify_proof(
            _root(header, "receiptsRoot"),
            key,
            _nodes(proof, "receipt_proof", "receipt proof"),
            f"receiptsRoot of block {number}",
        )
    except ProofError as exc:
        raise ReceiptInvalid(f"receipt proof: {exc}") from exc
    status = receipt_status(receipt)
    try:
        tx_bytes = verify_proof(
            _root(header, "transactionsRoot"),
            key,
            _nodes(proof, "transaction_proof", "transaction proof"),
            f"transactionsRoot of block {number}",
        )
    except ProofError as exc:
        raise ReceiptInvalid(f"transaction proof: {exc}") from exc
    try:
        tx_hash = transaction_hash(tx_bytes)
    except TransactionError as exc:
        raise ReceiptInvalid(f"transaction proof: the value is not a transaction: {exc}") from exc
    network = canonical_bytes(tx_bytes) != tx_bytes  # a blob tx with its sidecar
    return ProvenTx(status, tx_bytes, tx_hash, "network" if network else "canonical")


def _ancestry(
    proof: Mapping[str, Any], headers: list[tuple[int, str, Mapping[str, Any]]]
) -> tuple[int, str, int, str | None]:
    """(head number, head hash, depth, :attr:`Inclusion.ancestry`) of a proof whose headers
    are checked: the last header and their count for a header chain; for a
    ``history_storage`` ancestry (guard/history.py) the inclusion header alone, and block H
    above it in the history contract's proof."""
    kind, ancestry = ancestry_kind(proof)
    if ancestry is None or kind == HEADER_CHAIN:
        said = None if ancestry is None else f"{HEADER_CHAIN} ({header_chain_reason(ancestry)})"
        head_number, head_hash, _ = headers[-1]
        return head_number, head_hash, len(headers), said
    if len(headers) != 1:
        raise ReceiptInvalid(
            f"proof: a {HISTORY_STORAGE} ancestry goes with the inclusion block's header alone, "
            f"not {len(headers)} headers"
        )
    number, block_hash, _ = headers[0]
    link = _history_link(ancestry, number, block_hash)
    return link.head_number, link.head_hash, link.depth, HISTORY_STORAGE


LINKS_HELD = 64
"""History ancestries checked lately, by content (:func:`_history_link`); when full, the
record starts over (a plain dict: each read or write is one step under any interpreter
lock, so threads checking receipts at once never see it half-changed; guard imports no
threading)."""

_links: dict[tuple[int, str, bytes], HistoryLink] = {}


def _history_link(ancestry: Mapping[str, Any], number: int, block_hash: str) -> HistoryLink:
    """:func:`verify_history_ancestry` of block ``number`` (``block_hash``, recomputed) by
    ``ancestry``, remembered by the ancestry's whole content (guard/canonical.json_key): the
    check is a pure function of it, and the receipts of one block at one head carry the same
    one (a hundred settlements in a block: the state and storage proofs walked and H's header
    decoded once, not a hundred times). A failure is not remembered; content that is not
    plain JSON is checked every time."""
    content = json_key(ancestry)
    key = None if content is None else (number, block_hash, content)
    if key is not None:
        held = _links.get(key)
        if held is not None:
            return held
    link = verify_history_ancestry(ancestry, number, block_hash, ancestry_head(ancestry))
    if key is not None:
        if len(_links) >= LINKS_HELD:
            _links.clear()
        _links[key] = link
    return link
