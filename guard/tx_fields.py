"""Each field of a signed transaction read as strictly as consensus clients read it.

RLP itself only says "a byte string" or "a list". A client decodes each field of a
transaction into a typed value (geth: ``uint64`` nonce and gas, 256-bit integers, a 20-byte
``Address``, 32-byte storage keys) and refuses bytes that do not fit: an integer with a
leading zero byte (it would have a second spelling), one wider than its type, a list where
a string belongs, an address that is not exactly 20 bytes. A transaction with such a field
is not a transaction of any chain: accepting it would let two byte strings (two hashes)
stand for one transaction, or prove a "transaction" no block could hold.

The official Ethereum TransactionTests (tests/vectors/ethereum/) pin these rules. What is
*not* checked here is validity in a state or a fork (intrinsic gas, a nonce of 2**64 - 1,
gas x price overflowing, the chain id matching a chain): that is the chain's job, and a
transaction a block holds has passed it.

Types this module has no schema for (types added elsewhere, such as rollup system
transactions) are left to their own decoders: :func:`check_fields` returns without a check.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from guard import rlp


class FieldError(ValueError):
    """A field that no consensus client would decode (the caller wraps it in its own error)."""


Check = Callable[[rlp.Item, str], None]


def _string(item: rlp.Item, what: str) -> bytes:
    if not isinstance(item, bytes):
        raise FieldError(f"{what} is a list, not a byte string")
    return item


def _uint(width: int) -> Check:
    """An unsigned integer of at most ``width`` bytes, without leading zero bytes."""

    def check(item: rlp.Item, what: str) -> None:
        data = _string(item, what)
        if data[:1] == b"\x00":
            raise FieldError(f"{what} has a leading zero byte")
        if len(data) > width:
            raise FieldError(f"{what} is {len(data)} bytes, wider than {width * 8} bits")

    return check


def _fixed(size: int, empty_ok: bool = False) -> Check:
    """Exactly ``size`` bytes (or empty, for a contract creation's ``to``)."""

    def check(item: rlp.Item, what: str) -> None:
        data = _string(item, what)
        if len(data) != size and not (empty_ok and not data):
            allowed = f"{size} bytes or empty" if empty_ok else f"{size} bytes"
            raise FieldError(f"{what} must be {allowed}, got {len(data)}")

    return check


def _bytes(item: rlp.Item, what: str) -> None:
    _string(item, what)


def _list_of(check: Check) -> Check:
    def check_list(item: rlp.Item, what: str) -> None:
        if isinstance(item, bytes):
            raise FieldError(f"{what} is a byte string, not a list")
        for i, child in enumerate(item):
            check(child, f"{what}[{i}]")

    return check_list


def _record(*schema: tuple[str, Check]) -> Check:
    """A list of exactly these named fields."""

    def check(item: rlp.Item, what: str) -> None:
        if isinstance(item, bytes):
            raise FieldError(f"{what} is a byte string, not a list")
        if len(item) != len(schema):
            raise FieldError(f"{what} has {len(item)} fields, expected {len(schema)}")
        for (name, check_field), child in zip(schema, item, strict=True):
            check_field(child, f"{what}.{name}")

    return check


U8, U64, U256 = _uint(1), _uint(8), _uint(32)
ADDRESS = _fixed(20)
TO = _fixed(20, empty_ok=True)
HASH = _fixed(32)
ACCESS_LIST = _list_of(_record(("address", ADDRESS), ("storageKeys", _list_of(HASH))))
AUTHORIZATIONS = _list_of(
    _record(
        ("chainId", U256),
        ("address", ADDRESS),
        ("nonce", U64),
        ("yParity", U8),
        ("r", U256),
        ("s", U256),
    )
)

_SIGNATURE: tuple[tuple[str, Check], ...] = (("yParity", U256), ("r", U256), ("s", U256))
_FEES_1559: tuple[tuple[str, Check], ...] = (
    ("chainId", U256),
    ("nonce", U64),
    ("maxPriorityFeePerGas", U256),
    ("maxFeePerGas", U256),
    ("gas", U64),
)

SCHEMAS: dict[int, tuple[tuple[str, Check], ...]] = {
    0: (
        ("nonce", U64),
        ("gasPrice", U256),
        ("gas", U64),
        ("to", TO),
        ("value", U256),
        ("data", _bytes),
        ("v", U256),
        ("r", U256),
        ("s", U256),
    ),
    1: (
        ("chainId", U256),
        ("nonce", U64),
        ("gasPrice", U256),
        ("gas", U64),
        ("to", TO),
        ("value", U256),
        ("data", _bytes),
        ("accessList", ACCESS_LIST),
        *_SIGNATURE,
    ),
    2: (
        *_FEES_1559,
        ("to", TO),
        ("value", U256),
        ("data", _bytes),
        ("accessList", ACCESS_LIST),
        *_SIGNATURE,
    ),
    3: (
        *_FEES_1559,
        ("to", ADDRESS),
        ("value", U256),
        ("data", _bytes),
        ("accessList", ACCESS_LIST),
        ("maxFeePerBlobGas", U256),
        ("blobVersionedHashes", _list_of(HASH)),
        *_SIGNATURE,
    ),
    4: (
        *_FEES_1559,
        ("to", ADDRESS),
        ("value", U256),
        ("data", _bytes),
        ("accessList", ACCESS_LIST),
        ("authorizationList", AUTHORIZATIONS),
        *_SIGNATURE,
    ),
}
"""Field names and checks of each transaction type, signature last (legacy ``v`` is a
256-bit integer: EIP-155 folds the chain id into it)."""


def check_fields(tx_type: int, fields: Sequence[rlp.Item]) -> None:
    """Refuse a field of a type-``tx_type`` transaction that consensus clients would not
    decode (:class:`FieldError` naming it: ``accessList[0].address must be 20 bytes, got
    19``). The caller has checked the number of fields; a type without a schema passes."""
    schema = SCHEMAS.get(tx_type)
    if schema is None:
        return
    if len(fields) != len(schema):
        raise FieldError(f"type {tx_type} has {len(schema)} fields, got {len(fields)}")
    for (name, check), item in zip(schema, fields, strict=True):
        check(item, name)
