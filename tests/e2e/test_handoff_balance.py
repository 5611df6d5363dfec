"""Three chains, two then three daemons on one PostgreSQL: the leases spread out.

Real processes, three anvils (distinct chain ids), the machine's PostgreSQL (a fresh schema),
one HTTP receiver counting applied commits by Idempotency-Key. Each daemon must come to own a
share of the chains (a rebalance hands a lease over like SIGTERM does, recorded with reason
``rebalance``), no name may ever have two owners (the handoff records form one chain of
custody per name, tokens growing), settlements on every chain confirm with their commit
applied exactly once, and a kill -9 moves the victim's chain to a survivor within the lease.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.handoff_helpers import (
    commit_counts,
    custody_breaks,
    lease_owners,
    live_spread,
    pg_multi_daemon,
    stale_writes_accepted,
)
from tests.support.anvil import Anvil
from tests.support.daemon import Daemon, wait_for
from tests.support.receiver import Receiver

pytestmark = pytest.mark.anvil

LEASE_S = 2.0
CHAINS = (("local", 31337), ("second", 1337), ("third", 31338))
KEY = "0x" + "5e" * 32
"""Signing key of the daemons (chain id 31338 is not a dev chain: no dev key)."""


def spread_is(daemon: Daemon, expected: list[int]) -> bool:
    spread = live_spread(daemon)
    return sorted(spread.values()) == expected and sum(spread.values()) == len(CHAINS)


@pytest.mark.timeout(300)  # a hang's deadline: 37 s at load 10, 101 s and over 120 s at load 16
def test_three_chains_spread_over_the_instances_and_fail_over(
    tmp_path: Path,
    start_anvil: Callable[..., Anvil],
    pg_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FINALITY_SIGNING_KEY", KEY)
    anvils = {name: start_anvil("--chain-id", str(cid)) for name, cid in CHAINS}
    chains = [(name, cid, anvils[name].url) for name, cid in CHAINS]
    with Receiver("handoff-secret") as receiver:
        daemons = {
            n: pg_multi_daemon(tmp_path, chains, pg_url, n, lease_s=LEASE_S, receiver=receiver)
            for n in ("A", "B", "C")
        }
        a, b, c = daemons.values()
        try:
            a.start()
            b.start()
            wait_for(lambda: spread_is(a, [1, 2]), 10, what="two daemons sharing 3 chains")

            def rebalanced() -> list[dict[str, object]]:
                # The record follows the lease's takeover by a few ms.
                return [h for h in a.get("/v1/handoffs").json() if h["reason"] == "rebalance"]

            [moved] = wait_for(rebalanced, 5, what="the rebalance's handoff record")
            assert (moved["from_owner"], moved["to_owner"]) == ("A", "B")
            assert moved["verdict"] in ("HANDOFF_SAFE", "NO_TRANSACTION")
            leases = a.get("/v1/leases").json()
            assert {x["name"] for x in leases["leases"]} == {n for n, _ in CHAINS}
            assert {i["instance_id"] for i in leases["instances"] if i["alive"]} == {"A", "B"}
            assert leases["balance"] is True

            sids: dict[str, list[str]] = {}
            for i, (name, _) in enumerate(CHAINS):
                via = (a, b)[i % 2]
                sids[name] = [
                    via.register(anvils[name].send(), chain=name, commit_url=receiver.url("/c"))[
                        "settlement_id"
                    ]
                    for _ in range(2)
                ]
            for anvil in anvils.values():
                anvil.mine(3)
            for ids in sids.values():
                for sid in ids:
                    a.wait_verdict(sid, "FINALITY_CONFIRMED", timeout=15)
            total = sum(len(ids) for ids in sids.values())
            wait_for(lambda: len(commit_counts(receiver)) == total, 15, what="every commit")

            c.start()
            wait_for(lambda: spread_is(a, [1, 1, 1]), 12, what="three daemons 1/1/1")
            owners = lease_owners(a)
            assert set(owners.values()) == {"A", "B", "C"}

            victim_chain = "third"
            victim = daemons[str(owners[victim_chain])]
            token = int(a.query("SELECT token FROM leases WHERE name = ?", victim_chain)[0][0])
            victim.kill9()
            survivor = next(d for d in daemons.values() if d is not victim)

            def moved_on() -> bool:
                row = survivor.query(
                    "SELECT owner, token, expires_at FROM leases WHERE name = ?", victim_chain
                )[0]
                return bool(row[1] > token and row[2] > time.time() * 1000)

            # How soon (lease + check interval) is bench/handoff.py's failover figure.
            wait_for(moved_on, 60, interval=0.02, what=f"{victim_chain} moving on")
            assert lease_owners(survivor)[victim_chain] != victim.dir.name
            sid = survivor.register(
                anvils[victim_chain].send(), chain=victim_chain, commit_url=receiver.url("/c")
            )["settlement_id"]
            anvils[victim_chain].mine(3)
            survivor.wait_verdict(sid, "FINALITY_CONFIRMED", timeout=15)
            wait_for(lambda: len(commit_counts(receiver)) == total + 1, 15, what="last commit")
            time.sleep(0.5)  # a duplicate would show up now
            assert set(commit_counts(receiver).values()) == {1}
            assert custody_breaks(survivor) == []
            assert stale_writes_accepted(survivor) == 0
        finally:
            for d in daemons.values():
                d.close()
