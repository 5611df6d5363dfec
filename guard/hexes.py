"""Validators for the hex strings of the chain: transaction hashes, block hashes, addresses.

Values arrive from the outside (a node's JSON-RPC answer, an HTTP request, a CLI argument) as
loose strings in any case. The core accepts them only as ``0x`` followed by exactly 64 hex
digits (a 32-byte hash) or 40 hex digits (a 20-byte address), in upper, lower or mixed case,
and hands them on in one spelling: lower case. Anything else (no prefix, a wrong length, a
non-hex digit, surrounding white space, a value that is not a ``str``) is refused with
:class:`~guard.errors.InvalidHash` or :class:`~guard.errors.InvalidAddress`, whose message
names the field (``what``) and the offending value.

Mixed-case addresses are accepted without checking their EIP-55 checksum: the checksum is a
typing aid for humans, and the core compares addresses in lower case only.
"""

import re

from guard.errors import InvalidAddress, InvalidHash
from guard.types import Address, BlockHash, TxHash

_HASH = re.compile(r"0[xX][0-9a-fA-F]{64}")
_ADDRESS = re.compile(r"0[xX][0-9a-fA-F]{40}")


def _hash32(value: object, what: str) -> str:
    """Return ``value`` lower-cased if it is a 0x-prefixed 32-byte hex string."""
    if not isinstance(value, str) or _HASH.fullmatch(value) is None:
        raise InvalidHash(what, value)
    return value.lower()


def parse_tx_hash(value: object, what: str = "tx_hash") -> TxHash:
    """Validate a transaction hash and return it lower-cased.

    Raises :class:`~guard.errors.InvalidHash` (naming ``what``) unless ``value`` is a ``str``
    of ``0x`` and 64 hex digits.
    """
    return TxHash(_hash32(value, what))


def parse_block_hash(value: object, what: str = "block_hash") -> BlockHash:
    """Validate a block hash and return it lower-cased.

    Raises :class:`~guard.errors.InvalidHash` (naming ``what``) unless ``value`` is a ``str``
    of ``0x`` and 64 hex digits.
    """
    return BlockHash(_hash32(value, what))


def parse_address(value: object, what: str = "address") -> Address:
    """Validate an account address and return it lower-cased (EIP-55 case is not checked).

    Raises :class:`~guard.errors.InvalidAddress` (naming ``what``) unless ``value`` is a
    ``str`` of ``0x`` and 40 hex digits.
    """
    if not isinstance(value, str) or _ADDRESS.fullmatch(value) is None:
        raise InvalidAddress(what, value)
    return Address(value.lower())
