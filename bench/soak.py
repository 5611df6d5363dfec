"""The long chaos soak in segments: ``.venv/bin/python -m bench.soak [--segments 10] [--size 1000]``.

The suite's soak (tests/e2e/test_chaos_soak.py) runs 300 settlements over three faulty
proxies with random faults and reorgs. A single run of 10,000 stops short for a reason
outside the daemon: after several hundred ``anvil_reorg`` calls anvil itself stops serving
some replaced heights, and the test (rightly) refuses to judge against a node with holes.
So the long run is cut into segments, each with a fresh anvil, fresh proxies and a fresh
daemon and its own seed; every segment checks every settlement's verdict against the final
chain and every finality receipt offline (a segment of ≤ 1,000 checks all of them). The
figures printed are the sums over the segments.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KEPT = Path(tempfile.gettempdir()) / "fw-soak"
"""Each segment's pytest ``--basetemp`` (emptied by pytest when the same seed runs again)."""
LINE = re.compile(
    r"soak: (\d+) settlements, (\d+) faults, (\d+) reorgs, (\d+) receipts verified, ([\d.]+) s"
)


def run_segment(seed: int, size: int, reorg_p: float) -> tuple[int, int, int, int, float]:
    """One soak run as the suite runs it, with ``size`` settlements; its printed figures."""
    env = dict(
        os.environ,
        CI="true",
        FINALITY_SOAK_SETTLEMENTS=str(size),
        FINALITY_SOAK_SEED=str(seed),
        FINALITY_SOAK_REORG_P=str(reorg_p),
    )
    KEPT.mkdir(exist_ok=True)
    done = subprocess.run(
        [
            str(ROOT / ".venv/bin/pytest"),
            "-q",
            "-s",
            "-p",
            "no:cacheprovider",
            "--timeout=1200",
            f"--basetemp={KEPT / f'seed-{seed}'}",  # the daemon's log kept for a failed one
            "tests/e2e/test_chaos_soak.py",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    match = LINE.search(done.stdout)
    if done.returncode != 0 or match is None:
        sys.stdout.write(done.stdout[-4000:] + done.stderr[-2000:])
        logs = sorted(str(p) for p in (KEPT / f"seed-{seed}").rglob("*.log"))
        raise SystemExit(
            f"segment with seed {seed} failed (exit {done.returncode}); its logs: {logs}"
        )
    n, faults, reorgs, receipts, seconds = match.groups()
    return int(n), int(faults), int(reorgs), int(receipts), float(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segments", type=int, default=10)
    parser.add_argument("--size", type=int, default=1000, help="settlements per segment")
    parser.add_argument("--reorg-p", type=float, default=0.4, help="chance a fault round reorgs")
    parser.add_argument("--first-seed", type=int, default=100)
    args = parser.parse_args()
    totals = [0, 0, 0, 0]
    started = time.monotonic()
    for k in range(args.segments):
        seed = args.first_seed + k
        n, faults, reorgs, receipts, seconds = run_segment(seed, args.size, args.reorg_p)
        for i, value in enumerate((n, faults, reorgs, receipts)):
            totals[i] += value
        print(
            f"segment {k + 1}/{args.segments} (seed {seed}): {n} settlements, {faults} faults, "
            f"{reorgs} reorgs, {receipts} receipts verified offline, {seconds:.0f} s",
            flush=True,
        )
    print(
        f"soak total: {totals[0]} settlements, every verdict right against the final chain; "
        f"{totals[1]} faults, {totals[2]} reorgs, {totals[3]} finality receipts verified; "
        f"{time.monotonic() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
