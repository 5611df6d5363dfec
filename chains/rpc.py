"""JSON-RPC access to one node: the only module that touches web3.

Two layers:

* :class:`RpcTransport` — the narrow seam: send one request or one batch, get the raw JSON
  answers back. :class:`Web3Transport` is the real one (web3.py's ``HTTPProvider`` with its
  own retries switched off: retrying is the tracker's decision, not the transport's);
  ws:// and wss:// get :class:`chains.ws_transport.WsTransport` (:func:`transport_for`
  picks by scheme). Unit tests script odd node behaviour through a transport of their own.
* :class:`RpcClient` — typed methods over a transport. Every answer is checked: a JSON-RPC
  error object is an :class:`RpcErrorResponse` even with HTTP 200 (never "no receipt"),
  a result without the promised shape an :class:`RpcMalformedResponse`. Results are the
  frozen models of chains.models. Headers must re-hash, answers be what was asked, batches
  be matched by id; else :class:`NodeDataInvalid` (:meth:`RpcClient.distrust`).

Optional methods (``eth_getBlockReceipts``, ``eth_getRawTransactionByHash``,
``eth_getRawTransactionByBlockHashAndIndex``) are not offered by every node (Hardhat,
Ganache, many providers). The first answer that says so is remembered per endpoint
(:mod:`chains.capabilities`); then the result is built from standard calls (:mod:`chains.fallbacks`).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import requests
from web3 import HTTPProvider
from web3.exceptions import Web3Exception

from chains.capabilities import Capabilities, not_offered
from chains.errors import NodeDataInvalid, RpcErrorResponse, RpcMalformedResponse, RpcUnavailable
from chains.fallbacks import (
    block_receipts_by_tx,
    block_transactions_from_objects,
    raw_transactions_from_objects,
)
from chains.header_hash import rehashed
from chains.models import Block, BlockHeader, TxInfo, TxReceipt
from chains.rpc_parse import (
    hex_int,
    not_what_was_asked,
    parse_block,
    parse_receipt,
    parse_tx_info,
)
from chains.transport import BlockTag, Call, RpcTransport, in_call_order
from chains.ws_transport import WsTransport

__all__ = [
    "BlockTag",
    "Call",
    "RpcClient",
    "RpcTransport",
    "Web3Transport",
    "connect",
    "transport_for",
]


class Web3Transport:
    """The real transport: web3.py's HTTPProvider, retries off, errors mapped."""

    def __init__(self, endpoint: str, timeout_s: float = 10.0) -> None:
        self.endpoint = endpoint
        self._provider = HTTPProvider(
            endpoint,
            request_kwargs={"timeout": timeout_s},
            exception_retry_configuration=None,
        )

    def request(self, method: str, params: Sequence[Any]) -> Mapping[str, Any]:
        try:
            answer = self._provider.make_request(method, list(params))
        except (requests.RequestException, Web3Exception, OSError, ValueError) as exc:
            raise RpcUnavailable(self.endpoint, method, f"{type(exc).__name__}: {exc}") from exc
        if not isinstance(answer, Mapping):
            raise RpcMalformedResponse(
                self.endpoint, method, f"answer is not an object: {answer!r}"
            )
        return answer

    def batch(self, calls: Sequence[Call]) -> list[Mapping[str, Any]]:
        label = f"batch of {len(calls)}"
        try:
            answers = self._provider.make_batch_request(
                [(method, list(params)) for method, params in calls]  # type: ignore[misc]
            )
        except (requests.RequestException, Web3Exception, OSError, ValueError) as exc:
            raise RpcUnavailable(self.endpoint, label, f"{type(exc).__name__}: {exc}") from exc
        ordered = in_call_order(answers if isinstance(answers, list) else [answers], len(calls))
        if isinstance(ordered, str):
            raise RpcMalformedResponse(self.endpoint, label, ordered)
        return ordered


class RpcClient:
    """Typed JSON-RPC methods over one transport, counting every call by method."""

    def __init__(
        self, transport: RpcTransport, max_batch: int = 100, check_headers: bool = False
    ) -> None:
        self.transport = transport
        self.endpoint = transport.endpoint
        self.max_batch = max_batch
        self.check_headers = check_headers
        """Whether each block's fields must hash to its ``hash`` (chains/header_hash.py)."""
        self.calls: Counter[str] = Counter()
        """JSON-RPC calls made, by method (a batch of k counts k)."""
        self.errors: Counter[str] = Counter()
        """Failed calls, by method."""
        self._lock = threading.Lock()
        self.block_observers: list[Callable[[Mapping[str, Any]], None]] = []
        """Called with every block object parsed (the receipt builder keeps recent txs)."""
        self.rehash_observers: list[Callable[[Mapping[str, Any], bytes], None]] = []
        """With ``check_headers``: called with each header that re-hashed and its RLP."""
        self.capabilities = Capabilities()
        """Optional methods each endpoint said it does not offer."""
        self.fallbacks: Counter[str] = Counter()
        """Optional calls answered from standard calls instead, by optional method."""
        self.receipt_observers: list[Callable[[str, list[Mapping[str, Any]]], None]] = []
        """Called with (block hash, a whole ``eth_getBlockReceipts`` answer): for proofs."""

    # -- capabilities --------------------------------------------------------------------

    def serving_endpoint(self) -> str:
        """The endpoint the next call goes to (several endpoints: the followed one)."""
        return self.endpoint

    def answering_endpoint(self) -> str:
        """The endpoint that gave the last answer."""
        return self.endpoint

    def optional(self, method: str, calls: Sequence[Sequence[Any]]) -> list[Any] | None:
        """Results of ``method`` with each params of ``calls`` (batched), or None when the
        endpoint does not offer ``method`` (known before, or said now; then remembered)."""
        if self.capabilities.lacks(self.serving_endpoint(), method):
            with self._lock:
                self.fallbacks[method] += 1
            return None
        try:
            if len(calls) == 1:
                return [self.call(method, calls[0])]
            return self.batch([(method, params) for params in calls])
        except RpcErrorResponse as exc:
            if not not_offered(method, exc.code, exc.message):
                raise
            self.capabilities.mark(self.answering_endpoint(), method, exc.message)
            with self._lock:
                self.fallbacks[method] += 1
            return None

    def distrust(self, endpoint: str, detail: str) -> NodeDataInvalid:
        """``endpoint``'s answer failed a check: count it, return the error (believe none of it)."""
        with self._lock:
            self.errors["inconsistent"] += 1
        return NodeDataInvalid(endpoint, detail)

    # -- raw -----------------------------------------------------------------------------

    def _checked(self, method: str, params: Sequence[Any], answer: Mapping[str, Any]) -> Any:
        """The result of ``answer``, which must answer ``method(params)``."""
        result = self._result(method, answer)
        wrong = not_what_was_asked(method, params, result)
        if wrong is not None:
            raise self.distrust(self.answering_endpoint(), wrong)
        return result

    def _result(self, method: str, answer: Mapping[str, Any]) -> Any:
        error = answer.get("error")
        if error is not None:
            with self._lock:
                self.errors[method] += 1
            code = error.get("code", 0) if isinstance(error, Mapping) else 0
            message = error.get("message", str(error)) if isinstance(error, Mapping) else str(error)
            raise RpcErrorResponse(self.endpoint, method, int(code), str(message))
        if "result" not in answer:
            with self._lock:
                self.errors[method] += 1
            raise RpcMalformedResponse(self.endpoint, method, f"no result in {answer!r:.200}")
        return answer["result"]

    def call(self, method: str, params: Sequence[Any] = ()) -> Any:
        """One JSON-RPC call; returns its ``result`` (which may be ``None``)."""
        with self._lock:
            self.calls[method] += 1
        try:
            answer = self.transport.request(method, params)
        except RpcUnavailable:
            with self._lock:
                self.errors[method] += 1
            raise
        return self._checked(method, params, answer)

    def batch(self, calls: Sequence[Call], max_batch: int | None = None) -> list[Any]:
        """Calls in batches of at most ``max_batch`` (a poll's limit; default the client's
        own, never changed for one caller); results in call order."""
        size = self.max_batch if max_batch is None else max(1, min(max_batch, self.max_batch))
        results: list[Any] = []
        for start in range(0, len(calls), size):
            chunk = calls[start : start + size]
            with self._lock:
                for method, _ in chunk:
                    self.calls[method] += 1
            if len(chunk) == 1:
                answers = [self.transport.request(chunk[0][0], chunk[0][1])]
            else:
                answers = self.transport.batch(chunk)
            results.extend(
                self._checked(method, params, answer)
                for (method, params), answer in zip(chunk, answers, strict=True)
            )
        return results

    # -- typed ---------------------------------------------------------------------------

    def chain_id(self) -> int:
        """``eth_chainId``."""
        return hex_int(self.call("eth_chainId"), self.endpoint, "eth_chainId", "chain id")

    def block(self, tag: BlockTag, full: bool = True) -> Block | None:
        """``eth_getBlockByNumber``; None when the node has no such block."""
        raw = self.call("eth_getBlockByNumber", [_tag(tag), full])
        return None if raw is None else self.parse_block(raw, "eth_getBlockByNumber")

    def blocks(
        self, numbers: Sequence[int], full: bool = True, max_batch: int | None = None
    ) -> list[Block | None]:
        """Several blocks by number in batched requests (of at most ``max_batch``)."""
        calls: list[Call] = [("eth_getBlockByNumber", [_tag(n), full]) for n in numbers]
        raws = self.batch(calls, max_batch)
        return [None if r is None else self.parse_block(r, "eth_getBlockByNumber") for r in raws]

    def header(self, tag: BlockTag) -> BlockHeader | None:
        """A header by number or tag, without its transactions."""
        block = self.block(tag, full=False)
        return None if block is None else block.header

    def block_receipts(self, block_hash: str, tx_hashes: Sequence[str]) -> list[TxReceipt]:
        """Receipts of ``tx_hashes`` in the block ``block_hash``.

        Uses ``eth_getBlockReceipts`` (one call); a node without it (remembered, see
        :meth:`optional`), or that refuses a block hash as its parameter, gets one
        ``eth_getTransactionReceipt`` per tx, in one batch. Receipts whose block hash is not
        ``block_hash`` are left out: they belong to another fork.
        """
        wanted = set(tx_hashes)
        whole = True
        try:
            answer = self.optional("eth_getBlockReceipts", [[block_hash]])
        except RpcErrorResponse as exc:
            if exc.code not in (-32600, -32602):
                raise
            answer = None
        if answer is not None:
            raws = answer[0]
        else:
            raws = self.batch([("eth_getTransactionReceipt", [h]) for h in tx_hashes])
            whole = False
        if not isinstance(raws, list):
            raise RpcMalformedResponse(
                self.endpoint, "eth_getBlockReceipts", f"not a list: {raws!r:.200}"
            )
        if whole:
            for observe in self.receipt_observers:
                observe(block_hash, raws)
        receipts = [self.parse_receipt(r, "eth_getBlockReceipts") for r in raws if r is not None]
        return [r for r in receipts if r.tx_hash in wanted and r.block_hash == block_hash]

    def receipts(self, tx_hashes: Sequence[str]) -> list[TxReceipt | None]:
        """``eth_getTransactionReceipt`` for each hash, batched; None where there is none."""
        raws = self.batch([("eth_getTransactionReceipt", [h]) for h in tx_hashes])
        return [
            None if r is None else self.parse_receipt(r, "eth_getTransactionReceipt") for r in raws
        ]

    def transactions(self, tx_hashes: Sequence[str]) -> list[TxInfo | None]:
        """``eth_getTransactionByHash`` for each hash, batched; None where the node has none."""
        raws = self.batch([("eth_getTransactionByHash", [h]) for h in tx_hashes])
        return [None if r is None else self.parse_tx_info(r) for r in raws]

    def raw_transactions(self, tx_hashes: Sequence[str]) -> list[str | None]:
        """``eth_getRawTransactionByHash`` for each hash, batched: signed bytes as 0x hex (the
        hashed form). A node without the method: rebuilt from its tx objects, checked against
        their hashes (None where a tx cannot be rebuilt)."""
        if not tx_hashes:
            return []
        raws = self.optional("eth_getRawTransactionByHash", [[h] for h in tx_hashes])
        if raws is None:
            return raw_transactions_from_objects(self, tx_hashes)
        out: list[str | None] = []
        for raw in raws:
            if raw is not None and not (isinstance(raw, str) and raw.startswith("0x")):
                raise RpcMalformedResponse(
                    self.endpoint, "eth_getRawTransactionByHash", f"not hex: {raw!r:.80}"
                )
            out.append(raw)
        return out

    # -- raw answers, for proofs ----------------------------------------------------------

    def raw_blocks(
        self, numbers: Sequence[BlockTag], full: bool = False
    ) -> list[Mapping[str, Any] | None]:
        """Blocks by number as the node's JSON objects (batched; None where there is none):
        every header field as the node gave it, for proofs (:meth:`blocks` keeps less)."""
        raws = self.batch([("eth_getBlockByNumber", [_tag(n), full]) for n in numbers])
        for raw in raws:
            if raw is not None and not isinstance(raw, Mapping):
                raise RpcMalformedResponse(
                    self.endpoint, "eth_getBlockByNumber", f"not an object: {raw!r:.200}"
                )
        return raws

    def raw_block_receipts(self, block_hash: str) -> list[Mapping[str, Any]]:
        """``eth_getBlockReceipts`` as the node's JSON objects, in transaction order. A node
        without the method: the block's tx hashes (``eth_getBlockByHash``), then one
        ``eth_getTransactionReceipt`` per tx in one batch; only receipts of this block."""
        answer = self.optional("eth_getBlockReceipts", [[block_hash]])
        raws = answer[0] if answer is not None else block_receipts_by_tx(self, block_hash)
        if not isinstance(raws, list) or not all(isinstance(r, Mapping) for r in raws):
            raise RpcMalformedResponse(
                self.endpoint, "eth_getBlockReceipts", f"not a list of objects: {raws!r:.200}"
            )
        return sorted(
            raws,
            key=lambda r: hex_int(
                r.get("transactionIndex"),
                self.endpoint,
                "eth_getBlockReceipts",
                "transactionIndex",
            ),
        )

    def raw_block_transactions(self, block_hash: str, count: int) -> list[str]:
        """The signed bytes (0x hex) of the first ``count`` txs of a block, batched
        (``eth_getRawTransactionByBlockHashAndIndex``), in the form the node stores them."""
        method = "eth_getRawTransactionByBlockHashAndIndex"
        if count == 0:
            return []
        answer = self.optional(method, [[block_hash, hex(i)] for i in range(count)])
        raws = answer if answer is not None else block_transactions_from_objects(self, block_hash)
        if len(raws) != count:
            raise RpcMalformedResponse(
                self.endpoint, method, f"{block_hash}: {len(raws)} txs, not {count}"
            )
        for i, raw in enumerate(raws):
            if not (isinstance(raw, str) and raw.startswith("0x") and len(raw) > 2):
                raise RpcMalformedResponse(
                    self.endpoint, method, f"tx {i} of {block_hash}: not hex: {raw!r:.80}"
                )
        return raws

    # -- parsing (chains/rpc_parse.py) ---------------------------------------------------

    def parse_block(self, raw: Any, method: str) -> Block:
        """``raw`` checked as a block object (and, with ``check_headers``, its header fields
        against its hash); every block observer sees it then, never before."""
        block = parse_block(raw, self.endpoint, method)
        checked = rehashed(raw) if self.check_headers else None
        if self.check_headers and checked is None:
            raise self.distrust(
                self.answering_endpoint(),
                f"{method}: block {block.header.number} ({block.header.hash}): its header "
                "fields do not hash to its hash",
            )
        if checked is not None:
            for observe_rehashed in self.rehash_observers:
                observe_rehashed(*checked)
        for observe in self.block_observers:
            observe(raw)
        return block

    def parse_receipt(self, raw: Any, method: str) -> TxReceipt:
        """``raw`` checked as a receipt object."""
        return parse_receipt(raw, self.endpoint, method)

    def parse_tx_info(self, raw: Any) -> TxInfo:
        """``raw`` checked as an ``eth_getTransactionByHash`` object."""
        return parse_tx_info(raw, self.endpoint)


def _tag(tag: BlockTag) -> str:
    return hex(tag) if isinstance(tag, int) else tag


def transport_for(endpoint: str, timeout_s: float = 10.0) -> RpcTransport:
    """The real transport for ``endpoint``, by scheme: one WebSocket connection for ws:// and
    wss:// (:class:`chains.ws_transport.WsTransport`), HTTP requests otherwise."""
    if urlsplit(endpoint).scheme in ("ws", "wss"):
        return WsTransport(endpoint, timeout_s=timeout_s)
    return Web3Transport(endpoint, timeout_s=timeout_s)


def connect(endpoint: str, timeout_s: float = 10.0, check_headers: bool = False) -> RpcClient:
    """A client over the real transport for ``endpoint`` (http, https, ws or wss)."""
    return RpcClient(transport_for(endpoint, timeout_s=timeout_s), check_headers=check_headers)
