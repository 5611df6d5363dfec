"""Receipt build time before and after a restart, and offline verify (issue 11), run by hand:
``.venv/bin/python -m bench.receipts_restart [--runs 7]``.

Tx 250 of a block of 500 txs, N = 3, a real anvil; each figure is the median of ``--runs``
builds (body, signature, and the offline self-check, as the daemon does):

* **before a restart**: what the daemon holds in memory (the tracker's full block, the
  engine's ``eth_getBlockReceipts`` answer, headers from the store): no call;
* **after a restart, the block proven before**: a new client and builder over the same
  store; the block's leaves were stored by its first receipt (``block_leaves``), the
  headers come from the store: no call;
* **after a restart, first receipt of the block**: the same with no stored leaves: the node
  is asked for the block's receipts and its tx objects (two calls, in flight together);
* **naive**, same run: one ``eth_getTransactionReceipt`` and one
  ``eth_getRawTransactionByHash`` per tx, tries built key by key with py-trie.

Then the offline verify of a 64-header receipt, ``proof.headers`` and ``proof.header_chain``,
beside the same checks assembled from pyrlp, py-trie and eth-account.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable

from bench.common import Anvil
from bench.receipts import _naive_build, _naive_verify
from chains.rpc import RpcClient, Web3Transport
from guard.verify import verify_receipt
from tests.integration.helpers import make_watcher
from tests.integration.receipts_helpers import TxFactory, receipts_for
from watcher.receipts.builder import ReceiptBuilder
from watcher.store.leaves_store import leaves_store


def _median_ms(action: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


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
        assert rec.verdict == "FINALITY_CONFIRMED", rec.verdict
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
        before = _median_ms(held, runs)
        builder.leaves = kept
        figures = {
            "before a restart (held in memory)": before,
            "after a restart, block proven before (stored leaves)": _median_ms(
                restarted(True), runs
            ),
            "after a restart, first receipt of the block (2 calls)": _median_ms(
                restarted(False), runs
            ),
        }
        naive = _median_ms(lambda: _naive_build(anvil.url, hashes, 250), max(1, runs // 3))
        print("== receipt for tx 250 of a 500-tx block, N = 3 (target <= 150 ms, median)")
        for label, ms in figures.items():
            print(f"   {label:55} {ms:7.1f} ms   naive {naive:7.1f} ms ({ms / naive:.3f}x naive)")
        rig.store.close()


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
        assert rec.verdict == "FINALITY_CONFIRMED", rec.verdict
        signer = receipts.signer
        compact = rig.config.model_copy(update={"receipt_headers": "compact"})
        signed = {
            name: signer.sign(
                ReceiptBuilder(
                    config, rig.client, signer.address, rig.store.compact_headers
                ).decision_body(rec, rig.clock())
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
