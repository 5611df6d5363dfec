"""One counted transfer of a payment, proven and decoded from the bytes its block commits.

The tx and its receipt are walked down from the block's ``transactionsRoot`` and
``receiptsRoot`` at key ``rlp(tx_index)`` (guard/mpt.py), as an ``evm_tx`` inclusion is
(guard/verify_chain.py). Then what the payment counts is read from those bytes, never from
the claim:

* native: the tx's ``to`` and ``value`` fields (legacy, 2930, 1559, 4844 in either form,
  7702; the unsigned L2 types by their layouts' ``to``/``value``), its sender recovered
  from the signature (or, for an unsigned type, its ``from`` field);
* token: the receipt's logs ``[[address, [topics...], data], ...]``, the one at
  ``log_position``: ``address`` the token, ``topics`` = [keccak256("Transfer(address,
  address,uint256)"), from, to] (each a 32-byte word, the address in its low 20 bytes, the
  high 12 zero), ``data`` one 32-byte word, the value.

A claim that differs from the bytes (another value, recipient, contract, sender, log) is
refused naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from guard import rlp
from guard.errors import ReceiptInvalid
from guard.fields import array, field, hash32, hex_bytes, integer, keys
from guard.headers import field_bytes
from guard.mpt import ProofError, verify_proof
from guard.payment import NATIVE, TRANSFER_TOPIC
from guard.tx_types_l2 import ARBITRUM_LEGACY, LAYOUTS
from guard.txs import TYPED_FIELD_COUNTS, TransactionError, decode_signed
from guard.verify_chain import receipt_status

_TOPIC0 = bytes.fromhex(TRANSFER_TOPIC[2:])
_VALUE_AT = {0: (3, 4), 1: (4, 5)}
"""(index of ``to``, index of ``value``) per signed type; the later types use (5, 6)."""


@dataclass(frozen=True)
class PaymentTerms:
    """The ``payment`` section's terms, checked for shape (guard/payment_proof.py)."""

    to: str
    asset: str
    amount: int
    sender: str | None
    paid: int
    transfers: list[Mapping[str, Any]]


@dataclass(frozen=True)
class ProvenTransfer:
    """A transfer whose tx, receipt and (token) log the proofs showed."""

    tx_hash: str
    block_number: int
    tx_index: int
    log_position: int | None
    sender: str
    value: int


def _walk(header: Mapping[str, Any], root: str, key: bytes, nodes: list[Any], label: str) -> bytes:
    number = int(str(header["number"]), 16)
    proof = [hex_bytes(v, f"{label}: node {i}") for i, v in enumerate(nodes)]
    try:
        return verify_proof(
            field_bytes(root, "hash32", header[root]), key, proof, f"{root} of block {number}"
        )
    except ProofError as exc:
        raise ReceiptInvalid(f"{label}: {exc}") from exc


def _items(item: rlp.Item, what: str) -> list[rlp.Item]:
    if isinstance(item, bytes):
        raise ReceiptInvalid(f"{what}: is a string, not a list")
    return list(item)


def _word(item: rlp.Item, what: str) -> bytes:
    if not isinstance(item, bytes):
        raise ReceiptInvalid(f"{what}: is a list, not bytes")
    return item


def tx_to_and_value(raw: bytes) -> tuple[str | None, int]:
    """``to`` (None for a creation) and ``value`` of a tx's bytes (already decoded once by
    :func:`guard.txs.decode_signed`, so the layout is known to be right)."""
    typed = raw[0] < 0xC0
    tx_type = raw[0] if typed else 0
    fields = _items(rlp.decode(raw[1:] if typed else raw), "transaction")
    if tx_type == 3 and not isinstance(fields[0], bytes):  # blob tx with its sidecar
        fields = _items(fields[0], "transaction")
    if tx_type == ARBITRUM_LEGACY:
        fields, tx_type = _items(fields[0], "transaction"), 0
    if tx_type in LAYOUTS:
        names = [name for name, _ in LAYOUTS[tx_type].fields]
        if "to" not in names or "value" not in names:
            return None, 0
        to_at, value_at = names.index("to"), names.index("value")
    elif tx_type in _VALUE_AT or tx_type in TYPED_FIELD_COUNTS:
        to_at, value_at = _VALUE_AT.get(tx_type, (5, 6))
    else:
        raise ReceiptInvalid(f"transaction proof: type 0x{tx_type:02x} carries no value")
    to = _word(fields[to_at], "transaction to")
    value = _word(fields[value_at], "transaction value")
    return ("0x" + to.hex() if to else None), int.from_bytes(value, "big")


def receipt_logs(value: bytes) -> list[tuple[bytes, list[bytes], bytes]]:
    """(address, topics, data) of every log of an encoded receipt (typed or not)."""
    payload = value[1:] if value[0] < 0x80 else value
    fields = _items(rlp.decode(payload), "receipt proof: the receipt")
    out: list[tuple[bytes, list[bytes], bytes]] = []
    for i, log in enumerate(_items(fields[3], "receipt proof: the receipt's logs")):
        parts = _items(log, f"receipt proof: log {i}")
        if len(parts) != 3:
            raise ReceiptInvalid(f"receipt proof: log {i} is not [address, topics, data]")
        topics = [_word(t, f"receipt proof: log {i} topic") for t in _items(parts[1], "topics")]
        out.append((_word(parts[0], "log address"), topics, _word(parts[2], "log data")))
    return out


def _address_word(word: bytes, what: str) -> str:
    if len(word) != 32 or any(word[:12]):
        raise ReceiptInvalid(f"{what}: is not an address word (32 bytes, 12 zero)")
    return "0x" + word[12:].hex()


def _token_log(receipt: bytes, position: int, terms: PaymentTerms, where: str) -> tuple[str, int]:
    """(from, value) of the token's Transfer log to the recipient at ``position``."""
    logs = receipt_logs(receipt)
    if position >= len(logs):
        raise ReceiptInvalid(
            f"{where}: log_position {position} is past the receipt's {len(logs)} log(s)"
        )
    emitter, topics, data = logs[position]
    what = f"{where}: log {position} of the proven receipt"
    if "0x" + emitter.hex() != terms.asset:
        raise ReceiptInvalid(
            f"{what} was emitted by 0x{emitter.hex()}, not the token {terms.asset}"
        )
    if len(topics) != 3 or topics[0] != _TOPIC0:
        raise ReceiptInvalid(f"{what} is not Transfer(address,address,uint256)")
    to = _address_word(topics[2], f"{what}: topic2")
    if to != terms.to:
        raise ReceiptInvalid(f"{what} pays {to}, not the recipient {terms.to}")
    if len(data) != 32:
        raise ReceiptInvalid(f"{what}: data is not one 32-byte value")
    return _address_word(topics[1], f"{what}: topic1"), int.from_bytes(data, "big")


def _native(tx_bytes: bytes, terms: PaymentTerms, where: str) -> tuple[str, int]:
    """(sender, value) of a native transfer's tx, which must pay the recipient."""
    try:
        sender = decode_signed(tx_bytes).sender
    except TransactionError as exc:
        raise ReceiptInvalid(f"{where}: cannot recover the sender: {exc}") from exc
    to, value = tx_to_and_value(tx_bytes)
    if to != terms.to:
        raise ReceiptInvalid(f"{where}: the proven tx pays {to}, not the recipient {terms.to}")
    return sender, value


def prove_transfer(
    claim: Mapping[str, Any],
    entry: Mapping[str, Any],
    header: Mapping[str, Any],
    terms: PaymentTerms,
    where: str,
) -> ProvenTransfer:
    """Check one transfer's proof (``entry``) under its block's ``header`` and compare what
    it shows with the ``claim``."""
    keys(
        entry,
        ("receipt_proof", "transaction_proof", "log_position"),
        where.replace("payment", "proof"),
    )
    tx_index = integer(claim, "tx_index", where)
    key = rlp.encode(rlp.encode_uint(tx_index))
    receipt = _walk(
        header,
        "receiptsRoot",
        key,
        array(entry, "receipt_proof", "proof", 1),
        f"{where}: receipt proof",
    )
    tx_bytes = _walk(
        header,
        "transactionsRoot",
        key,
        array(entry, "transaction_proof", "proof", 1),
        f"{where}: transaction proof",
    )
    if receipt_status(receipt) != 1:
        raise ReceiptInvalid(f"{where}: the proven receipt has status 0 (reverted): nothing moved")
    try:
        tx_hash = decode_signed(tx_bytes).tx_hash
    except TransactionError as exc:
        raise ReceiptInvalid(f"{where}: the proven value is not a transaction: {exc}") from exc
    if tx_hash != hash32(claim, "tx_hash", where):
        raise ReceiptInvalid(f"{where}.tx_hash: the proven tx is {tx_hash}, not {claim['tx_hash']}")
    position = field(entry, "log_position", where)
    log_index = field(claim, "log_index", where)
    if terms.asset == NATIVE:
        if position is not None or log_index is not None:
            raise ReceiptInvalid(f"{where}: a native transfer has no log")
        sender, value = _native(tx_bytes, terms, where)
    else:
        position = integer(entry, "log_position", where)
        if integer(claim, "log_index", where) < position:
            raise ReceiptInvalid(f"{where}.log_index: is below the log's position in its receipt")
        sender, value = _token_log(receipt, position, terms, where)
    return _compared(
        claim,
        where,
        ProvenTransfer(tx_hash, int(header["number"], 16), tx_index, position, sender, value),
        terms,
    )


def _compared(
    claim: Mapping[str, Any], where: str, proven: ProvenTransfer, terms: PaymentTerms
) -> ProvenTransfer:
    """``proven`` if the claim states what it shows (value, sender, the terms' sender)."""
    if int(claim["value"]) != proven.value:
        raise ReceiptInvalid(
            f"{where}.value: {claim['value']} is not the proven value {proven.value}"
        )
    if field(claim, "from", where) != proven.sender:
        raise ReceiptInvalid(
            f"{where}.from: {claim['from']!r} is not the proven sender {proven.sender}"
        )
    if terms.sender is not None and proven.sender != terms.sender:
        raise ReceiptInvalid(
            f"{where}: paid by {proven.sender}, not by the payment's from {terms.sender}"
        )
    return proven
