"""Building the proofs a receipt carries, from what a node answers.

The verifier (guard/) walks a Merkle-Patricia proof down from a header's root and checks a
header chain up to the confirming head. This module is the public name for proof building
(docs/library.md): the header chain (:func:`fetch_headers`), a tx's
:func:`inclusion_proof` in its block, and the head at a timeout's deadline
(:func:`head_at`) live here; the parts they stand on live beside it and are re-exported:
the trie (:mod:`chains.trie`: :class:`Trie`, :func:`index_key`), receipt leaves
(:mod:`chains.receipt_encode`: :func:`encode_receipt`), both tries of a block
(:mod:`chains.block_tries`: :func:`fetch_block_tries`) and the tx objects the head tracker
already fetched (:mod:`chains.tx_cache`).

Every root and every header hash is recomputed before anything is signed: answers that do
not reproduce them give :class:`ProofUnavailable`; blocks that are not (or no longer) on
the chain give :class:`BranchMoved` (wait and retry).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from chains.block_tries import BlockTries, fetch_block_tries, fetch_receipts_and_block
from chains.errors import BranchMoved, ProofUnavailable
from chains.receipt_encode import encode_receipt
from chains.rpc import RpcClient
from chains.trie import EMPTY_TRIE_ROOT, Trie, index_key, trie_proof
from chains.tx_cache import BLOB_WEIGHT, TxObjectCache
from guard.headers import header_hash, header_json
from guard.receipts import InclusionProof

__all__ = [
    "BLOB_WEIGHT",
    "EMPTY_TRIE_ROOT",
    "BlockTries",
    "BranchMoved",
    "ProofUnavailable",
    "Trie",
    "TxObjectCache",
    "encode_receipt",
    "fetch_block_tries",
    "fetch_headers",
    "fetch_receipts_and_block",
    "head_at",
    "inclusion_proof",
    "index_key",
    "trie_proof",
]


def fetch_headers(
    client: RpcClient, first: int, count: int, first_hash: str, head: tuple[int, str]
) -> tuple[Mapping[str, Any], list[dict[str, str]]]:
    """Block ``first`` (JSON-RPC object, tx hashes included) and the ``count`` linked header
    objects from it up, in one batch.

    Block ``first`` must still be ``first_hash`` and ``head`` (number, hash), the block the
    decision saw as head, must still be canonical: else the chain moved (or the node lags)
    and :class:`BranchMoved` says wait. A header whose fields do not hash to the node's hash
    gives :class:`ProofUnavailable` (a field this version does not know)."""
    numbers = list(range(first, first + count))
    wanted = numbers if head[0] in numbers else [*numbers, head[0]]
    raws = client.raw_blocks(wanted)
    found = {n: b for n, b in zip(wanted, raws, strict=True) if b is not None}
    if len(found) != len(wanted):
        raise BranchMoved(f"the node has no block in {first}..{max(wanted)} yet")
    if found[head[0]].get("hash") != head[1]:
        raise BranchMoved(f"block {head[0]} is no longer {head[1]}: the chain moved, waiting")
    if found[first].get("hash") != first_hash:
        raise BranchMoved(f"block {first} is no longer {first_hash}: the chain moved, waiting")
    headers = [header_json(found[n]) for n in numbers]
    for below, above in itertools.pairwise(headers):
        if above["parentHash"] != below["hash"]:
            raise BranchMoved(f"block {above['number']} does not link: the node switched branch")
    for header in headers:
        if header_hash(header) != header["hash"]:
            raise ProofUnavailable(
                f"block {header['hash']}: its fields do not hash to its hash "
                "(a header field this version does not know?)"
            )
    return found[first], headers


def inclusion_proof(
    tries: BlockTries, headers: list[dict[str, str]], tx_index: int
) -> InclusionProof:
    """The proof of the ``tx_index``-th tx of the block ``headers[0]``."""
    if headers[0]["hash"] != tries.block_hash:
        raise ValueError(f"the tries are of block {tries.block_hash}, not {headers[0]['hash']}")
    if tx_index in tries.unprovable:
        raise ProofUnavailable(f"block {tries.block_hash}: {tries.unprovable[tx_index]}")
    return InclusionProof(
        headers=headers,
        tx_index=tx_index,
        receipt_proof=["0x" + n.hex() for n in tries.receipts.proof(tx_index)],
        transaction_proof=["0x" + n.hex() for n in tries.transactions.proof(tx_index)],
    )


def head_at(
    client: RpcClient, deadline_ms: int
) -> tuple[dict[str, str] | None, dict[str, str] | None]:
    """(the last block with ``timestamp * 1000 <= deadline_ms``, its child if one exists).

    Gallops down from the node's latest block, then bisects: a few calls when the deadline
    is recent, which it is when a timeout has just been decided."""
    latest = client.raw_blocks(["latest"])[0]
    if latest is None:
        raise BranchMoved("the node has no latest block")
    top = int(str(latest["number"]), 16)

    def stamp(n: int) -> int:
        block = client.raw_blocks([n])[0]
        if block is None:
            raise BranchMoved(f"the node lost block {n}")
        return int(str(block["timestamp"]), 16) * 1000

    if int(str(latest["timestamp"]), 16) * 1000 <= deadline_ms:
        low, high = top, top + 1
    else:
        high, low, step = top, top - 1, 1
        while True:
            if low < 0:
                return None, None
            if stamp(low) <= deadline_ms:
                break
            high = low
            if low == 0:
                return None, None
            step *= 2
            low = max(0, top - step)
        while high - low > 1:  # stamp(low) <= deadline < stamp(high)
            middle = (low + high) // 2
            if stamp(middle) <= deadline_ms:
                low = middle
            else:
                high = middle
    pair = client.raw_blocks([low, high] if high <= top else [low])
    headers = [header_json(b) for b in pair if b is not None]
    if len(headers) == 2 and headers[1]["parentHash"] != headers[0]["hash"]:
        raise BranchMoved(f"block {high} does not link to {low}: the node switched branch")
    for header in headers:
        if header_hash(header) != header["hash"]:
            raise ProofUnavailable(f"block {header['number']}: fields do not hash to its hash")
    return headers[0], (headers[1] if len(headers) == 2 else None)
