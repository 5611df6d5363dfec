"""Transaction types of the L2 chains, as their blocks commit them: OP Stack and Arbitrum.

None of these is signed. The chain itself (its derivation from L1, or ArbOS) puts them in
blocks, so the sender is a field of the tx (or, for Arbitrum's internal txs, always ArbOS)
and the hash is keccak256 of the typed bytes ``type || rlp(fields)``, as for any typed tx.
The one exception is Arbitrum's classic-era wrapper (0x78), whose hash is a field of its own.

Field order is the reference implementations' struct order (go-ethereum's RLP encodes a
struct as the list of its fields):

* ``0x7e`` OP Stack deposit (op-geth core/types/deposit_tx.go ``DepositTx``):
  ``[sourceHash, from, to, mint, value, gas, isSystemTx, data]``; ``to`` and ``mint`` are
  empty when nil (a creation; nothing minted). It consumes no nonce the tx states (the
  receipt's ``depositNonce`` says which one it used).
* Arbitrum Nitro (OffchainLabs/go-ethereum core/types/arb_types.go):
  ``0x64`` deposit ``[chainId, l1RequestId, from, to, value]``;
  ``0x65`` unsigned ``[chainId, from, nonce, gasFeeCap, gas, to, value, data]``;
  ``0x66`` contract ``[chainId, requestId, from, gasFeeCap, gas, to, value, data]``;
  ``0x68`` retry ``[chainId, nonce, from, gasFeeCap, gas, to, value, data, ticketId,
  refundTo, maxRefund, submissionFeeRefund]``;
  ``0x69`` submit retryable ``[chainId, requestId, from, l1BaseFee, depositValue, gasFeeCap,
  gas, retryTo, retryValue, beneficiary, maxSubmissionFee, feeRefundAddr, retryData]``;
  ``0x6a`` internal (ArbOS's own, first in every block) ``[chainId, data]``, sent by ArbOS
  (``0x…0a4b05``).
* ``0x78`` Arbitrum classic tx re-imported by Nitro (core/types/arbitrum_legacy_tx.go):
  ``[[nonce, gasPrice, gas, to, value, data, v, r, s], hashOverride, effectiveGasPrice,
  l1BlockNumber, sender?]``; its hash is ``hashOverride`` (the classic chain's hash), its
  sender the ``sender`` field when present, else the legacy signature's signer.

Each layout names the JSON-RPC field every RLP field comes from (guard/tx_encode.py builds
the bytes from a node's tx object with it) and its kind (what the bytes must look like).
This module is only data and shape checks: guard/txs.py decodes with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from guard import rlp

QUANTITY, DATA, ADDRESS, OPTIONAL_ADDRESS, HASH, BOOL = (
    "quantity",
    "data",
    "address",
    "address or empty",
    "hash",
    "bool",
)
"""Field kinds: an integer; bytes; 20 bytes; 20 bytes or empty (nil: a creation); 32 bytes;
``b""`` (false) or ``0x01`` (true)."""

OPTIONAL_QUANTITY = "quantity or empty"
"""An integer that may be nil (a deposit's ``mint``): encoded as empty, like 0."""

OP_DEPOSIT = 0x7E
ARBITRUM_LEGACY = 0x78
ARBOS_ADDRESS = "0x00000000000000000000000000000000000a4b05"
"""The sender of Arbitrum's internal txs (0x6a)."""


@dataclass(frozen=True)
class Layout:
    """One unsigned tx type: its fields in RLP order, and which of them is who and which."""

    name: str
    """What the chain calls it."""
    chain: str
    """``OP Stack`` or ``Arbitrum``."""
    fields: tuple[tuple[str, str], ...]
    """(JSON-RPC field name, kind) in RLP order."""
    sender: int | None
    """Index of the ``from`` field, or None when the sender is :attr:`fixed_sender`."""
    nonce: int | None = None
    """Index of the sender's nonce the tx consumes, or None when it states none."""
    fixed_sender: str | None = None
    """The sender when no field names it (ArbOS for internal txs)."""


_TO = ("to", OPTIONAL_ADDRESS)
_FEE_CAP = ("maxFeePerGas", QUANTITY)

LAYOUTS: dict[int, Layout] = {
    OP_DEPOSIT: Layout(
        "deposit",
        "OP Stack",
        (
            ("sourceHash", HASH),
            ("from", ADDRESS),
            _TO,
            ("mint", OPTIONAL_QUANTITY),
            ("value", QUANTITY),
            ("gas", QUANTITY),
            ("isSystemTx", BOOL),
            ("input", DATA),
        ),
        sender=1,
    ),
    0x64: Layout(
        "ArbitrumDepositTx",
        "Arbitrum",
        (
            ("chainId", QUANTITY),
            ("requestId", HASH),
            ("from", ADDRESS),
            ("to", ADDRESS),
            ("value", QUANTITY),
        ),
        sender=2,
    ),
    0x65: Layout(
        "ArbitrumUnsignedTx",
        "Arbitrum",
        (
            ("chainId", QUANTITY),
            ("from", ADDRESS),
            ("nonce", QUANTITY),
            _FEE_CAP,
            ("gas", QUANTITY),
            _TO,
            ("value", QUANTITY),
            ("input", DATA),
        ),
        sender=1,
        nonce=2,
    ),
    0x66: Layout(
        "ArbitrumContractTx",
        "Arbitrum",
        (
            ("chainId", QUANTITY),
            ("requestId", HASH),
            ("from", ADDRESS),
            _FEE_CAP,
            ("gas", QUANTITY),
            _TO,
            ("value", QUANTITY),
            ("input", DATA),
        ),
        sender=2,
    ),
    0x68: Layout(
        "ArbitrumRetryTx",
        "Arbitrum",
        (
            ("chainId", QUANTITY),
            ("nonce", QUANTITY),
            ("from", ADDRESS),
            _FEE_CAP,
            ("gas", QUANTITY),
            _TO,
            ("value", QUANTITY),
            ("input", DATA),
            ("ticketId", HASH),
            ("refundTo", ADDRESS),
            ("maxRefund", QUANTITY),
            ("submissionFeeRefund", QUANTITY),
        ),
        sender=2,
        nonce=1,
    ),
    0x69: Layout(
        "ArbitrumSubmitRetryableTx",
        "Arbitrum",
        (
            ("chainId", QUANTITY),
            ("requestId", HASH),
            ("from", ADDRESS),
            ("l1BaseFee", QUANTITY),
            ("depositValue", QUANTITY),
            _FEE_CAP,
            ("gas", QUANTITY),
            ("retryTo", OPTIONAL_ADDRESS),
            ("retryValue", QUANTITY),
            ("beneficiary", ADDRESS),
            ("maxSubmissionFee", QUANTITY),
            ("refundTo", ADDRESS),
            ("retryData", DATA),
        ),
        sender=2,
    ),
    0x6A: Layout(
        "ArbitrumInternalTx",
        "Arbitrum",
        (("chainId", QUANTITY), ("input", DATA)),
        sender=None,
        fixed_sender=ARBOS_ADDRESS,
    ),
}
"""The unsigned L2 types by type byte (0x78 has a shape of its own: see the module doc)."""

LEGACY_WRAPPER_FIELDS = (
    ("hash", HASH),
    ("effectiveGasPrice", QUANTITY),
    ("l1BlockNumber", QUANTITY),
)
"""The fields a 0x78 tx adds after its legacy tx list (then ``from`` when it was unsigned)."""


def shape_problem(kind: str, item: rlp.Item) -> str | None:
    """Why ``item`` is not a field of ``kind`` (None when it is)."""
    if not isinstance(item, bytes):
        return "is a list"
    size = len(item)
    if kind in (QUANTITY, OPTIONAL_QUANTITY):
        return "has a leading zero byte" if item[:1] == b"\x00" else None
    if kind == ADDRESS and size != 20:
        return f"is {size} bytes, not an address"
    if kind == OPTIONAL_ADDRESS and size not in (0, 20):
        return f"is {size} bytes, neither empty nor an address"
    if kind == HASH and size != 32:
        return f"is {size} bytes, not 32"
    if kind == BOOL and item not in (b"", b"\x01"):
        return "is not a boolean"
    return None


def layout_problem(tx_type: int, fields: Sequence[rlp.Item]) -> str | None:
    """Why ``fields`` are not a tx of the L2 type ``tx_type`` (None when they are)."""
    layout = LAYOUTS[tx_type]
    if len(fields) != len(layout.fields):
        return f"type 0x{tx_type:02x} has {len(layout.fields)} fields, got {len(fields)}"
    for (name, kind), item in zip(layout.fields, fields, strict=True):
        problem = shape_problem(kind, item)
        if problem is not None:
            return f"{layout.name} {name} {problem}"
    return None


def legacy_wrapper_problem(fields: Sequence[rlp.Item]) -> str | None:
    """Why ``fields`` are not a 0x78 tx (None when they are): a 9-field legacy list, then
    :data:`LEGACY_WRAPPER_FIELDS`, then optionally the sender."""
    if len(fields) not in (4, 5):
        return f"type 0x78 has 4 or 5 fields, got {len(fields)}"
    inner = fields[0]
    if isinstance(inner, bytes) or len(inner) != 9:
        return "type 0x78 does not start with a 9-field legacy tx"
    kinds = [kind for _, kind in LEGACY_WRAPPER_FIELDS] + [ADDRESS] * (len(fields) - 4)
    for (i, kind), item in zip(enumerate(kinds, 1), fields[1:], strict=True):
        problem = shape_problem(kind, item)
        if problem is not None:
            return f"ArbitrumLegacyTx field {i} {problem}"
    return None
