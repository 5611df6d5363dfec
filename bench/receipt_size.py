"""Receipt size and build time against depth, with and without history proofs, run by
hand: ``.venv/bin/python -m bench.receipt_size [--depths 12 64 600 8000] [--runs 5]``.

One real anvil on its default hardfork (it has the EIP-2935 history contract), one watcher
following it. Block 1 holds one watched tx per depth, each registered with that depth as
its N; the chain is mined to the deepest, and each receipt is built, at its depth, by the
daemon's builder in two configurations of the same chain:

* ``receipt_ancestry = "headers"`` (the header chain: the baseline, as before), and
* ``receipt_ancestry = "history"`` (the default: the inclusion header and a history proof
  where smaller and within 8,191 blocks, else the header chain saying why),

each with ``receipt_headers`` ``list`` and ``compact``. Build time is the median of
``--runs`` builds with a fresh builder (so the history proof's ``eth_getProof`` is in it;
the block's tries come from the stored leaves, the headers from the store, as after a
restart): body, seal, and the offline self-check, as the receipts component does. The
offline verify time of the signed receipt, parsed from its JSON, is printed beside.

Mining is the slow part: anvil recomputes the contract's growing storage at every block
(about 25 s per 1,000 blocks near 5,000 at load 8), so ``--depths 12 64 600 8000 9000``
takes minutes.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from functools import partial
from typing import Any

from bench.common import median_ms
from guard.canonical import canonical_json
from guard.settlement import Verdict
from guard.verify import verify_receipt
from tests.integration.receipts_helpers import SIGNING_KEY, TxFactory
from tests.support.anvil import Anvil
from tests.support.rigs import Rig, make_watcher
from watcher.receipts.builder import ReceiptBuilder
from watcher.receipts.signer import Signer
from watcher.store.leaves_store import leaves_store

MINE_STEP = 100
"""Blocks mined between two polls of the watcher (anvil takes seconds per 100 blocks once
the contract's storage is large: one call must stay under the client's 30 s timeout)."""


def _build(rig: Rig, signer: Signer, sid: str, ancestry: str, headers: str) -> dict[str, Any]:
    """One receipt as the receipts component makes it: body, seal, self-check."""
    config = rig.config.model_copy(
        update={"receipt_ancestry": ancestry, "receipt_headers": headers}
    )
    builder = ReceiptBuilder(
        config, rig.client, signer.address, rig.store.compact_headers, leaves_store(rig.store)
    )
    receipt, hashes = signer.seal(builder.decision_body(rig.settlement(sid), rig.clock()))
    verify_receipt(receipt, trusted_signers=[signer.address], signed_hashes=hashes)
    return receipt


def _verify_text(text: str) -> None:
    """The offline check of a receipt as a verifier gets it: JSON text."""
    verify_receipt(json.loads(text))


def measure(depths: list[int], runs: int) -> list[dict[str, Any]]:
    """Per depth and configuration: size, build and verify times, the ancestry used."""
    signer = Signer(SIGNING_KEY, "env")
    deepest = max(depths)
    rows: list[dict[str, Any]] = []
    with Anvil("--no-mining") as anvil:
        db = tempfile.mkdtemp(prefix="fw-receipt-size-")
        rig = make_watcher(anvil, f"sqlite:///{db}/s.db", confirmations=deepest)
        rig.watcher.poll()
        factories = [TxFactory(anvil, i % 3) for i in range(3)]
        ids: dict[int, str] = {}
        for i, depth in enumerate(sorted(depths)):
            factory = factories[i % 3]
            tx = factory.send(factory.dynamic())
            ids[depth] = rig.register(tx, confirmations=depth).settlement_id
        rig.watcher.poll()
        rig.mine_and_poll(1)
        mined, started = 1, time.perf_counter()
        for depth in sorted(depths):
            while mined < depth:
                step = min(MINE_STEP, depth - mined)
                rig.mine_and_poll(step)
                mined += step
            print(f"mined to depth {depth} ({time.perf_counter() - started:.0f} s)", flush=True)
            assert rig.settlement(ids[depth]).verdict == Verdict.FINALITY_CONFIRMED
            for ancestry in ("headers", "history"):
                for form in ("list", "compact"):
                    receipt = _build(rig, signer, ids[depth], ancestry, form)
                    build = median_ms(
                        partial(_build, rig, signer, ids[depth], ancestry, form), runs
                    )
                    text = json.dumps(receipt)
                    verify = median_ms(partial(_verify_text, text), runs)
                    said = receipt["proof"].get("ancestry", {})
                    rows.append(
                        {
                            "depth": depth,
                            "ancestry": ancestry,
                            "headers": form,
                            "bytes": len(canonical_json(receipt)),
                            "build_ms": build,
                            "verify_ms": verify,
                            "kind": said.get("kind", "(none)"),
                            "reason": said.get("reason"),
                        }
                    )
            report([r for r in rows if r["depth"] == depth], header=depth == min(depths))
        rig.store.close()
    return rows


def report(rows: list[dict[str, Any]], header: bool = True) -> None:
    """Table rows: each history row beside its header-chain baseline, with the ratios."""
    base = {(r["depth"], r["headers"]): r for r in rows if r["ancestry"] == "headers"}
    if header:
        print(
            "| depth | headers form | header chain: bytes / build / verify | history: bytes / "
            "build / verify | kind (reason) | size ratio | build ratio |"
        )
        print("|---:|---|---:|---:|---|---:|---:|")
    for r in rows:
        if r["ancestry"] != "history":
            continue
        b = base[(r["depth"], r["headers"])]
        kind = r["kind"] + (f" ({r['reason']})" if r["reason"] else "")
        print(
            f"| {r['depth']:,} | {r['headers']} | {b['bytes']:,} B / {b['build_ms']:.1f} ms / "
            f"{b['verify_ms']:.1f} ms | {r['bytes']:,} B / {r['build_ms']:.1f} ms / "
            f"{r['verify_ms']:.1f} ms | {kind} | {r['bytes'] / b['bytes']:.3f} | "
            f"{r['build_ms'] / b['build_ms']:.2f} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", type=int, nargs="+", default=[12, 64, 600, 8000])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    measure(args.depths, args.runs)


if __name__ == "__main__":
    main()
