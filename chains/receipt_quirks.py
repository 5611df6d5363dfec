"""Receipts tries that a node built in a non-canonical form, and which receipts that spoils.

Ganache 7.9.2 commits a reverted receipt's status as the byte ``0x00`` in its receipts
trie, where EIP-658 (and every client) commits the empty string. Its ``receiptsRoot``
therefore does not rebuild from the canonical leaves. Rebuilt with Ganache's leaves it
does: then the block's *successful* receipts (canonical leaves, the header's root) are
proven as usual, and only the reverted ones cannot be: their leaf is not the canonical
encoding, so an offline verifier would (rightly) reject it. Refusing to sign those is
right; the reason says exactly why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chains.receipt_encode import UNTYPED_RECEIPTS, encode_receipt
from guard import rlp


def _status_zero(raw: Mapping[str, Any]) -> bool:
    status = raw.get("status")
    return status is not None and int(str(status), 16) == 0


def zero_byte_status_leaves(
    answers: Sequence[Mapping[str, Any]],
) -> tuple[list[bytes], dict[int, str]]:
    """The block's receipt leaves with each failed status committed as ``0x00`` (Ganache's
    form), and, by tx index, why each such receipt cannot be proven canonically."""
    leaves: list[bytes] = []
    unprovable: dict[int, str] = {}
    for index, raw in enumerate(answers):
        leaf = encode_receipt(raw)
        if not _status_zero(raw):
            leaves.append(leaf)
            continue
        tx_type = int(str(raw.get("type", "0x0")), 16)
        typed = tx_type not in UNTYPED_RECEIPTS
        fields = rlp.decode(leaf[1:] if typed else leaf)
        if not isinstance(fields, list) or not fields:  # not a receipt list: left as it is
            leaves.append(leaf)
            continue
        fields[0] = b"\x00"
        payload = rlp.encode(fields)
        leaves.append(bytes([tx_type]) + payload if typed else payload)
        unprovable[index] = (
            f"the node commits the receipt of tx {raw.get('transactionHash')} with its failed "
            "status as 0x00, not the empty string of EIP-658: its receipts trie is not "
            "canonical there, so no verifiable proof of that receipt exists (the block's "
            "other receipts are proven)"
        )
    return leaves, unprovable
