"""A fault-injecting JSON-RPC proxy on loopback, in front of a real node.

Integration tests never mock a node: they put this proxy between the watcher and a real
anvil and switch faults on and off while the watcher runs. Every fault is what public,
load-balanced RPC endpoints really do:

* ``delay_s`` — answer late (a slow or overloaded node);
* ``drop`` — close the connection without answering;
* ``http_500`` — an HTTP error status;
* ``rpc_error`` — HTTP 200 carrying a JSON-RPC error object;
* ``malformed`` — HTTP 200 whose body is not JSON;
* ``freeze_head()`` — the head stops moving (a stuck node); blocks above it do not exist;
* ``roll_back(n)`` — the head goes back ``n`` blocks with no competing chain (a resyncing
  node behind a load balancer);
* ``chain_id`` — answer ``eth_chainId`` for another chain;
* ``upstream`` — point the proxy at another node, e.g. one that is on a fork;
* ``finalized_ahead`` — answer the ``finalized`` (and ``safe``) tag with the head: a node
  whose finality tag runs far ahead of every other node's.
* ``logs_max_blocks`` — refuse an ``eth_getLogs`` over more blocks than this with a JSON-RPC
  error, as hosted providers cap a query's block range.
* ``refuse`` — answer single requests for these methods with a JSON-RPC error (a node that
  no longer keeps a block's state answers ``eth_getProof`` so: "missing trie node");
* ``rewrite`` — method → function applied to the result of a single request for it (a node
  serving a wrong answer).

And lies, what a compromised or buggy node says (the watcher must catch each one):

* ``flip_status`` — every receipt with ``status`` 0x0 says 0x1 (a reverted tx "succeeded");
* ``forge_header`` — fields (e.g. ``{"stateRoot": ...}``) replaced in every block object,
  under the block's original hash;
* ``forge_sender`` — every tx object (by hash, or in a full block) names this sender;
* ``shuffle_batches`` — batch answers come back in reverse order and without ids;
* ``mislabel_batches`` — batch answers keep their ids but carry each other's results (the
  first call's id on the last call's answer).

:meth:`total` and :meth:`calls_log` count what arrived (a batch of k calls counts k), for
tests that check call budgets and rate limits at the wire.

Faults apply to every request until cleared with :meth:`clear`.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import requests

FAULTS = ("delay", "drop", "http_500", "rpc_error", "malformed", "freeze", "rollback", "chain_id")
"""Names of the faults the proxy can inject (for tests that pick one at random)."""


class FaultyProxy:
    """``FaultyProxy(upstream).url`` is a JSON-RPC endpoint whose faults tests control."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        """The node requests are forwarded to; may be switched while running."""
        self.delay_s = 0.0
        self.drop = False
        self.http_500 = False
        self.rpc_error = False
        self.malformed = False
        self.chain_id: int | None = None
        self.ceiling: int | None = None
        """When set, the head the proxy shows: blocks above it do not exist."""
        self.finalized_ahead = False
        self.logs_max_blocks: int | None = None
        self.refuse: set[str] = set()
        self.rewrite: dict[str, Callable[[Any], Any]] = {}
        self.flip_status = False
        self.forge_header: dict[str, str] = {}
        self.shuffle_batches = False
        self.mislabel_batches = False
        self.forge_sender: str | None = None
        self.calls: Counter[str] = Counter()
        self.arrivals: list[tuple[float, int]] = []
        """(monotonic time, JSON-RPC calls) of every HTTP request received."""
        self._lock = threading.Lock()
        self._session = requests.Session()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                status, content = proxy._handle(body)
                if status == 0:
                    self.close_connection = True
                    with contextlib.suppress(OSError):
                        self.connection.shutdown(2)
                    return
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            def log_message(self, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: object, client_address: object) -> None:
                pass  # a client that hung up on a delayed answer is not news

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    # -- control ---------------------------------------------------------------------------

    def clear(self) -> None:
        """End every fault (the upstream stays as it is)."""
        self.delay_s = 0.0
        self.drop = self.http_500 = self.rpc_error = self.malformed = False
        self.chain_id = None
        self.ceiling = None
        self.finalized_ahead = False
        self.logs_max_blocks = None
        self.refuse = set()
        self.rewrite = {}
        self.flip_status = False
        self.forge_header = {}
        self.shuffle_batches = False
        self.mislabel_batches = False
        self.forge_sender = None

    @property
    def lying(self) -> bool:
        """True while a lie about the node's data is switched on."""
        return (
            self.flip_status
            or bool(self.forge_header)
            or self.shuffle_batches
            or self.mislabel_batches
            or self.forge_sender is not None
        )

    def freeze_head(self) -> int:
        """Stop the head where it is now; returns that height."""
        self.ceiling = self._upstream_head()
        return self.ceiling

    def roll_back(self, blocks: int) -> int:
        """Show a head ``blocks`` lower than the node's (no competing chain); returns it."""
        self.ceiling = max(0, self._upstream_head() - blocks)
        return self.ceiling

    def inject(self, fault: str) -> None:
        """Switch on the fault named ``fault`` (one of :data:`FAULTS`) with a default setting."""
        if fault == "delay":
            self.delay_s = 0.3
        elif fault == "drop":
            self.drop = True
        elif fault == "http_500":
            self.http_500 = True
        elif fault == "rpc_error":
            self.rpc_error = True
        elif fault == "malformed":
            self.malformed = True
        elif fault == "freeze":
            self.freeze_head()
        elif fault == "rollback":
            self.roll_back(2)
        elif fault == "chain_id":
            self.chain_id = 1
        elif fault == "finalized_ahead":
            self.finalized_ahead = True
        else:
            raise ValueError(f"unknown fault {fault!r}")

    def total(self) -> int:
        """JSON-RPC calls received so far."""
        with self._lock:
            return sum(self.calls.values())

    def calls_between(self, start: float, end: float) -> int:
        """JSON-RPC calls received with ``start <= time.monotonic() < end``."""
        with self._lock:
            return sum(n for at, n in self.arrivals if start <= at < end)

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()

    # -- serving ---------------------------------------------------------------------------

    def _upstream_head(self) -> int:
        answer = self._session.post(
            self.upstream,
            json={"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []},
            timeout=10,
        ).json()
        return int(answer["result"], 16)

    def _logs_refused(self, payload: Any, items: list[Any]) -> bytes | None:
        """The answer refusing an ``eth_getLogs`` over more than ``logs_max_blocks``."""
        limit = self.logs_max_blocks
        if limit is None or isinstance(payload, list) or not isinstance(payload, dict):
            return None
        if payload.get("method") != "eth_getLogs":
            return None
        query = (payload.get("params") or [{}])[0]
        span = int(query["toBlock"], 16) - int(query["fromBlock"], 16) + 1
        if span <= limit:
            return None
        error = {"code": -32005, "message": f"query exceeds max block range {limit}"}
        return json.dumps({"jsonrpc": "2.0", "id": payload.get("id"), "error": error}).encode()

    def _handle(self, body: bytes) -> tuple[int, bytes]:
        """(status, body) to answer with; status 0 means drop the connection."""
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        items = payload if isinstance(payload, list) else [payload]
        with self._lock:
            self.arrivals.append((time.monotonic(), len(items)))
            for item in items:
                if isinstance(item, dict):
                    self.calls[str(item.get("method"))] += 1
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.drop:
            return 0, b""
        if self.http_500:
            return 500, b'{"message": "internal server error"}'
        if self.malformed:
            return 200, b'{"jsonrpc": "2.0", "id": 1, "result": {"number": '
        if self.rpc_error:
            answers = [
                {
                    "jsonrpc": "2.0",
                    "id": item.get("id") if isinstance(item, dict) else None,
                    "error": {"code": -32000, "message": "injected: upstream busy"},
                }
                for item in items
            ]
            out: Any = answers if isinstance(payload, list) else answers[0]
            return 200, json.dumps(out).encode()
        single = str(payload.get("method")) if isinstance(payload, dict) else None
        if single in self.refuse:
            error = {"code": -32000, "message": "injected: missing trie node"}
            return 200, json.dumps({"jsonrpc": "2.0", "id": payload["id"], "error": error}).encode()
        refused = self._logs_refused(payload, items)
        if refused is not None:
            return 200, refused
        if self.finalized_ahead and isinstance(payload, (list, dict)):
            for item in items:
                _finalized_as_latest(item)
        ceiling = self.ceiling
        if ceiling is not None and isinstance(payload, (list, dict)):
            for item in items:
                _cap_request(item, ceiling)
        try:
            answer = self._session.post(
                self.upstream,
                data=json.dumps(payload).encode() if payload is not None else body,
                headers={"content-type": "application/json"},
                timeout=60,
            )
        except requests.RequestException:
            return 0, b""
        if single in self.rewrite:
            decoded = answer.json()
            decoded["result"] = self.rewrite[single](decoded.get("result"))
            return answer.status_code, json.dumps(decoded).encode()
        if ceiling is None and self.chain_id is None and not self.lying:
            return answer.status_code, answer.content
        try:
            decoded = answer.json()
        except ValueError:
            return answer.status_code, answer.content
        answers = decoded if isinstance(decoded, list) else [decoded]
        by_id = {item.get("id"): item for item in items if isinstance(item, dict)}
        for ans in answers:
            if not isinstance(ans, dict):
                continue
            req = by_id.get(ans.get("id"), {})
            method = req.get("method")
            if self.chain_id is not None and method == "eth_chainId":
                ans["result"] = hex(self.chain_id)
            if ceiling is not None:
                ans["result"] = _cap_result(method, ans.get("result"), ceiling)
            self._lie(method, ans)
        if self.shuffle_batches and isinstance(decoded, list):
            decoded = [{k: v for k, v in a.items() if k != "id"} for a in reversed(decoded)]
        if self.mislabel_batches and isinstance(decoded, list):
            ids = [a.get("id") for a in decoded]
            decoded = [{**a, "id": i} for a, i in zip(reversed(decoded), ids, strict=True)]
        return answer.status_code, json.dumps(decoded).encode()

    def _lie(self, method: Any, answer: dict[str, Any]) -> None:
        """Apply the lies switched on to one answer."""
        result = answer.get("result")
        if self.flip_status and method in ("eth_getBlockReceipts", "eth_getTransactionReceipt"):
            for receipt in result if isinstance(result, list) else [result]:
                if isinstance(receipt, dict) and receipt.get("status") == "0x0":
                    receipt["status"] = "0x1"
        blocks = ("eth_getBlockByNumber", "eth_getBlockByHash")
        if self.forge_header and method in blocks and isinstance(result, dict):
            result.update(self.forge_header)
        if self.forge_sender is not None and isinstance(result, dict):
            txs: Any = [result] if method == "eth_getTransactionByHash" else []
            if method in blocks:
                txs = result.get("transactions") or []
            for tx in txs:
                if isinstance(tx, dict) and "from" in tx:
                    tx["from"] = self.forge_sender


def _finalized_as_latest(item: Any) -> None:
    """Rewrite a ``finalized``/``safe`` block request to ``latest`` (a tag running ahead)."""
    _retag(item, ("finalized", "safe"), "latest")


def _cap_request(item: Any, ceiling: int) -> None:
    """Rewrite block tags so that the node seems to stop at ``ceiling``."""
    _retag(item, ("latest", "pending"), hex(ceiling))


def _retag(item: Any, tags: tuple[str, ...], block: str) -> None:
    """Ask an ``eth_getBlockByNumber`` request of one of ``tags`` for ``block`` instead."""
    if not isinstance(item, dict):
        return
    params = item.get("params")
    if (
        item.get("method") == "eth_getBlockByNumber"
        and isinstance(params, list)
        and params
        and params[0] in tags
    ):
        params[0] = block


def _cap_result(method: Any, result: Any, ceiling: int) -> Any:
    """Hide whatever lies above ``ceiling`` in an answer."""
    if method == "eth_blockNumber":
        return hex(ceiling)
    if isinstance(result, dict):
        number = result.get("number") if method == "eth_getBlockByNumber" else None
        number = number if number is not None else result.get("blockNumber")
        if isinstance(number, str) and number.startswith("0x") and int(number, 16) > ceiling:
            return None
        by_hash = result.get("number") if method == "eth_getBlockByHash" else None
        if isinstance(by_hash, str) and int(by_hash, 16) > ceiling:
            return None
        return result
    if (
        isinstance(result, list)
        and all(isinstance(r, dict) for r in result)
        and any(_cap_result(method, r, ceiling) is None for r in result)
    ):
        return None
    return result
