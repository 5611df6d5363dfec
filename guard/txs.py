"""Signed transactions: their hash, and who sent them with which nonce.

A transaction trie leaf holds the signed transaction as the block committed it:

* legacy: ``rlp([nonce, gasPrice, gas, to, value, data, v, r, s])``;
* typed (EIP-2718): one type byte, then ``rlp([chainId, nonce, ..., yParity, r, s])`` —
  type 1 (access list, 11 fields), 2 (EIP-1559, 12), 3 (blob, 14), 4 (EIP-7702, 13).

The hash is keccak256 of those bytes. One exception: a blob transaction in its *network*
form, ``0x03 || rlp([tx_fields, blobs, commitments, proofs])`` (EIP-4844) or
``0x03 || rlp([tx_fields, 0x01, blobs, commitments, cell_proofs])`` (EIP-7594, Osaka),
carries its sidecar; its hash is still keccak256 of ``0x03 || rlp(tx_fields)``. Mainnet builds ``transactionsRoot`` over
the canonical form, but anvil builds it over the network form when the tx was sent with its
sidecar, so the verifier accepts either, in the form the chain used, and says which.

The sender is recovered from the signature over the signing hash: keccak256 of the type byte
and the fields without the signature (typed), or of ``rlp(first six fields)`` (legacy before
EIP-155, ``v`` = 27/28) or ``rlp(first six + [chainId, 0, 0])`` (EIP-155, ``v`` = 35 + 2
chainId + parity).

The L2 chains add unsigned types their blocks carry (OP Stack deposits 0x7e, Arbitrum's
system and retryable txs 0x64-0x6a, its classic-era wrapper 0x78): their layouts are in
guard/tx_types_l2.py; the sender is a field (ArbOS for 0x6a), the hash keccak256 of the
bytes (0x78: its ``hashOverride`` field).
"""

from __future__ import annotations

from dataclasses import dataclass

from coincurve import PublicKey

from guard import rlp
from guard.errors import GuardError
from guard.hashing import keccak256
from guard.tx_fields import FieldError, check_fields
from guard.tx_types_l2 import (
    ARBITRUM_LEGACY,
    LAYOUTS,
    layout_problem,
    legacy_wrapper_problem,
)

TYPED_FIELD_COUNTS = {1: 11, 2: 12, 3: 14, 4: 13}
"""Number of RLP fields (signature included) of each typed transaction."""

UNSIGNED_TYPES = frozenset([*LAYOUTS, ARBITRUM_LEGACY])
"""The L2 types guard/tx_types_l2.py lays out (no signature to recover)."""

SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
"""Order of the secp256k1 group; a valid signature has 0 < r, s < n and s <= n / 2."""


class TransactionError(GuardError, ValueError):
    """Bytes that are not a signed transaction this module understands."""


@dataclass(frozen=True)
class SignedTx:
    """What a signed transaction says about itself."""

    tx_hash: str
    """0x hash (of the canonical form)."""
    tx_type: int
    """0 for legacy, else the EIP-2718 type byte."""
    sender: str
    """0x lower-case address recovered from the signature (an unsigned L2 type: the address
    its ``from`` field states)."""
    nonce: int | None
    """The sender's nonce it consumes; None for a type that states none (OP deposits,
    Arbitrum deposits, contract, retryable and internal txs): such a tx cannot replace or be
    replaced by another."""
    network_form: bool
    """True when the bytes were a blob tx with its sidecar (the network wrapper)."""


def _fields(raw: bytes) -> tuple[int, list[rlp.Item], bool]:
    """(type, fields, network form) of a signed transaction's bytes."""
    if not raw:
        raise TransactionError("empty transaction")
    if raw[0] >= 0xC0:
        tx_type, body = 0, raw
    elif raw[0] in TYPED_FIELD_COUNTS or raw[0] in UNSIGNED_TYPES:
        tx_type, body = raw[0], raw[1:]
    else:
        raise TransactionError(f"unknown transaction type 0x{raw[0]:02x}")
    try:
        fields = rlp.decode(body)
    except rlp.RlpError as exc:
        raise TransactionError(f"not valid RLP: {exc}") from exc
    if isinstance(fields, bytes):
        raise TransactionError("payload is a string, not a list")
    if tx_type in UNSIGNED_TYPES:
        problem = (
            legacy_wrapper_problem(fields)
            if tx_type == ARBITRUM_LEGACY
            else layout_problem(tx_type, fields)
        )
        if problem is not None:
            raise TransactionError(problem)
        if tx_type == ARBITRUM_LEGACY:  # the classic tx inside is read as any legacy tx
            try:
                check_fields(0, _list(fields[0]))
            except FieldError as exc:
                raise TransactionError(f"type 0x78: {exc}") from exc
        return tx_type, list(fields), False
    network = False
    if tx_type == 3 and fields and not isinstance(fields[0], bytes):
        # EIP-4844 wrapper: [tx, blobs, commitments, proofs]; EIP-7594 (Osaka) wrapper:
        # [tx, wrapper_version 0x01, blobs, commitments, cell_proofs].
        if not (len(fields) == 4 or (len(fields) == 5 and fields[1] == b"\x01")):
            raise TransactionError("blob network form is neither the EIP-4844 nor EIP-7594 one")
        fields, network = fields[0], True
        if isinstance(fields, bytes):
            raise TransactionError("blob network form holds no transaction list")
    expected = TYPED_FIELD_COUNTS.get(tx_type, 9)
    if len(fields) != expected:
        raise TransactionError(f"type {tx_type} has {expected} fields, got {len(fields)}")
    try:
        check_fields(tx_type, fields)  # each field as strictly as consensus clients read it
    except FieldError as exc:
        raise TransactionError(f"type {tx_type}: {exc}") from exc
    return tx_type, list(fields), network


def _uint(item: rlp.Item, what: str) -> int:
    if not isinstance(item, bytes):
        raise TransactionError(f"{what} is a list, not an integer")
    try:
        return rlp.decode_uint(item, what)
    except rlp.RlpError as exc:
        raise TransactionError(str(exc)) from exc


def canonical_bytes(raw: bytes) -> bytes:
    """The canonical (hashed) form of a signed transaction: a network-form blob tx loses its
    sidecar; any other form is returned as it is."""
    tx_type, fields, network = _fields(raw)
    return bytes([tx_type]) + rlp.encode(fields) if network else raw


def transaction_hash(raw: bytes) -> str:
    """0x hash of a signed transaction in any form (see the module doc)."""
    if raw[:1] == bytes([ARBITRUM_LEGACY]):
        override = _fields(raw)[1][1]
        assert isinstance(override, bytes)  # checked by _fields
        return "0x" + override.hex()
    return "0x" + keccak256(canonical_bytes(raw)).hex()


def decode_signed(raw: bytes) -> SignedTx:
    """Hash, type, sender and nonce of a signed transaction; :class:`TransactionError`."""
    tx_type, fields, network = _fields(raw)
    if tx_type in UNSIGNED_TYPES:
        return _decode_unsigned(raw, tx_type, fields)
    v = _uint(fields[-3], "v")
    r = _uint(fields[-2], "r")
    s = _uint(fields[-1], "s")
    if tx_type == 0:
        nonce = _uint(fields[0], "nonce")
        if v in (27, 28):
            parity, unsigned = v - 27, fields[:6]
        elif v >= 35:
            parity = (v - 35) % 2
            unsigned = [*fields[:6], rlp.encode_uint((v - 35) // 2), b"", b""]
        else:
            raise TransactionError(f"legacy v = {v} is neither 27/28 nor EIP-155")
        signing = keccak256(rlp.encode(unsigned))
    else:
        nonce = _uint(fields[1], "nonce")
        if v > 1:
            raise TransactionError(f"yParity must be 0 or 1, got {v}")
        parity = v
        signing = keccak256(bytes([tx_type]) + rlp.encode(fields[:-3]))
    sender = recover_address(signing, parity, r, s)
    canonical = bytes([tx_type]) + rlp.encode(fields) if network else raw
    return SignedTx(
        tx_hash="0x" + keccak256(canonical).hex(),
        tx_type=tx_type,
        sender=sender,
        nonce=nonce,
        network_form=network,
    )


def _decode_unsigned(raw: bytes, tx_type: int, fields: list[rlp.Item]) -> SignedTx:
    """An L2 type's hash, sender (a field, or ArbOS) and nonce (if it states one)."""
    if tx_type == ARBITRUM_LEGACY:  # the classic tx inside, signed unless a sender is given
        inner = rlp.encode(fields[0])
        legacy = decode_signed(inner) if len(fields) == 4 else None
        sender = legacy.sender if legacy else "0x" + _bytes(fields[4]).hex()
        return SignedTx(
            tx_hash=transaction_hash(raw),
            tx_type=tx_type,
            sender=sender,
            nonce=_uint(_list(fields[0])[0], "nonce"),
            network_form=False,
        )
    layout = LAYOUTS[tx_type]
    if layout.sender is None:
        sender = str(layout.fixed_sender)
    else:
        sender = "0x" + _bytes(fields[layout.sender]).hex()
    return SignedTx(
        tx_hash="0x" + keccak256(raw).hex(),
        tx_type=tx_type,
        sender=sender,
        nonce=None if layout.nonce is None else _uint(fields[layout.nonce], "nonce"),
        network_form=False,
    )


def _bytes(item: rlp.Item) -> bytes:
    if not isinstance(item, bytes):
        raise TransactionError("a field is a list, not bytes")
    return item


def _list(item: rlp.Item) -> list[rlp.Item]:
    if isinstance(item, bytes):
        raise TransactionError("a field is bytes, not a list")
    return list(item)


def recover_address(message_hash: bytes, parity: int, r: int, s: int) -> str:
    """The 0x lower-case address whose key signed ``message_hash`` with (parity, r, s).

    Refuses a high ``s`` (EIP-2: each signature has one valid form) and out-of-range values.
    """
    if not (0 < r < SECP256K1_N and 0 < s <= SECP256K1_N // 2):
        raise TransactionError("signature r or s is out of range (or s is not low, EIP-2)")
    if parity not in (0, 1):
        raise TransactionError(f"recovery id must be 0 or 1, got {parity}")
    if len(message_hash) != 32:
        raise TransactionError(f"message hash is {len(message_hash)} bytes, not 32")
    # libsecp256k1 through coincurve directly (not eth-keys, which wraps the same call): the
    # offline verifier then needs one small crypto package, so a slim client install stays slim.
    signature = r.to_bytes(32, "big") + s.to_bytes(32, "big") + bytes([parity])
    try:
        public = PublicKey.from_signature_and_message(signature, message_hash, hasher=None)
    except ValueError as exc:
        raise TransactionError(f"signature does not recover a key: {exc}") from exc
    return "0x" + keccak256(public.format(compressed=False)[1:])[-20:].hex()
