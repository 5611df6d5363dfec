"""Receipt build time before and after a restart, and offline verify, run by hand:
``.venv/bin/python -m bench.receipts_restart [--runs 7]``.

Tx 250 of a block of 500 txs, N = 3, a real anvil; each figure is the median of ``--runs``
builds (body, signature, and the offline self-check, as the daemon does):

* **before a restart**: what the daemon holds in memory (the tracker's full block, the
  engine's ``eth_getBlockReceipts`` answer, headers from the store): no call;
* **after a restart, leaves stored**: a new client and builder over the same store; the
  block's leaves were stored when the engine fetched its receipts (the receipts thread
  prepares a block holding watched txs right away: ``ReceiptBuilder.prepare``, whose own
  cost, N blocks before the receipt, is printed too) or by its first receipt; the headers
  come from the store: no call. This is the after-restart path of every block seen by a
  daemon with this version;
* **after a restart, nothing stored** (the daemon died within the poll that first saw the
  block): the node is asked for the block's receipts and its tx objects (two calls, in
  flight together), with the node's own time to serve each, measured in the same run;
* **naive**, same run: one ``eth_getTransactionReceipt`` and one
  ``eth_getRawTransactionByHash`` per tx, tries built key by key with py-trie.

Then the offline verify of a 64-header receipt, ``proof.headers`` and ``proof.header_chain``,
beside the same checks assembled from pyrlp, py-trie and eth-account.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import httpx

from bench.common import Anvil
from bench.receipts import _naive_build, _naive_verify
from chains.rpc import RpcClient, Web3Transport
from guard.settlement import Verdict
from guard.verify import verify_receipt
from tests.integration.receipts_helpers import TxFactory, receipts_for
from tests.support.rigs import make_watcher
from watcher.receipts.builder import ReceiptBuilder
from watcher.store import SettlementRecord
from watcher.store.leaves_store import leaves_store


def _median_ms(action: Callable[[], object], runs: int) -> float:
    return _medians(action, runs)[0]


def _medians(action: Callable[[], object], runs: int) -> tuple[float, float]:
    """Median wall-clock and median CPU (this process, every thread) ms of ``action``: the
    machine is shared, so the CPU figure is the one that says what the code costs."""
    times, cpu = [], []
    for _ in range(runs):
        started, started_cpu = time.perf_counter(), time.process_time()
        action()
        times.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)
    return statistics.median(times), statistics.median(cpu)


def build(runs: int) -> None:
    """The four build figures (see the module doc)."""
    with Anvil("--no-mining") as anvil:
        factories = [TxFactory(anvil, i) for i in range(3)]
        hashes = [factories[0].send(factories[i % 3].dynamic()) for i in range(500)]
        anvil.mine(1)
        rig = make_watcher(anvil, f"sqlite:///{tempfile.mkdtemp()}/r.db", confirmations=3)
        receipts = receipts_for(rig)
        rig.watcher.poll()
        sid = rig.register(hashes[250]).settlement_id
        anvil.mine(2)
        rig.watcher.catch_up()
        rec = rig.settlement(sid)
        assert rec.verdict == Verdict.FINALITY_CONFIRMED, rec.verdict
        signer = receipts.signer

        def run(builder: ReceiptBuilder) -> None:
            body = builder.decision_body(rec, rig.clock())
            verify_receipt(signer.sign(body), trusted_signers=[signer.address])

        builder = receipts.issuer.builders["local"]
        assert isinstance(builder, ReceiptBuilder)

        def held() -> None:  # the tries built from what the tracker and engine fetched
            builder._tries.clear()
            builder._chains.clear()
            run(builder)

        def restarted(stored: bool) -> Callable[[], None]:
            def action() -> None:
                client = RpcClient(Web3Transport(anvil.url))
                store = leaves_store(rig.store)
                if not stored:
                    client.call("eth_chainId")  # a warm connection, as a daemon has
                run(
                    ReceiptBuilder(
                        rig.config,
                        client,
                        signer.address,
                        rig.store.compact_headers,
                        store if stored else None,
                    )
                )

            return action

        held()  # the first build stores the block's leaves
        kept, builder.leaves = builder.leaves, None  # measured without them
        before = _medians(held, runs)
        builder.leaves = kept
        figures = {
            "before a restart, tries prepared at inclusion": _medians(lambda: run(builder), runs),
            "before a restart, tries built now (held facts)": before,
            "after a restart, leaves stored (no call)": _medians(restarted(True), runs),
            "after a restart, nothing stored (2 calls)": _medians(restarted(False), runs),
        }
        _prepare_and_node(anvil, rig, signer.address, rec, runs)
        naive = _median_ms(lambda: _naive_build(anvil.url, hashes, 250), max(1, runs // 3))
        print("== receipt for tx 250 of a 500-tx block, N = 3 (target <= 150 ms, median)")
        for label, (ms, cpu) in figures.items():
            print(
                f"   {label:48} {ms:7.1f} ms (CPU {cpu:6.1f} ms)   naive {naive:7.1f} ms"
                f" ({ms / naive:.3f}x naive)"
            )
        rig.store.close()


def _prepare_and_node(
    anvil: Anvil, rig: Any, signer: str, rec: SettlementRecord, runs: int
) -> None:
    """What preparing the block at inclusion costs (CPU, off the receipt's path), and how
    long the node takes to serve the two calls of the nothing-stored path."""
    facts = rec.decision["evidence"]["facts"]
    block_hash = str(facts["block_hash"])
    fetcher = RpcClient(Web3Transport(anvil.url))
    receipts = fetcher.raw_block_receipts(block_hash)
    full = fetcher.call("eth_getBlockByHash", [block_hash, True])
    cpu = []
    for _ in range(runs):
        client = RpcClient(Web3Transport(anvil.url))
        builder = ReceiptBuilder(rig.config, client, signer, rig.store.compact_headers, None)
        for offer in client.block_observers:  # as the tracker's fetch feeds them
            offer(full)
        for offer_receipts in client.receipt_observers:  # as the engine's fetch does
            offer_receipts(block_hash, receipts)
        started = time.thread_time()
        assert builder.prepare() == 1
        cpu.append((time.thread_time() - started) * 1000)
    print(
        f"   prepare the block at inclusion (CPU, N blocks before): {statistics.median(cpu):.1f} ms"
    )
    http = httpx.Client(timeout=30.0)
    for method, params in (
        ("eth_getBlockReceipts", [block_hash]),
        ("eth_getBlockByHash", [block_hash, True]),
    ):
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        ms = _median_ms(lambda b=body: http.post(anvil.url, json=b), runs)  # type: ignore[misc]
        print(f"   anvil serves {method} of the block in {ms:.1f} ms (median)")


def verify(runs: int) -> None:
    """Offline verify of a 64-header receipt in both encodings (target <= 10 ms)."""
    with Anvil() as anvil:
        anvil.mine(1)
        rig = make_watcher(anvil, f"sqlite:///{tempfile.mkdtemp()}/v.db", confirmations=64)
        receipts = receipts_for(rig)
        rig.watcher.poll()
        tx = anvil.send()
        anvil.receipt(tx)
        rec = rig.register(tx)
        rig.watcher.poll()
        rig.mine_and_poll(63)
        rec = rig.settlement(rec.settlement_id)
        assert rec.verdict == Verdict.FINALITY_CONFIRMED, rec.verdict
        signer = receipts.signer
        compact = rig.config.model_copy(update={"receipt_headers": "compact"})
        # As a verifier gets it: parsed from the JSON document (the builder's frozen
        # headers would carry their hashes, computed once, into every verify).
        signed = {
            name: json.loads(
                json.dumps(
                    signer.sign(
                        ReceiptBuilder(
                            config, rig.client, signer.address, rig.store.compact_headers
                        ).decision_body(rec, rig.clock())
                    )
                )
            )
            for name, config in (("headers", rig.config), ("header_chain", compact))
        }
        naive = _median_ms(lambda: _naive_verify(signed["headers"]), runs)
        print("== offline verify, 64 headers (target <= 10 ms, median)")
        for name, receipt in signed.items():
            ms = _median_ms(lambda r=receipt: verify_receipt(r), runs)  # type: ignore[misc]
            print(
                f"   proof.{name:13} {ms:6.2f} ms   naive (pyrlp, py-trie, eth-account) {naive:6.2f} ms"
                f" ({ms / naive:.2f}x naive)"
            )
        rig.store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    build(args.runs)
    verify(args.runs * 3)


if __name__ == "__main__":
    main()
