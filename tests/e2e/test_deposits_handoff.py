"""Deposits across a handoff between two daemons on one PostgreSQL store: the owner is
killed (kill -9) with deposits seen and not final; the standby takes the lease and finishes
them. Each deposit is seen once, final once, and its commit delivered once."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.handoff_helpers import SECRET, commit_counts, wait_owner
from tests.e2e.test_handoff_daemons import TAKEOVER_S, start_pair
from tests.support.anvil import Anvil
from tests.support.daemon import wait_for
from tests.support.receiver import Receiver

pytestmark = pytest.mark.anvil


def pay(anvil: Anvil, sender: int, to: str, value: int) -> None:
    tx = {"from": anvil.accounts[sender], "to": to, "value": hex(value)}
    anvil.receipt(anvil.rpc("eth_sendTransaction", tx))


def test_a_kill9_handoff_neither_loses_nor_repeats_a_deposit(
    tmp_path: Path, anvil: Anvil, pg_url: str
) -> None:
    with Receiver(SECRET) as receiver:
        a, b = start_pair(tmp_path, anvil, pg_url, receiver)
        try:
            addresses = ["0x" + f"{0xA11CE0 + i:040x}" for i in range(3)]
            body = {
                "chain": "local",
                "addresses": addresses,
                "assets": ["native"],
                "commit_url": receiver.url("/deposits"),
            }
            answer = b.post("/v1/subscriptions", body)  # the standby takes registrations too
            assert answer.status_code == 201, answer.text
            sid = answer.json()["subscription_id"]
            a.wait_head(anvil.head())
            pay(anvil, 1, addresses[0], 11)
            pay(anvil, 2, addresses[1], 22)

            def seen(n: int) -> list[dict[str, object]] | None:
                items = b.get(f"/v1/subscriptions/{sid}/deposits").json()["items"]
                return items if len(items) >= n else None

            wait_for(lambda: seen(2), 20, what="two deposits seen by the owner")
            a.kill9()
            pay(anvil, 1, addresses[2], 33)
            anvil.mine(3)
            wait_owner(b, "B", timeout=TAKEOVER_S)

            def all_final() -> list[dict[str, object]] | None:
                items = seen(3) or []
                return items if {d["verdict"] for d in items} == {"FINALITY_CONFIRMED"} else None

            final = wait_for(all_final, 40, what="three final deposits")
            assert sorted(str(d["amount"]) for d in final) == ["11", "22", "33"]
            wait_for(lambda: len(commit_counts(receiver)) == 3, 20, what="three commits")
            time.sleep(1.0)  # a duplicate would show up now
            assert set(commit_counts(receiver).values()) == {1}
            events = b.get("/v1/events", params={"limit": 1000}).json()
            seen_by = Counter(e["settlement_id"] for e in events if e["kind"] == "deposit_seen")
            assert sorted(seen_by.values()) == [1, 1, 1]
        finally:
            a.close()
            b.close()
