"""CPU per receipt of one block's receipts, in process, run by hand:
``.venv/bin/python -m bench.receipt_block_cost [--w 100] [--n 12] [--runs 3] [--against TREE]``.

The receipt stage of :mod:`bench.receipts_cost` at W = 1,000 (100 receipts a block) measured
where the machine's load cannot hide it: process CPU, not wall time. A real anvil, a watcher
driven by hand over a fresh SQLite store, ``--w`` watched txs mined in one block and made
final at depth ``--n``; then the receipts component, as the daemon runs it after a poll,
builds, signs, self-checks and stores them all. The component exists when the block comes
and runs after its inclusion poll, as in the daemon (what it prepares then is printed
apart). Printed: CPU ms per receipt at finality (median of ``--runs``). ``--against TREE``
runs this same file in another work tree (its own ``.venv``, its own code: e.g. a detached
worktree of an older commit) right after, and prints the ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from guard.settlement import Verdict
from tests.integration.receipts_helpers import TxFactory, receipts_for
from tests.support.anvil import Anvil
from tests.support.rigs import make_watcher


def cpu_per_receipt(anvil: Anvil, w: int, n: int) -> tuple[float, float]:
    """(CPU ms per receipt at finality, CPU ms per receipt done ahead) of a block of ``w``
    watched txs, final at depth ``n``. As in the daemon, the receipts component exists when
    the block comes and runs after each poll: after the inclusion poll it prepares what it
    can ahead (the ahead figure); the finality figure is the work once the block is N deep."""
    with tempfile.TemporaryDirectory(prefix="fw-block-cost-") as tmp:
        rig = make_watcher(anvil, f"sqlite:///{tmp}/b.db", confirmations=n)
        try:
            rig.watcher.poll()
            issuer = receipts_for(rig).issuer
            factories = [TxFactory(anvil, account) for account in range(3)]
            anvil.rpc("evm_setAutomine", False)
            try:
                sent = [factories[i % 3].send(factories[i % 3].dynamic()) for i in range(w)]
                ids = [rig.register(tx_hash).settlement_id for tx_hash in sent]
                anvil.mine(1)
            finally:
                anvil.rpc("evm_setAutomine", True)
            rig.watcher.poll()
            started = time.process_time()
            issuer.issue(rig.config.name)  # after the inclusion poll, as the daemon does
            ahead = (time.process_time() - started) / w * 1000
            rig.mine_and_poll(n - 1)
            assert all(rig.settlement(sid).verdict == Verdict.FINALITY_CONFIRMED for sid in ids)
            started = time.process_time()
            while issuer.issued < w:
                issuer.issue(rig.config.name)
            return (time.process_time() - started) / w * 1000, ahead
        finally:
            rig.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--w", type=int, default=100, help="watched txs in the block")
    parser.add_argument("--n", type=int, default=12, help="confirmations N")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--against", type=Path, help="another work tree to run it in after")
    parser.add_argument("--quiet", action="store_true", help="print the median alone")
    args = parser.parse_args()
    with Anvil() as anvil:
        pairs = [cpu_per_receipt(anvil, args.w, args.n) for _ in range(args.runs)]
    figures = [final for final, _ in pairs]
    ours = statistics.median(figures)
    if args.quiet:
        print(f"{ours:.4f}")
        return
    runs = ", ".join(f"{f:.2f}" for f in figures)
    ahead = statistics.median(a for _, a in pairs)
    print(
        f"W = {args.w}, N = {args.n}: {ours:.2f} ms CPU per receipt at finality (median of "
        f"{runs}); {ahead:.2f} ms per receipt done ahead, after the inclusion poll"
    )
    if args.against is not None:
        tree = args.against.resolve()
        same = ["--w", str(args.w), "--n", str(args.n), "--runs", str(args.runs)]
        other = subprocess.run(
            [str(tree / ".venv" / "bin" / "python"), __file__, "--quiet", *same],
            cwd=tree,
            env={**os.environ, "PYTHONPATH": str(tree)},
            capture_output=True,
            text=True,
            check=True,
        )
        theirs = float(other.stdout.split()[-1])
        print(f"   {tree}: {theirs:.2f} ms CPU per receipt; this tree {ours / theirs:.2f}x")


if __name__ == "__main__":
    main()
