"""Frozen views of what a node tells us, converted from JSON-RPC dicts at the edge.

web3's dicts are loose (``TypedDict(total=False)``, hex strings, HexBytes); everything past
chains/rpc.py sees only these small frozen values, with named quantities.
"""

from __future__ import annotations

from dataclasses import dataclass

from guard.types import Address, BlockHash, BlockNumber, TxHash


@dataclass(frozen=True, slots=True)
class BlockHeader:
    """The part of a header that head tracking needs."""

    number: BlockNumber
    """Height of the block."""
    hash: BlockHash
    """Hash of the block."""
    parent_hash: BlockHash
    """Hash of the block below; the link reorg detection follows."""
    timestamp: int
    """Block timestamp in seconds, as the chain claims it."""


@dataclass(frozen=True, slots=True)
class BlockTx:
    """A transaction as listed in a block: enough to match watched txs and replacements."""

    hash: TxHash
    """Transaction hash."""
    sender: Address
    """The ``from`` address."""
    nonce: int
    """The sender's nonce this tx consumed."""
    to: Address | None = None
    """The recipient (None for a contract creation); a native payment's ``to``."""
    value: int = 0
    """Wei the tx itself moves to ``to`` (internal transfers by contracts are not here)."""


@dataclass(frozen=True, slots=True)
class Block:
    """A header with its transactions."""

    header: BlockHeader
    """The block's header."""
    txs: tuple[BlockTx, ...]
    """Its transactions in block order."""


@dataclass(frozen=True, slots=True)
class TxReceipt:
    """The outcome of an included transaction."""

    tx_hash: TxHash
    """Which transaction."""
    block_number: BlockNumber
    """Block that includes it."""
    block_hash: BlockHash
    """Hash of that block (receipts are only trusted against a known hash)."""
    tx_index: int
    """Position in the block."""
    status: int
    """1 success, 0 reverted."""


@dataclass(frozen=True, slots=True)
class TxInfo:
    """A transaction looked up by hash (pending or included)."""

    hash: TxHash
    """Transaction hash."""
    sender: Address
    """The ``from`` address."""
    nonce: int
    """The nonce it uses."""
    block_number: BlockNumber | None
    """Block that includes it, None while pending."""
    block_hash: BlockHash | None
    """Hash of that block, None while pending."""
