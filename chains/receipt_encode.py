"""Receipts as each chain's receipts trie holds them, from JSON-RPC receipt objects.

Ethereum (and every type 1-4 on any chain): ``rlp([status, cumulativeGasUsed, logsBloom,
logs])``, a typed receipt prefixed by its type byte, a legacy one not (before Byzantium the
status is a 32-byte state root).

OP Stack deposits (0x7e; op-geth core/types/receipt.go ``Receipts.EncodeIndex``): since
Canyon the trie holds ``rlp([status, gas, bloom, logs, depositNonce,
depositReceiptVersion])``; before Canyon (Bedrock, Regolith) the four fields only, even when
the node reports a ``depositNonce`` (Regolith stored it but left it out of the hash).
Whether a receipt is post-Canyon is told by the node's ``depositReceiptVersion``: present
exactly when the trie holds the six fields.

Arbitrum (OffchainLabs/go-ethereum core/types/receipt.go): its own types (0x64-0x6a) are
typed receipts of the four fields, like Ethereum's; receipts of its classic-era wrapper
(0x78) are untyped, as legacy receipts are. Arbitrum's extra JSON fields (``gasUsedForL1``,
``l1BlockNumber``) are not in the trie.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from guard import rlp
from guard.tx_types_l2 import ARBITRUM_LEGACY, OP_DEPOSIT

UNTYPED_RECEIPTS = frozenset([0, ARBITRUM_LEGACY])
"""Receipt types the trie holds without a type byte."""


def _data(value: Any) -> bytes:
    return bytes.fromhex(str(value)[2:])


def _uint(value: Any) -> bytes:
    return rlp.encode_uint(int(str(value), 16))


def encode_receipt(raw: Mapping[str, Any]) -> bytes:
    """``raw`` (a JSON-RPC receipt) as its receipts-trie leaf, in its chain's form."""
    tx_type = int(str(raw.get("type", "0x0")), 16)
    if raw.get("status") is not None:
        status = b"\x01" if int(str(raw["status"]), 16) == 1 else b""
    else:
        status = _data(raw["root"])  # pre-Byzantium: a state root
    logs: list[rlp.Item] = [
        [_data(log["address"]), [_data(t) for t in log["topics"]], _data(log["data"])]
        for log in raw.get("logs", [])
    ]
    fields: list[rlp.Item] = [
        status,
        _uint(raw["cumulativeGasUsed"]),
        _data(raw["logsBloom"]),
        logs,
    ]
    if tx_type == OP_DEPOSIT and raw.get("depositReceiptVersion") is not None:
        fields += [_uint(raw["depositNonce"]), _uint(raw["depositReceiptVersion"])]
    payload = rlp.encode(fields)
    return payload if tx_type in UNTYPED_RECEIPTS else bytes([tx_type]) + payload
