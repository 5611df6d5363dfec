"""Validators for the hex strings of the chain: transaction hashes, block hashes, addresses.

Values arrive from the outside (a node's JSON-RPC answer, an HTTP request, a CLI argument) as
loose strings in any case. The core accepts them only as ``0x`` followed by exactly 64 hex
digits (a 32-byte hash) or 40 hex digits (a 20-byte address), in upper, lower or mixed case,
and hands them on in one spelling: lower case. Anything else (no prefix, a wrong length, a
non-hex digit, surrounding white space, a value that is not a ``str``) is refused with
:class:`~guard.errors.InvalidHash` or :class:`~guard.errors.InvalidAddress`, whose message
names the field (``what``) and the offending value.

:func:`parse_address` accepts mixed-case addresses without checking their EIP-55 checksum
(a node's answers); :func:`parse_checked_address` is for what a person typed: a mixed-case
address whose checksum is wrong is a typo, refused (all lower or all upper case carries no
checksum). Either way the core compares addresses in lower case only.
"""

import re

from guard.errors import InvalidAddress, InvalidHash
from guard.hashing import keccak256
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


def checksum_address(address: str) -> str:
    """The EIP-55 spelling of a 0x address (any case in, mixed case out)."""
    lower = address[2:].lower()
    digest = keccak256(lower.encode()).hex()
    return "0x" + "".join(
        c.upper() if c.isalpha() and int(digest[i], 16) >= 8 else c for i, c in enumerate(lower)
    )


def parse_checked_address(value: object, what: str = "address") -> Address:
    """:func:`parse_address`, and a mixed-case ``value`` must carry its EIP-55 checksum
    (:class:`~guard.errors.InvalidAddress` naming the expected spelling otherwise)."""
    address = parse_address(value, what)
    body = str(value)[2:]
    if body != body.lower() and body != body.upper() and checksum_address(address) != value:
        expected = checksum_address(address)
        raise InvalidAddress(what, value, f"has a wrong EIP-55 checksum (expected {expected})")
    return address
