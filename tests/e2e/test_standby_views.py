"""Two daemons on one PostgreSQL: the standby answers every view with the owner's head.

Behind a load balancer a request reaches either instance. Only the owner of a chain follows
its head; a standby's own tracker is idle. Every view that shows a head or a depth must
therefore come from the store (the head the owner records in each block's transaction),
or a user polling the standby for depth waits for ever. Real processes, the machine's
PostgreSQL (a fresh schema), one real anvil.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from tests.e2e.handoff_helpers import owner, pg_daemon, wait_owner
from tests.support.anvil import Anvil
from tests.support.daemon import Daemon, wait_for

pytestmark = pytest.mark.anvil

LEASE_S = 10.0
"""Long: the owner must keep the chain for the whole test, even on a busy machine."""


def recorded_head(daemon: Daemon) -> tuple[int, str]:
    """The head the owner wrote to the store."""
    [(number, block_hash)] = daemon.query("SELECT head_number, head_hash FROM chains")
    return int(number), str(block_hash)


def check_views(daemon: Daemon, sid: str, tx: str, block: int, head: int, head_hash: str) -> None:
    """Every HTTP view of ``daemon`` that shows a head or a depth shows ``head``."""
    depth = head - block + 1
    by_id = daemon.settlement(sid)
    by_hash = daemon.get(f"/v1/chains/local/txs/{tx}").json()
    for view in (by_id, by_hash):
        assert view["registered"] is True
        assert (view["block_number"], view["head_number"], view["confirmations"]) == (
            block,
            head,
            depth,
        ), f"{daemon.url}: {view}"
    chain = daemon.chain_info()
    assert (chain["head_number"], chain["head_hash"]) == (head, head_hash), chain
    health = daemon.get("/healthz").json()
    assert health["chains"]["local"]["head_number"] == head, health


def confirmed_event(daemon: Daemon, sid: str) -> dict[str, Any]:
    """The ``settlement_confirmed`` frame of ``sid`` on the daemon's SSE stream (decoded)."""
    sse = {"Accept": "text/event-stream"}
    params = {"kinds": "settlement_confirmed"}
    with daemon.http.stream("GET", "/v1/events", headers=sse, params=params) as stream:
        for line in stream.iter_lines():
            if line.startswith("data:"):
                event: dict[str, Any] = json.loads(line.removeprefix("data:"))
                if event["settlement_id"] == sid:
                    return event
    raise AssertionError(f"no settlement_confirmed event of {sid} on {daemon.url}")


def test_a_standby_answers_settlement_tx_and_chain_views_with_the_owners_recorded_head(
    tmp_path: Any, anvil: Anvil, pg_url: str
) -> None:
    a = pg_daemon(tmp_path, anvil.url, pg_url, "A", lease_s=LEASE_S, renew_s=1.0)
    b = pg_daemon(tmp_path, anvil.url, pg_url, "B", lease_s=LEASE_S, renew_s=1.0)
    try:
        a.start()
        wait_owner(a, "A")
        b.start()
        anvil.mine(2)
        a.wait_head(anvil.head())
        tx = anvil.send()
        block = int(anvil.receipt(tx)["blockNumber"], 16)
        sid = b.register(tx, confirmations=3)["settlement_id"]  # via the standby

        # Included, depth 1 of 3: a state that lasts (nothing mines until we do).
        wait_for(
            lambda: a.settlement(sid)["block_number"] == block and recorded_head(a)[0] == block,
            20,
            what="the owner recording the inclusion",
        )
        head, head_hash = recorded_head(a)
        for daemon in (a, b):
            check_views(daemon, sid, tx, block, head, head_hash)
        assert b.settlement(sid)["verdict"] == "AWAITING_FINALITY"

        # Two more blocks: depth 3, final; both instances say so, with the same depth.
        anvil.mine(2)
        a.wait_verdict(sid, "FINALITY_CONFIRMED", timeout=20)
        head, head_hash = recorded_head(a)
        assert head == block + 2
        for daemon in (a, b):
            check_views(daemon, sid, tx, block, head, head_hash)
            facts = confirmed_event(daemon, sid)["payload"]["evidence"]["facts"]
            assert (facts["head_number"], facts["confirmations"]) == (head, 3), facts

        # The CLI against the standby: status, chains, and the wait path of watch
        # (registration answer, then GET polls) all show the recorded depth.
        status = b.cli("status", tx, "--json")
        assert status.returncode == 0, status.stderr
        shown = json.loads(status.stdout)
        assert (shown["head_number"], shown["confirmations"]) == (head, 3), shown
        chains = b.cli("chains")
        assert chains.returncode == 0, chains.stderr
        assert f"head {head} " in chains.stdout, chains.stdout
        watched = b.cli("watch", tx, "--confirmations", "3", "--wait-timeout", "30")
        assert watched.returncode == 0, watched.stderr
        assert f"included in block {block} " in watched.stderr
        assert "3/3 confirmations" in watched.stderr, watched.stderr

        assert owner(a) == ("A", 1), "the test is about a standby: A must own the chain"
    finally:
        a.close()
        b.close()


def test_healthz_is_503_naming_the_store_when_the_recorded_heads_cannot_be_read(
    tmp_path: Any, anvil: Anvil, pg_url: str
) -> None:
    """Views read the store now: without it an instance is not ready, and says why (the
    error type only, never the store URL), instead of failing with a 500."""
    daemon = pg_daemon(tmp_path, anvil.url, pg_url, "A", lease_s=LEASE_S, renew_s=1.0)
    try:
        daemon.start()
        wait_owner(daemon, "A")
        with psycopg.connect(pg_url, autocommit=True) as pg:
            pg.execute("ALTER TABLE chains RENAME TO chains_away")
            try:
                answer = daemon.get("/healthz")
            finally:
                pg.execute("ALTER TABLE chains_away RENAME TO chains")
        assert answer.status_code == 503, answer.text
        body = answer.json()
        assert body["ok"] is False
        assert body["store_error"] == "store unavailable (ProgrammingError)", body
        assert body["chains"]["local"]["head_number"] is None
        assert "postgresql" not in answer.text
        wait_for(lambda: daemon.get("/healthz").status_code == 200, 20, what="healthy again")
    finally:
        daemon.close()
