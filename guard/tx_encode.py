"""Signed transactions rebuilt from a node's JSON transaction objects.

A block fetched with its full transactions (``eth_getBlockByHash(hash, true)``) carries every
field a signed transaction is made of; this module puts them back into the bytes the chain
hashed, so that building a block's ``transactionsRoot`` needs no ``eth_getRawTransaction*``
call per transaction (on anvil, 500 of them cost more than the rest of a receipt).

Nothing here is trusted on its own: :func:`encode_checked` refuses an object whose rebuilt
bytes do not hash to the object's own ``hash`` (a field this version does not know, a node
that formats one differently), and the caller still compares the trie it builds with the
header's root. Either failure sends the caller back to the node's bytes.

Field order per type (see guard/txs.py for the forms): legacy ``[nonce, gasPrice, gas, to,
value, input, v, r, s]``; type 1 ``[chainId, nonce, gasPrice, gas, to, value, input,
accessList, yParity, r, s]``; type 2 ``[chainId, nonce, maxPriorityFeePerGas, maxFeePerGas,
gas, to, value, input, accessList, yParity, r, s]``; type 3 as type 2 with
``maxFeePerBlobGas, blobVersionedHashes`` before the signature; type 4 as type 2 with
``authorizationList`` (each ``[chainId, address, nonce, yParity, r, s]``) before it.

A blob transaction whose object carries its sidecar (anvil returns ``blobs``,
``commitments`` and ``proofs`` — EIP-4844 — or ``cellProofs`` — EIP-7594) also gets its
network form, which is what anvil commits to ``transactionsRoot``; its hash is still that of
the canonical form.

The unsigned L2 types (OP Stack deposits, Arbitrum's system and retryable txs) are read
field by field from the layouts in guard/tx_types_l2.py, which name the JSON field of each
RLP field. Arbitrum's classic-era wrapper (0x78) is its legacy tx list, then ``hash``,
``effectiveGasPrice`` and ``l1BlockNumber``, then ``from`` when the legacy tx is unsigned
(v, r and s all zero: a JSON object always names a sender, the bytes only then). Its hash
is a field, not keccak of the bytes, so only the ``transactionsRoot`` check guards it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from guard import rlp
from guard.hashing import keccak256
from guard.tx_types_l2 import (
    ADDRESS,
    ARBITRUM_LEGACY,
    BOOL,
    LAYOUTS,
    OPTIONAL_ADDRESS,
    OPTIONAL_QUANTITY,
    QUANTITY,
)
from guard.txs import TransactionError, transaction_hash


class TxObjectMismatch(TransactionError):
    """A transaction object whose rebuilt bytes do not hash to the hash it states."""


@dataclass(frozen=True)
class EncodedTx:
    """A signed transaction rebuilt from its JSON object."""

    canonical: bytes
    """The hashed form: ``keccak256(canonical)`` is the tx hash."""
    network: bytes | None
    """The blob network form (with the sidecar) when the object carried one, else None."""

    @property
    def committed(self) -> bytes:
        """The form a trie leaf holds when the node committed what it returned: the network
        form if there is one (anvil), else the canonical one."""
        return self.network if self.network is not None else self.canonical


def _field(tx: Mapping[str, Any], name: str) -> Any:
    if tx.get(name) is None:
        raise TransactionError(f"transaction object has no {name!r}")
    return tx[name]


def _hex(value: Any, what: str) -> bytes:
    if not isinstance(value, str) or not value.startswith("0x"):
        raise TransactionError(f"{what} is not 0x hex: {value!r:.80}")
    try:
        return bytes.fromhex(value[2:])
    except ValueError as exc:
        raise TransactionError(f"{what} is not 0x hex: {value!r:.80}") from exc


def _quantity(value: Any, what: str) -> bytes:
    if not isinstance(value, str) or not value.startswith("0x") or len(value) < 3:
        raise TransactionError(f"{what} is not a 0x quantity: {value!r:.80}")
    try:
        return rlp.encode_uint(int(value, 16))
    except ValueError as exc:
        raise TransactionError(f"{what} is not a 0x quantity: {value!r:.80}") from exc


def _list(value: Any, what: str) -> Sequence[Any]:
    if not isinstance(value, list):
        raise TransactionError(f"{what} is not a list: {value!r:.80}")
    return value


def _to(tx: Mapping[str, Any]) -> bytes:
    """The recipient; absent or null for a contract creation (legacy, types 1 and 2)."""
    value = tx.get("to")
    return b"" if value is None else _hex(value, "to")


def _access_list(tx: Mapping[str, Any]) -> list[rlp.Item]:
    out: list[rlp.Item] = []
    for entry in _list(_field(tx, "accessList"), "accessList"):
        if not isinstance(entry, Mapping):
            raise TransactionError(f"accessList entry is not an object: {entry!r:.80}")
        keys = _list(_field(entry, "storageKeys"), "accessList storageKeys")
        out.append(
            [
                _hex(_field(entry, "address"), "accessList address"),
                [_hex(k, "accessList storage key") for k in keys],
            ]
        )
    return out


def _authorizations(tx: Mapping[str, Any]) -> list[rlp.Item]:
    out: list[rlp.Item] = []
    for auth in _list(_field(tx, "authorizationList"), "authorizationList"):
        if not isinstance(auth, Mapping):
            raise TransactionError(f"authorization is not an object: {auth!r:.80}")
        out.append(
            [
                _quantity(_field(auth, "chainId"), "authorization chainId"),
                _hex(_field(auth, "address"), "authorization address"),
                _quantity(_field(auth, "nonce"), "authorization nonce"),
                _quantity(_parity(auth), "authorization yParity"),
                _quantity(_field(auth, "r"), "authorization r"),
                _quantity(_field(auth, "s"), "authorization s"),
            ]
        )
    return out


def _parity(obj: Mapping[str, Any]) -> Any:
    """``yParity``, or ``v`` from a node that only gives that (equal for typed txs)."""
    return obj["yParity"] if obj.get("yParity") is not None else _field(obj, "v")


def _q(name: str) -> Callable[[Mapping[str, Any]], rlp.Item]:
    return lambda tx: _quantity(_field(tx, name), name)


def _input(tx: Mapping[str, Any]) -> rlp.Item:
    return _hex(tx["input"] if tx.get("input") is not None else _field(tx, "data"), "input")


def _blob_hashes(tx: Mapping[str, Any]) -> rlp.Item:
    hashes = _list(_field(tx, "blobVersionedHashes"), "blobVersionedHashes")
    return [_hex(h, "blob versioned hash") for h in hashes]


_CHAIN, _NONCE, _GAS, _VALUE = _q("chainId"), _q("nonce"), _q("gas"), _q("value")
_PRICE, _TIP, _CAP = _q("gasPrice"), _q("maxPriorityFeePerGas"), _q("maxFeePerGas")
_BLOB_CAP, _R, _S = _q("maxFeePerBlobGas"), _q("r"), _q("s")


def _y(tx: Mapping[str, Any]) -> rlp.Item:
    return _quantity(_parity(tx), "yParity")


_DYNAMIC = (_CHAIN, _NONCE, _TIP, _CAP, _GAS, _to, _VALUE, _input, _access_list)
FIELDS: dict[int, tuple[Callable[[Mapping[str, Any]], rlp.Item], ...]] = {
    0: (_NONCE, _PRICE, _GAS, _to, _VALUE, _input, _q("v"), _R, _S),
    1: (_CHAIN, _NONCE, _PRICE, _GAS, _to, _VALUE, _input, _access_list, _y, _R, _S),
    2: (*_DYNAMIC, _y, _R, _S),
    3: (*_DYNAMIC, _BLOB_CAP, _blob_hashes, _y, _R, _S),
    4: (*_DYNAMIC, _authorizations, _y, _R, _S),
}
"""How each type's RLP fields are read from its JSON object, in order."""


def _sidecar(tx: Mapping[str, Any], fields: list[rlp.Item]) -> bytes | None:
    """The network form of a blob tx whose object carries its sidecar, else None."""
    if tx.get("blobs") is None:
        return None
    blobs = [_hex(b, "blob") for b in _list(tx["blobs"], "blobs")]
    commitments = [_hex(c, "commitment") for c in _list(_field(tx, "commitments"), "commitments")]
    if tx.get("cellProofs") is not None:  # EIP-7594: [tx, wrapper version 1, ...]
        proofs = [_hex(p, "cell proof") for p in _list(tx["cellProofs"], "cellProofs")]
        wrapper: list[rlp.Item] = [fields, b"\x01", blobs, commitments, proofs]
    else:  # EIP-4844: [tx, blobs, commitments, proofs]
        proofs = [_hex(p, "proof") for p in _list(_field(tx, "proofs"), "proofs")]
        wrapper = [fields, blobs, commitments, proofs]
    return b"\x03" + rlp.encode(wrapper)


def _l2_field(tx: Mapping[str, Any], name: str, kind: str) -> rlp.Item:
    """One field of an unsigned L2 type, read as its layout says."""
    if name == "input":
        return _input(tx)
    value = tx.get(name)
    if kind in (OPTIONAL_ADDRESS, OPTIONAL_QUANTITY) and value is None:
        return b""  # nil: a creation, nothing minted
    if kind == BOOL:  # absent is false (a node may leave a false flag out)
        if value not in (None, True, False):
            raise TransactionError(f"{name} is not a boolean: {value!r:.80}")
        return b"\x01" if value else b""
    if kind in (QUANTITY, OPTIONAL_QUANTITY):
        return _quantity(_field(tx, name), name)
    data = _hex(_field(tx, name), name)
    if kind in (ADDRESS, OPTIONAL_ADDRESS) and len(data) != 20:
        raise TransactionError(f"{name} is not a 20-byte address: {value!r:.80}")
    return data


def _arbitrum_legacy(tx: Mapping[str, Any]) -> bytes:
    """A 0x78 tx: the classic legacy tx list, then hash, effective gas price, L1 block, and
    the sender when the legacy tx carries no signature."""
    legacy = [read(tx) for read in FIELDS[0]]
    fields: list[rlp.Item] = [
        legacy,
        _hex(_field(tx, "hash"), "hash"),
        _quantity(_field(tx, "effectiveGasPrice"), "effectiveGasPrice"),
        _quantity(_field(tx, "l1BlockNumber"), "l1BlockNumber"),
    ]
    if legacy[-3:] == [b"", b"", b""]:
        fields.append(_hex(_field(tx, "from"), "from"))
    return bytes([ARBITRUM_LEGACY]) + rlp.encode(fields)


def encode_tx(tx: Mapping[str, Any]) -> EncodedTx:
    """The signed bytes of the JSON transaction object ``tx`` (types 0 to 4, and the L2 types
    of guard/tx_types_l2.py); :class:`TransactionError` naming the field that is missing or
    malformed."""
    tx_type = int.from_bytes(_quantity(tx.get("type", "0x0"), "type"), "big")
    if tx_type == ARBITRUM_LEGACY:
        return EncodedTx(_arbitrum_legacy(tx), None)
    layout = LAYOUTS.get(tx_type)
    if layout is not None:
        fields = [_l2_field(tx, name, kind) for name, kind in layout.fields]
        return EncodedTx(bytes([tx_type]) + rlp.encode(fields), None)
    readers = FIELDS.get(tx_type)
    if readers is None:
        raise TransactionError(f"transaction type 0x{tx_type:x} is not one this version encodes")
    fields = [read(tx) for read in readers]
    if tx_type == 0:
        return EncodedTx(rlp.encode(fields), None)
    network = _sidecar(tx, fields) if tx_type == 3 else None
    return EncodedTx(bytes([tx_type]) + rlp.encode(fields), network)


def encode_checked(tx: Mapping[str, Any]) -> EncodedTx:
    """:func:`encode_tx`, then checked: the hash of the canonical bytes (keccak256; a 0x78
    tx's hash field) must be the object's ``hash``, else :class:`TxObjectMismatch` (the
    caller falls back to the node's bytes)."""
    stated = _hex(_field(tx, "hash"), "hash")
    encoded = encode_tx(tx)
    canonical = encoded.canonical
    if canonical[:1] == bytes([ARBITRUM_LEGACY]):
        actual = bytes.fromhex(transaction_hash(canonical)[2:])  # its hash field, checked
    else:
        actual = keccak256(canonical)
    if actual != stated:
        raise TxObjectMismatch(
            f"tx 0x{stated.hex()}: its fields rebuild bytes of another hash "
            "(a field this version does not know, or one the node changed)"
        )
    return encoded
