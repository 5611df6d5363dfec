"""JSON-RPC answers checked and turned into the frozen models of :mod:`chains.models`.

A node's answer is a loose JSON object; nothing of it crosses into the engine unchecked.
Each function here reads one kind of object (block, receipt, tx), checks every field it
keeps (hex quantities, byte lengths) and raises :class:`RpcMalformedResponse` naming the
endpoint, the method and the field otherwise. :class:`chains.rpc.RpcClient` calls these
for every typed answer; they are apart from it because parsing is one job and calling is
another.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chains.errors import RpcMalformedResponse
from chains.models import Block, BlockHeader, BlockTx, TxInfo, TxReceipt
from guard.types import Address, BlockHash, BlockNumber, TxHash


def hex_int(value: Any, endpoint: str, method: str, what: str) -> int:
    """``value`` as an int: a 0x hex quantity (or an int already), else malformed."""
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.startswith("0x"):
        try:
            return int(value, 16)
        except ValueError:
            pass
    raise RpcMalformedResponse(endpoint, method, f"{what} is not a hex quantity: {value!r}")


def hex_str(value: Any, endpoint: str, method: str, what: str, length: int) -> str:
    """``value`` as lower-case 0x hex of exactly ``length`` bytes, else malformed."""
    if isinstance(value, bytes):
        value = "0x" + value.hex()
    if isinstance(value, str) and value.startswith("0x") and len(value) == 2 + 2 * length:
        return value.lower()
    raise RpcMalformedResponse(endpoint, method, f"{what} is not {length}-byte hex: {value!r}")


def parse_block(raw: Any, endpoint: str, method: str) -> Block:
    """A block object (full or hashes-only) as a :class:`Block`: its header and, for full
    objects, each tx's hash, sender, nonce, recipient and value."""
    if not isinstance(raw, Mapping):
        raise RpcMalformedResponse(endpoint, method, f"block is not an object: {raw!r:.200}")
    ep = endpoint
    header = BlockHeader(
        number=BlockNumber(hex_int(raw.get("number"), ep, method, "number")),
        hash=BlockHash(hex_str(raw.get("hash"), ep, method, "hash", 32)),
        parent_hash=BlockHash(hex_str(raw.get("parentHash"), ep, method, "parentHash", 32)),
        timestamp=hex_int(raw.get("timestamp"), ep, method, "timestamp"),
    )
    txs = raw.get("transactions", [])
    if not isinstance(txs, list):
        raise RpcMalformedResponse(ep, method, "transactions is not a list")
    parsed = tuple(
        BlockTx(
            hash=TxHash(hex_str(tx.get("hash"), ep, method, "tx hash", 32)),
            sender=Address(hex_str(tx.get("from"), ep, method, "tx from", 20)),
            nonce=hex_int(tx.get("nonce"), ep, method, "tx nonce"),
            to=None
            if tx.get("to") is None
            else Address(hex_str(tx.get("to"), ep, method, "tx to", 20)),
            value=hex_int(tx.get("value", "0x0"), ep, method, "tx value"),
        )
        for tx in txs
        if isinstance(tx, Mapping)
    )
    return Block(header=header, txs=parsed)


def parse_receipt(raw: Any, endpoint: str, method: str) -> TxReceipt:
    """A receipt object as a :class:`TxReceipt` (a pre-Byzantium receipt without
    ``status`` counts as succeeded)."""
    if not isinstance(raw, Mapping):
        raise RpcMalformedResponse(endpoint, method, f"receipt is not an object: {raw!r:.200}")
    ep = endpoint
    status = raw.get("status")
    return TxReceipt(
        tx_hash=TxHash(hex_str(raw.get("transactionHash"), ep, method, "transactionHash", 32)),
        block_number=BlockNumber(hex_int(raw.get("blockNumber"), ep, method, "blockNumber")),
        block_hash=BlockHash(hex_str(raw.get("blockHash"), ep, method, "blockHash", 32)),
        tx_index=hex_int(raw.get("transactionIndex"), ep, method, "transactionIndex"),
        status=hex_int(status, ep, method, "status") if status is not None else 1,
    )


def parse_tx_info(raw: Any, endpoint: str) -> TxInfo:
    """An ``eth_getTransactionByHash`` object as a :class:`TxInfo` (block fields None while
    the tx is pending)."""
    method = "eth_getTransactionByHash"
    if not isinstance(raw, Mapping):
        raise RpcMalformedResponse(endpoint, method, f"tx is not an object: {raw!r:.200}")
    ep = endpoint
    number = raw.get("blockNumber")
    block_hash = raw.get("blockHash")
    return TxInfo(
        hash=TxHash(hex_str(raw.get("hash"), ep, method, "hash", 32)),
        sender=Address(hex_str(raw.get("from"), ep, method, "from", 20)),
        nonce=hex_int(raw.get("nonce"), ep, method, "nonce"),
        block_number=None
        if number is None
        else BlockNumber(hex_int(number, ep, method, "blockNumber")),
        block_hash=None
        if block_hash is None
        else BlockHash(hex_str(block_hash, ep, method, "blockHash", 32)),
    )


def not_what_was_asked(method: str, params: Sequence[Any], result: Any) -> str | None:
    """Why ``result`` is not an answer to ``method(params)``, else None: a tx, receipt or
    block naming another hash or height than the one asked for (a node mixing up answers,
    e.g. a batch answered out of order without ids). An absent result (None) is not judged
    here; a malformed one is left to the parsers."""
    if result is None or not params or not isinstance(result, Mapping):
        return None
    asked = params[0]
    if method in ("eth_getTransactionByHash", "eth_getTransactionReceipt"):
        key = "hash" if method == "eth_getTransactionByHash" else "transactionHash"
        said = result.get(key)
        if isinstance(said, str) and isinstance(asked, str) and said.lower() != asked.lower():
            return f"{method}({asked}) answered tx {said}"
    elif method == "eth_getBlockByHash":
        said = result.get("hash")
        if isinstance(said, str) and isinstance(asked, str) and said.lower() != asked.lower():
            return f"{method}({asked}) answered block {said}"
    elif method == "eth_getBlockByNumber" and isinstance(asked, str) and asked.startswith("0x"):
        said = result.get("number")
        if isinstance(said, str) and said.startswith("0x") and int(said, 16) != int(asked, 16):
            return f"{method}({int(asked, 16)}) answered block {int(said, 16)}"
    return None
