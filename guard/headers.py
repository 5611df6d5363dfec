"""Block headers as receipts carry them, and their hash: keccak256(rlp(fields)).

A receipt carries each header as a JSON object with the field names of JSON-RPC
(``eth_getBlockByNumber``) and the values as the node gives them: lower-case 0x hex. The
verifier re-encodes the fields in the consensus order below and hashes them itself, so a
header whose claimed ``hash`` is not its real hash, or whose parent link is wrong, is caught
without trusting anyone.

The consensus order: the fifteen fields every header has, then the fields later forks added,
in fork order — ``baseFeePerGas`` (London), ``withdrawalsRoot`` (Shanghai), ``blobGasUsed``,
``excessBlobGas``, ``parentBeaconBlockRoot`` (Cancun), ``requestsHash`` (Prague). An absent
optional field is skipped, not encoded as empty: on mainnet a header has a prefix of them,
but a dev node's genesis on an older fork can have gaps (anvil's London genesis carries
``blobGasUsed`` and ``excessBlobGas`` without ``withdrawalsRoot``), and it hashes what it has.

Pitfalls this module exists for: ``nonce`` is 8 raw bytes (``0x0000000000000000``), not a
quantity; quantities are minimal big-endian integers (zero is the empty string); and values
must be in their one canonical spelling (lower case; quantities without leading zeros), so
that a changed JSON value can never leave the hash unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping

from guard import rlp
from guard.canonical import FrozenJson
from guard.errors import GuardError
from guard.hashing import keccak256

HASH32, ADDRESS, BLOOM, NONCE, QUANTITY, DATA = "hash32", "address", "bloom", "nonce", "q", "data"

REQUIRED_FIELDS: tuple[tuple[str, str], ...] = (
    ("parentHash", HASH32),
    ("sha3Uncles", HASH32),
    ("miner", ADDRESS),
    ("stateRoot", HASH32),
    ("transactionsRoot", HASH32),
    ("receiptsRoot", HASH32),
    ("logsBloom", BLOOM),
    ("difficulty", QUANTITY),
    ("number", QUANTITY),
    ("gasLimit", QUANTITY),
    ("gasUsed", QUANTITY),
    ("timestamp", QUANTITY),
    ("extraData", DATA),
    ("mixHash", HASH32),
    ("nonce", NONCE),
)
"""The fields of every header, in consensus (RLP) order, with their encoding."""

OPTIONAL_FIELDS: tuple[tuple[str, str], ...] = (
    ("baseFeePerGas", QUANTITY),
    ("withdrawalsRoot", HASH32),
    ("blobGasUsed", QUANTITY),
    ("excessBlobGas", QUANTITY),
    ("parentBeaconBlockRoot", HASH32),
    ("requestsHash", HASH32),
)
"""Fields added by later forks, in fork order; encoded only when present."""

FIELD_NAMES = frozenset(name for name, _ in REQUIRED_FIELDS + OPTIONAL_FIELDS)
"""Every field a receipt's header may carry, besides its claimed ``hash``."""

_SIZES = {HASH32: 32, ADDRESS: 20, BLOOM: 256, NONCE: 8}


class HeaderError(GuardError, ValueError):
    """A header object that cannot be encoded (a missing, unknown or malformed field)."""


def field_bytes(name: str, kind: str, value: object) -> bytes:
    """The RLP string of one header field from its canonical 0x-hex JSON value."""
    if not isinstance(value, str):
        raise HeaderError(f"{name} must be a 0x hex string, got {type(value).__name__}")
    if kind == QUANTITY:
        try:
            number = int(value, 16) if value[:2] == "0x" else -1
        except ValueError:
            number = -1
        # hex() is the one canonical spelling: lower case, no leading zeros, "0x0" for 0.
        if number < 0 or hex(number) != value:
            raise HeaderError(
                f"{name} {value!r} is not a canonical hex quantity (lower case, no leading zeros)"
            )
        return number.to_bytes((number.bit_length() + 7) // 8, "big")
    try:
        data = bytes.fromhex(value[2:])
    except ValueError:
        data = None
    # fromhex also takes upper case and spaces: the round trip keeps one spelling only.
    if data is None or value[:2] != "0x" or data.hex() != value[2:]:
        raise HeaderError(f"{name} {value!r} is not lower-case 0x hex of whole bytes")
    size = _SIZES.get(kind)
    if size is not None and len(data) != size:
        raise HeaderError(f"{name} must be {size} bytes, got {len(data)}")
    return data


def header_fields(header: Mapping[str, object]) -> list[bytes]:
    """The header's RLP list: required fields, then the optional ones present, in order."""
    unknown = sorted(set(header) - FIELD_NAMES - {"hash"})
    if unknown:
        raise HeaderError(f"unknown field {unknown[0]!r}")
    out = []
    for name, kind in REQUIRED_FIELDS:
        if name not in header:
            raise HeaderError(f"{name} is missing")
        out.append(field_bytes(name, kind, header[name]))
    for name, kind in OPTIONAL_FIELDS:
        if name in header:
            out.append(field_bytes(name, kind, header[name]))
    return out


def header_hash(header: Mapping[str, object]) -> str:
    """``0x`` + keccak256(rlp(fields)) of a header object; :class:`HeaderError` if malformed.
    A frozen header (every receipt of a block carries the same ones) is hashed once."""
    if type(header) is FrozenJson:
        return header.derived("header_hash", _header_hash)
    return _header_hash(header)


def _header_hash(header: Mapping[str, object]) -> str:
    return "0x" + keccak256(rlp.encode(header_fields(header))).hex()


def header_number(header: Mapping[str, object]) -> int:
    """The header's ``number`` as an int; :class:`HeaderError` if malformed."""
    return int.from_bytes(field_bytes("number", QUANTITY, header.get("number")), "big")


def header_json(rpc_block: Mapping[str, object]) -> dict[str, str]:
    """The header object a receipt carries, taken from a JSON-RPC block (any extra keys such
    as ``transactions``, ``size`` or ``totalDifficulty`` are dropped)."""
    out = {name: str(rpc_block[name]) for name in FIELD_NAMES if name in rpc_block}
    out["hash"] = str(rpc_block["hash"])
    return out
