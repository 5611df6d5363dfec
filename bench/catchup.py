"""Catch-up after downtime with watched txs in the missed blocks, run by hand:
``.venv/bin/python -m bench.catchup [--blocks 10000] [--txs 1000] [--per-block 1] [--api]``.

A real anvil; a chain watcher follows it, then "goes down" while ``--blocks`` blocks are
made, ``--txs`` of them (``--per-block`` txs each, evenly spread) carrying a tx that is
registered (watched) while it is down. The restarted watcher catches up
(:meth:`~watcher.engine.chain_watcher.ChainWatcher.catch_up`, 1,000 blocks a poll) and
every watched tx must end ``FINALITY_CONFIRMED`` at the block the node says.

Printed, in the same run: our wall time and process CPU time against the *pure fetch*
baseline, the same blocks read in batches of 1,000 (full txs) plus the watched txs'
receipts by the same client: what any watcher has to read. The ratio is ours / pure fetch.

``--api``: the same catch-up by the daemon as a process (``finality run``, API on loopback),
while a client asks ``GET /healthz`` and ``GET /v1/settlements/{id}`` every 50 ms: the
slowest answer of each during the catch-up, and the catch-up's time in the process.

The in-process chain is built once per (blocks, txs, per block) and kept
(:func:`built_chain`): making 10,000 blocks one ``evm_mine`` at a time took 4-12 minutes on
the shared machine, while anvil loads the same chain from its dumped state
(``anvil_dumpState`` / ``--load-state``: blocks, txs and receipts as mined) in under a
second. The store as the watcher left it before the downtime is kept beside it and copied
per run, so every run catches up the same blocks from the same store. The cache lives in
``.bench-cache/`` (or ``$FINALITY_BENCH_CACHE``); ``--rebuild`` makes it again.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.common import Anvil, chain_config, watcher_for
from chains.rpc import connect
from guard.settlement import Verdict
from tests.support.anvil import ANVIL_BIN, ROOT
from watcher.store import Store

MS = 1_000_000

CHAIN_FORMAT = 1
"""Part of the cache key: raise it when :func:`build_downtime` makes another chain."""


@dataclass(frozen=True)
class BuiltChain:
    """A downtime chain kept on disk: anvil's dumped state, the store as the watcher left
    it before the downtime, and what was sent."""

    state: Path
    """anvil's state (``--load-state``), every block, tx and receipt included."""
    seed_store: Path
    """The SQLite store after the watcher's poll at ``start_head`` (copied per run)."""
    start_head: int
    """The node's head when the watcher went down."""
    head: int
    """The node's head after the downtime."""
    sent: list[tuple[str, int]]
    """(tx hash, block number) of each tx made while the watcher was down."""


def cache_root() -> Path:
    """Where built chains are kept: ``$FINALITY_BENCH_CACHE`` or ``.bench-cache/``."""
    return Path(os.environ.get("FINALITY_BENCH_CACHE") or ROOT / ".bench-cache")


def anvil_version() -> str:
    """The anvil binary's version line (a chain dumped by another anvil is built again)."""
    out = subprocess.run([str(ANVIL_BIN), "--version"], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[0]


def build_downtime(anvil: Anvil, blocks: int, txs: int, per_block: int) -> list[tuple[str, int]]:
    """``blocks`` new blocks, ``txs // per_block`` of them with ``per_block`` txs, evenly
    spread; returns (tx hash, block number) of each tx."""
    carrying = max(1, txs // per_block)
    gap = blocks // carrying - 1
    sent: list[tuple[str, int]] = []
    made = 0
    start = anvil.head()
    anvil.rpc("evm_setAutomine", False)
    try:
        for _ in range(carrying):
            hashes = [anvil.send(value=1 + len(sent) + i) for i in range(per_block)]
            anvil.rpc("evm_mine")
            number = start + made + 1
            sent += [(h, number) for h in hashes]
            if gap > 0:
                anvil.mine(gap)
            made += gap + 1
        if blocks > made:
            anvil.mine(blocks - made)
    finally:
        anvil.rpc("evm_setAutomine", True)
    return sent


def built_chain(blocks: int, txs: int, per_block: int, rebuild: bool = False) -> BuiltChain:
    """The downtime chain for these parameters, from the cache or built (and kept) now."""
    version = anvil_version()
    where = cache_root() / f"catchup-v{CHAIN_FORMAT}-{blocks}-{txs}-{per_block}"
    meta_path = where / "meta.json"
    if not rebuild and meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta["anvil"] == version:
            print(f"  chain from {where}")
            return _kept(where, meta)
    cache_root().mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=".building-", dir=cache_root()))
    try:
        with Anvil() as anvil:
            chain = chain_config(anvil.url, max_blocks_per_poll=1000)
            store = Store.open(f"sqlite:///{building / 'seed.db'}")
            watcher_for(store, chain).poll()
            store.close()
            start_head = anvil.head()
            made = time.monotonic()
            sent = build_downtime(anvil, blocks, txs, per_block)
            head = anvil.head()
            dumped = str(anvil.rpc("anvil_dumpState"))
        (building / "state.json").write_bytes(gzip.decompress(bytes.fromhex(dumped[2:])))
        meta = {"anvil": version, "start_head": start_head, "head": head, "sent": sent}
        (building / "meta.json").write_text(json.dumps(meta))
        print(
            f"  built {head - start_head} blocks, {len(sent)} txs in "
            f"{time.monotonic() - made:.1f} s; kept in {where}"
        )
        shutil.rmtree(where, ignore_errors=True)
        building.rename(where)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return _kept(where, meta)


def _kept(where: Path, meta: dict[str, object]) -> BuiltChain:
    sent = meta["sent"]
    assert isinstance(sent, list)
    start_head, head = meta["start_head"], meta["head"]
    assert isinstance(start_head, int) and isinstance(head, int)
    return BuiltChain(
        where / "state.json", where / "seed.db", start_head, head, [(h, n) for h, n in sent]
    )


def in_process(built: BuiltChain) -> None:
    """The catch-up by a chain watcher in this process, against the pure fetch."""
    from watcher.settlements import Registration, register

    run_dir = Path(tempfile.mkdtemp(prefix="fw-bench-"))
    shutil.copyfile(built.seed_store, run_dir / "bench.db")
    (run_dir / "bench.db").chmod(0o600)  # as the store makes its files
    sent = built.sent
    with Anvil("--load-state", str(built.state)) as anvil:
        assert anvil.head() == built.head, (anvil.head(), built.head)
        chain = chain_config(anvil.url, max_blocks_per_poll=1000)
        store = Store.open(f"sqlite:///{run_dir / 'bench.db'}")
        start_head = built.start_head
        now = time.time_ns() // MS
        ids = {
            register(store, Registration(chain, h), now)[0].settlement_id: (h, n) for h, n in sent
        }
        restarted = watcher_for(store, chain)
        # As the daemon does once started (watcher/app/daemon.py: run): what start-up built
        # lives as long as the process, frozen out of the collector's full passes (two of
        # them walked it during a catch-up: 0.15 s of CPU). The pure fetch below runs after
        # it, under the same collector.
        gc.collect()
        gc.freeze()
        cpu, wall = time.process_time(), time.monotonic()
        stats = restarted.catch_up(max_rounds=10_000)
        ours_wall, ours_cpu = time.monotonic() - wall, time.process_time() - cpu
        assert restarted.head is not None and restarted.head.number == anvil.head(), stats
        wrong = []
        for sid, (_, number) in ids.items():
            rec = store.settlement(sid)
            if rec.verdict != Verdict.FINALITY_CONFIRMED or rec.block_number != number:
                wrong.append((sid, rec.verdict, rec.block_number, number))
        assert not wrong, wrong[:5]

        client = connect(anvil.url)
        numbers = list(range(start_head + 1, anvil.head() + 1))
        cpu, wall = time.process_time(), time.monotonic()
        for i in range(0, len(numbers), 1000):
            client.blocks(numbers[i : i + 1000], full=True)
        hashes = [h for h, _ in sent]
        for i in range(0, len(hashes), 1000):
            client.receipts(hashes[i : i + 1000])
        fetch_wall, fetch_cpu = time.monotonic() - wall, time.process_time() - cpu
        store.close()
    shutil.rmtree(run_dir, ignore_errors=True)
    gc.unfreeze()  # the next run's start-up is frozen again
    print(
        f"  ours {ours_wall:.2f} s wall ({ours_cpu:.2f} s CPU)   pure fetch {fetch_wall:.2f} s "
        f"wall ({fetch_cpu:.2f} s CPU)   ratio {ours_wall / fetch_wall:.2f}x wall, "
        f"{ours_cpu / fetch_cpu:.2f}x CPU   ({len(ids)} watched, all FINALITY_CONFIRMED)"
    )


def register_while_down(store_url: str, rpc: str, hashes: list[str]) -> None:
    """Watch ``hashes`` in the daemon's store while it is down (as another instance would)."""
    from watcher.settlements import Registration, register
    from watcher.store import Store

    store = Store.open(store_url)
    chain = chain_config(rpc)
    now = time.time_ns() // MS
    for h in hashes:
        register(store, Registration(chain, h), now)
    store.close()


def with_api(blocks: int, txs: int, per_block: int) -> None:
    """The daemon as a process catching up while its API is asked every 50 ms."""
    from tests.support.daemon import Daemon

    with Anvil() as anvil, tempfile.TemporaryDirectory(prefix="fw-catchup-") as tmp:
        daemon = Daemon(Path(tmp), anvil.url, poll_interval_s=1.0, max_blocks_per_poll=1000)
        try:
            first = anvil.send()
            sid = daemon.register(first)["settlement_id"]
            anvil.mine(3)
            daemon.wait_verdict(sid, Verdict.FINALITY_CONFIRMED.value)
            daemon.kill9()
            sent = build_downtime(anvil, blocks, txs, per_block)
            target = anvil.head()
            register_while_down(daemon.store_url, anvil.url, [h for h, _ in sent])
            daemon.spawn()
            started = time.monotonic()
            health: list[float] = []
            reads: list[float] = []
            reached = None
            while time.monotonic() - started < 300:
                try:
                    for path, into in (("/healthz", health), (f"/v1/settlements/{sid}", reads)):
                        asked = time.monotonic()
                        daemon.http.get(path, timeout=5.0)
                        into.append(time.monotonic() - asked)
                    head = daemon.head()
                except httpx.ConnectError:
                    time.sleep(0.05)  # not listening yet
                    continue
                if head is not None and head >= target:
                    reached = time.monotonic() - started
                    break
                time.sleep(0.05)
            if reached is None:
                raise RuntimeError(f"head {daemon.head()} never reached {target}")
        finally:
            daemon.close()
    print(
        f"  daemon reached head {target} {reached:.2f} s after its start; during the catch-up "
        f"GET /healthz max {max(health) * 1000:.0f} ms (median "
        f"{statistics.median(health) * 1000:.0f}), GET a settlement max {max(reads) * 1000:.0f} ms "
        f"(median {statistics.median(reads) * 1000:.0f}), {len(reads)} asked"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--blocks", type=int, default=10_000)
    parser.add_argument("--txs", type=int, default=1_000)
    parser.add_argument("--per-block", type=int, default=1)
    parser.add_argument("--api", action="store_true", help="also the daemon process and its API")
    parser.add_argument("--runs", type=int, default=1, help="catch-ups of the same chain")
    parser.add_argument("--rebuild", action="store_true", help="build the chain anew (and keep it)")
    args = parser.parse_args()
    os.environ.setdefault("FINALITY_TEST_ZYGOTE", "0")
    print(
        f"== catch-up of {args.blocks} blocks, {args.txs} watched txs ({args.per_block} a block),"
        " target ours <= 3x pure fetch"
    )
    built = built_chain(args.blocks, args.txs, args.per_block, args.rebuild)
    for _ in range(args.runs):
        in_process(built)
    if args.api:
        print("== the daemon's API during the catch-up, target every answer <= 1 s")
        with_api(args.blocks, args.txs, args.per_block)


if __name__ == "__main__":
    main()
