"""Optional JSON-RPC methods rebuilt from standard calls, for nodes that lack them.

:class:`chains.rpc.RpcClient` calls these when an endpoint does not offer a method (see
:mod:`chains.capabilities`). Each gives what the optional method would have given, from
calls every Ethereum node answers:

* ``eth_getBlockReceipts`` → the block's tx hashes (``eth_getBlockByHash(hash, false)``)
  and one ``eth_getTransactionReceipt`` per tx in one batch: 1 + n calls instead of 1;
* ``eth_getRawTransactionByHash`` → the tx objects (``eth_getTransactionByHash``, batched)
  re-encoded (:mod:`guard.tx_encode`), each checked against its hash: n calls, as before;
* ``eth_getRawTransactionByBlockHashAndIndex`` → the block's tx objects
  (``eth_getBlockByHash(hash, true)``) re-encoded: 1 call instead of n.

Nothing here trusts the rebuilt bytes blindly: a tx whose fields do not re-encode to its
hash is left out (None), and proof building checks every root anyway.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chains.errors import RpcMalformedResponse
from chains.transport import RpcCaller
from guard import rlp
from guard.tx_encode import encode_checked
from guard.txs import TransactionError


def _rebuilt(tx: Any, committed: bool) -> str | None:
    """The signed bytes of the tx object ``tx`` as 0x hex, None if it cannot be rebuilt."""
    if not isinstance(tx, Mapping):
        return None
    try:
        encoded = encode_checked(tx)
    except (TransactionError, rlp.RlpError, KeyError, TypeError, ValueError):
        return None
    return "0x" + (encoded.committed if committed else encoded.canonical).hex()


def raw_transactions_from_objects(client: RpcCaller, tx_hashes: Sequence[str]) -> list[str | None]:
    """``eth_getRawTransactionByHash`` for a node without it: the hashed (canonical) form of
    each tx, None where the node has no such tx or its object does not rebuild its hash."""
    objects = client.batch([("eth_getTransactionByHash", [h]) for h in tx_hashes])
    out: list[str | None] = []
    for wanted, tx in zip(tx_hashes, objects, strict=True):
        raw = _rebuilt(tx, committed=False)
        if raw is not None and str(tx.get("hash", "")).lower() != wanted.lower():
            raw = None  # the node answered for another tx: never pass its bytes on
        out.append(raw)
    return out


def block_receipts_by_tx(client: RpcCaller, block_hash: str) -> list[Mapping[str, Any]]:
    """``eth_getBlockReceipts`` for a node without it, as the node's JSON objects. A block the
    node no longer has gives no receipts; a receipt of another block (the tx moved to another
    fork meanwhile) is left out: the caller compares them with the block's txs."""
    block = client.call("eth_getBlockByHash", [block_hash, False])
    if block is None:
        return []
    if not isinstance(block, Mapping) or not isinstance(block.get("transactions"), list):
        raise RpcMalformedResponse(
            client.endpoint, "eth_getBlockByHash", f"not a block object: {block!r:.200}"
        )
    hashes = [str(t if isinstance(t, str) else t.get("hash")) for t in block["transactions"]]
    if not hashes:
        return []
    receipts = client.batch([("eth_getTransactionReceipt", [h]) for h in hashes])
    return [
        r
        for r in receipts
        if isinstance(r, Mapping) and str(r.get("blockHash", "")).lower() == block_hash.lower()
    ]


def block_transactions_from_objects(client: RpcCaller, block_hash: str) -> list[str]:
    """``eth_getRawTransactionByBlockHashAndIndex`` for every tx of a block, for a node
    without it: the committed form rebuilt from the block's tx objects ("" where one cannot
    be rebuilt: the caller rejects it as not hex)."""
    block = client.call("eth_getBlockByHash", [block_hash, True])
    if not isinstance(block, Mapping) or not isinstance(block.get("transactions"), list):
        raise RpcMalformedResponse(
            client.endpoint, "eth_getBlockByHash", f"no block {block_hash}: {block!r:.120}"
        )
    return [_rebuilt(tx, committed=True) or "" for tx in block["transactions"]]
