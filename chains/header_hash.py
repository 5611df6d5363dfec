"""Whether a JSON-RPC block object is the block its ``hash`` names.

A block hash is keccak(rlp(header fields)): a node that changes any field (a ``stateRoot``,
a ``receiptsRoot`` matching receipts it also changed) under the original hash is caught by
hashing the fields again. The client runs this on every block it parses, before anything is
kept or decided (:class:`chains.rpc.RpcClient`, ``check_headers``); the compact headers the
store keeps are the same encoding (:mod:`chains.block_facts`).

Chains whose headers do not hash this way are marked in the registry (``headers_rehash``):
their blocks are not checked, and their receipts say they are attestations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chains.registry import known_chain
from guard import rlp
from guard.hashing import keccak256
from guard.headers import HeaderError, header_fields, header_json


def rehashed(block: Mapping[str, Any]) -> tuple[dict[str, Any], bytes] | None:
    """(the header object, its RLP) when ``block``'s fields hash to its ``hash``, else None
    (another hash, a field missing or malformed)."""
    try:
        header = header_json(block)
        encoded = rlp.encode(list(header_fields(header)))
    except (HeaderError, KeyError, TypeError, ValueError):
        return None
    if "0x" + keccak256(encoded).hex() != str(header["hash"]).lower():
        return None
    return header, encoded


def headers_checkable(chain_id: int | None) -> bool:
    """Whether the headers of ``chain_id`` re-hash (the registry says which do not; an
    unknown chain is held to it: a node is believed only as far as it can be checked)."""
    known = None if chain_id is None else known_chain(chain_id)
    return known is None or known.headers_rehash
