"""Named quantities of the settlement domain.

A bare ``int`` says nothing about what it counts; these names do. They are ``NewType``s, so
they cost nothing at run time while mypy keeps a block number from being passed where a
confirmation count is expected.
"""

from typing import NewType

ChainId = NewType("ChainId", int)
"""EIP-155 chain id, as answered by ``eth_chainId``."""

BlockNumber = NewType("BlockNumber", int)
"""Height of a block; genesis is 0."""

BlockHash = NewType("BlockHash", str)
"""0x-prefixed, lower-case, 32-byte hex hash of a block header."""

TxHash = NewType("TxHash", str)
"""0x-prefixed, lower-case, 32-byte hex hash of a transaction."""

Address = NewType("Address", str)
"""0x-prefixed, lower-case, 20-byte hex account address."""

Confirmations = NewType("Confirmations", int)
"""Depth of a block under the head: head - block + 1; 0 while not included."""

UnixMillis = NewType("UnixMillis", int)
"""Wall-clock instant in whole milliseconds since the Unix epoch (no floats in digests)."""

SettlementId = NewType("SettlementId", str)
"""Stable identifier of a watched settlement."""
