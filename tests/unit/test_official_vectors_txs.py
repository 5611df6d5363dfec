"""The official Ethereum TransactionTests, every vector, against guard.txs.

Source: ethereum/tests, commit 4c87ebbf024a3e9ec842bcce90564f629a3bcd82, ``TransactionTests/``
(copied unchanged to tests/vectors/ethereum/TransactionTests/, see the README there).

Each vector is raw ``txbytes`` and, per fork, either the ``hash`` and ``sender`` of a valid
transaction or the ``exception`` a client raises. guard.txs decodes transactions that blocks
already hold, of any type it knows, with no chain id and no state: it follows the **latest
fork a vector lists** (Cancun; Shanghai for the vectors filled before Cancun), and each
vector is then one of:

* valid there: ``decode_signed`` and ``transaction_hash`` give its hash and sender;
* refused there for an *encoding* reason (:data:`ENCODING`: the bytes are no transaction of
  any chain): ``decode_signed`` raises :class:`TransactionError`;
* refused there for a reason of *state, fork or chain* (:data:`CONTEXT`: the bytes are a
  well-formed transaction that a chain would not accept): not the decoder's job. These are
  asserted only to decode or fail with :class:`TransactionError`, never another exception.

An exception name in neither table fails the test, so a new kind of vector cannot pass
unclassified. Older forks differ from the latest in ways a decoder of included txs does
not model: typed txs before Berlin (``TYPE_NOT_SUPPORTED``), high-s signatures before
Homestead (refused here, EIP-2), EIP-155 ``v`` before Spurious Dragon.

Not copied (and so not run): ``ttData/String10MbData.json`` and
``ttData/String10MbDataNotEnoughGAS.json`` (a 10 MB data field each; about 20 MB of hex).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guard.hashing import keccak256
from guard.txs import TransactionError, decode_signed, transaction_hash

VECTORS = Path(__file__).parents[1] / "vectors" / "ethereum" / "TransactionTests"

FORKS = (
    "Frontier",
    "Homestead",
    "EIP150",
    "EIP158",
    "Byzantium",
    "Constantinople",
    "ConstantinopleFix",
    "Istanbul",
    "Berlin",
    "London",
    "Paris",
    "Shanghai",
    "Cancun",
    "Prague",
)
"""Fork names in order; a vector is judged by the last of these it lists."""

_PREFIX = "TransactionException."

ENCODING = {
    "RLP_ERROR_SIZE": "RLP lengths that do not match the input",
    "RLP_ERROR_SIZE_LEADING_ZEROS": "an RLP length with a leading zero byte",
    "RLP_ERROR_EOF": "input ends inside an item",
    "RLP_INVALID_HEADER": "the transaction is not an RLP list",
    "RLP_TOO_FEW_ELEMENTS": "fewer fields than the type has",
    "RLP_TOO_MANY_ELEMENTS": "more fields than the type has",
    "RLP_LEADING_ZEROS_DATA_SIZE": "non-canonical RLP length",
    "RLP_LEADING_ZEROS_NONCE_SIZE": "a byte below 0x80 wrapped as a string",
    "RLP_LEADING_ZEROS_NONCE": "integer with a leading zero byte",
    "RLP_LEADING_ZEROS_GASLIMIT": "integer with a leading zero byte",
    "RLP_LEADING_ZEROS_GASPRICE": "integer with a leading zero byte",
    "RLP_LEADING_ZEROS_VALUE": "integer with a leading zero byte",
    "RLP_LEADING_ZEROS_BASEFEE": "integer with a leading zero byte (maxFeePerGas)",
    "RLP_LEADING_ZEROS_PRIORITY_FEE": "integer with a leading zero byte",
    "RLP_LEADING_ZEROS_V": "integer with a leading zero byte",
    "RLP_LEADING_ZEROS_R": "integer with a leading zero byte",
    "RLP_LEADING_ZEROS_S": "integer with a leading zero byte",
    "RLP_INVALID_NONCE": "a list where an integer belongs",
    "RLP_INVALID_GASLIMIT": "a list where an integer belongs",
    "RLP_INVALID_TO": "a list where an address belongs",
    "RLP_INVALID_DATA": "a list where bytes belong",
    "RLP_INVALID_SIGNATURE_R": "a list where an integer belongs",
    "RLP_INVALID_SIGNATURE_S": "a list where an integer belongs",
    "RLP_INVALID_ACCESS_LIST_ADDRESS_TOO_LONG": "access-list address not 20 bytes",
    "RLP_INVALID_ACCESS_LIST_ADDRESS_TOO_SHORT": "access-list address not 20 bytes",
    "RLP_INVALID_ACCESS_LIST_STORAGE_TOO_LONG": "storage key not 32 bytes",
    "RLP_INVALID_ACCESS_LIST_STORAGE_TOO_SHORT": "storage key not 32 bytes",
    "ADDRESS_TOO_LONG": "`to` neither 20 bytes nor empty",
    "ADDRESS_TOO_SHORT": "`to` neither 20 bytes nor empty",
    "TYPE_NOT_SUPPORTED": "no known transaction type (or a type byte with another shape)",
    "NONCE_OVERFLOW": "nonce wider than 64 bits (clients decode it as uint64)",
    "GASLIMIT_OVERFLOW": "gas wider than 64 bits (clients decode it as uint64)",
    "GASPRICE_OVERFLOW": "fee wider than 256 bits",
    "PRIORITY_OVERFLOW": "fee wider than 256 bits",
    "VALUE_OVERFLOW": "value wider than 256 bits",
    "INVALID_SIGNATURE_VRS": "v, r or s out of range (r, s in 1..n-1, low s; v 27/28 or >= 35)",
    "EC_RECOVERY_FAIL": "the signature recovers no public key",
}
"""Exceptions for bytes that are no transaction: the decoder must refuse them."""

CONTEXT = {
    "INTRINSIC_GAS_TOO_LOW": "gas below the intrinsic cost: a state-transition rule",
    "INITCODE_SIZE_EXCEEDED": "EIP-3860 init code limit: a validity rule of Shanghai on",
    "NONCE_TOO_BIG": "nonce 2**64 - 1 (EIP-2681): a validity rule, the field decodes",
    "GASLIMIT_PRICE_PRODUCT_OVERFLOW": "gas x price beyond 256 bits: a balance-check rule",
    "PRIORITY_GREATER_THAN_MAX_FEE_PER_GAS_2": "tip above max fee: an EIP-1559 validity rule",
    "INVALID_CHAINID": "v encodes a chain id other than the test chain's (1): the decoder "
    "has no chain id (vectors whose v fits no rule at all are refused anyway)",
}
"""Exceptions about state, fork or chain: not the decoder's job (see the module doc)."""


def _vectors() -> Iterator[Any]:
    for path in sorted(VECTORS.glob("*/*.json")):
        for name, vector in json.loads(path.read_text()).items():
            yield pytest.param(vector, id=f"{path.parent.name}/{name}")


ALL = list(_vectors())


def _reference(vector: dict[str, Any]) -> dict[str, str]:
    """The result of the latest fork the vector lists."""
    forks = [fork for fork in FORKS if fork in vector["result"]]
    assert forks, f"no known fork among {sorted(vector['result'])}"
    result: dict[str, str] = vector["result"][forks[-1]]
    return result


def test_every_vector_file_is_here_and_read() -> None:
    assert len(list(VECTORS.glob("*/*.json"))) == 210
    assert len(ALL) == 210
    assert not set(ENCODING) & set(CONTEXT)


@pytest.mark.parametrize("vector", ALL)
def test_official_transaction_vector(vector: dict[str, Any]) -> None:
    raw = bytes.fromhex(vector["txbytes"].removeprefix("0x"))
    result = _reference(vector)
    if "exception" not in result:
        tx = decode_signed(raw)
        assert (tx.tx_hash, tx.sender) == (result["hash"], result["sender"])
        assert transaction_hash(raw) == result["hash"]
        return
    exception = result["exception"].removeprefix(_PREFIX)
    if exception in ENCODING:
        with pytest.raises(TransactionError):
            decode_signed(raw)
    elif exception in CONTEXT:
        try:
            tx = decode_signed(raw)
        except TransactionError:
            return
        assert tx.tx_hash == "0x" + keccak256(raw).hex()
    else:
        pytest.fail(f"{exception} is classified neither as encoding nor as context")


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("ttGasPrice/TransactionWithLeadingZerosGasPrice", "gasPrice has a leading zero byte"),
        ("ttValue/TransactionWithLeadingZerosValue", "value has a leading zero byte"),
        ("ttEIP1559/maxFeePerGas00prefix", "maxFeePerGas has a leading zero byte"),
        ("ttEIP1559/maxPriorityFeePerGas00prefix", "maxPriorityFeePerGas has a leading zero"),
        ("ttAddress/AddressLessThan20", "to must be 20 bytes or empty, got 7"),
        ("ttEIP2930/accessListAddressLessThan20", "accessList[0].address must be 20 bytes"),
        ("ttEIP2930/accessListAddressGreaterThan20", "accessList[0].address must be 20 bytes"),
        ("ttEIP2930/accessList0AddressPrefix00", "accessList[0].address must be 20 bytes"),
        ("ttEIP2930/accessListStorage0x0001", "storageKeys[0] must be 32 bytes, got 2"),
        ("ttEIP2930/accessListStorageOver32Bytes", "storageKeys[0] must be 32 bytes, got 33"),
        ("ttEIP2930/accessListStoragePrefix00", "storageKeys[0] must be 32 bytes, got 33"),
        ("ttNonce/TransactionWithHighNonce64", "nonce is 9 bytes, wider than 64 bits"),
    ],
)
def test_refusal_names_the_field(name: str, reason: str) -> None:
    """The acceptance-test findings on transactions: each refused, naming the field."""
    (vector,) = [p.values[0] for p in ALL if p.id == name]
    with pytest.raises(TransactionError, match=re.escape(reason)):
        decode_signed(bytes.fromhex(vector["txbytes"][2:]))
