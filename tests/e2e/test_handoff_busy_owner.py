"""A busy owner keeps its lease: a big catch-up with a short lease moves nothing.

Two daemons on one PostgreSQL schema follow one anvil (``--no-mining``); A owns ``local``
with a 1.5 s lease, B stands by. Hundreds of settlements wait in the mempool, then hundreds
of blocks are mined at once, so A catches up for seconds (CPU-bound block processing, a
fenced PostgreSQL transaction per block, each holding its lock on the lease row). Before
the lease keeper, A's renewal queued behind those transactions and B took the lease as
lapsed; now A must keep it throughout: no ``expired`` takeover, same owner and token, and
every settlement confirmed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.handoff_helpers import owner, pg_daemon, wait_owner
from tests.support.anvil import Anvil
from tests.support.daemon import wait_for

pytestmark = pytest.mark.anvil

LEASE_S = 1.5
TXS = 200
BLOCKS = 300


def test_an_owner_busy_catching_up_keeps_its_short_lease(
    tmp_path: Path, start_anvil: Callable[..., Anvil], pg_url: str
) -> None:
    anvil = start_anvil("--no-mining")
    a = pg_daemon(tmp_path, anvil.url, pg_url, "A", lease_s=LEASE_S, renew_s=0.5)
    b = pg_daemon(tmp_path, anvil.url, pg_url, "B", lease_s=LEASE_S, renew_s=0.5)
    try:
        a.start()
        wait_owner(a, "A")
        b.start()
        lease = owner(a)
        assert lease is not None and lease[0] == "A"
        for _ in range(TXS):
            a.register(anvil.send())
        anvil.mine(BLOCKS)

        def caught_up() -> bool:
            rows = a.query("SELECT count(*) FROM settlements WHERE verdict = 'FINALITY_CONFIRMED'")
            head = a.query("SELECT head_number FROM chains WHERE name = 'local'")[0][0]
            return int(rows[0][0]) >= TXS and int(head or 0) >= BLOCKS

        wait_for(caught_up, 60, interval=0.05, what="every settlement confirmed, head caught up")
        assert owner(a) == lease, "the busy owner lost its lease"
        reasons = [r[0] for r in a.query("SELECT reason FROM handoffs WHERE name = 'local'")]
        assert "expired" not in reasons and reasons == ["first"], reasons
        assert not a.query("SELECT id FROM fencing_rejections")
    finally:
        a.close()
        b.close()
