"""kill -9 of the current owner, again and again, while settlements and reorgs go on.

Three daemons share one PostgreSQL schema. Each round registers settlements with a commit URL
(through whichever daemon is up), mines, sometimes reorgs the head, then kills the owner at
a random moment (mid block processing, between a verdict and its delivery, mid delivery)
and starts it again as the standby. At the end: every settlement is FINALITY_CONFIRMED,
every commit was applied exactly once (the receiver dedupes by Idempotency-Key, and no
commit went out under a second key), none is lost, the fencing tokens only grew, and every
write the store refused carried a token below the lease's.
"""

from __future__ import annotations

import functools
import random
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.handoff_helpers import SECRET, commit_counts, owner, pg_daemon
from tests.support.anvil import Anvil
from tests.support.daemon import START_TIMEOUT_S, Daemon, wait_for
from tests.support.receiver import Receiver

pytestmark = pytest.mark.anvil

KILLS = 20
LEASE_S = 1.0


def owner_above(daemon: Daemon, token: int) -> tuple[str | None, int] | None:
    """The lease's (owner, token) once its token is above ``token`` (a takeover happened)."""
    lease = owner(daemon)
    return lease if lease is not None and lease[1] > token else None


def up(daemon: Daemon) -> bool:
    """A (re)spawned daemon answers ``/healthz``."""
    try:
        return daemon.running and daemon.get("/healthz", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def first_up(daemons: list[Daemon]) -> Daemon | None:
    """The first of ``daemons`` that is up, if any."""
    return next(filter(up, daemons), None)


def ready(daemon: Daemon) -> None:
    """Wait until a (re)spawned daemon answers ``/healthz``."""
    wait_for(lambda: up(daemon), START_TIMEOUT_S, what="the daemon up")  # 20 s: too short loaded


@pytest.mark.timeout(600)  # a hang's deadline: 20 takeovers take 40-110 s by the load
def test_twenty_kill9_of_the_owner_lose_and_duplicate_nothing(
    tmp_path: Path, anvil: Anvil, pg_url: str
) -> None:
    rng = random.Random(5)
    with Receiver(SECRET) as receiver:
        daemons = {
            name: pg_daemon(
                tmp_path, anvil.url, pg_url, name, receiver, lease_s=LEASE_S, renew_s=0.25
            )
            for name in ("A", "B", "C")
        }
        try:
            for d in daemons.values():
                d.start()
            sids: list[str] = []
            kills = 0
            killed_token = 0
            reorgs = 0
            while kills < KILLS:
                # The next victim is the owner that took over after the last kill.
                current = wait_for(
                    functools.partial(owner_above, daemons["A"], killed_token),
                    10,
                    what="a new owner",
                )
                killed_token = current[1]
                victim = daemons[str(current[0])]
                others = [d for d in daemons.values() if d is not victim]
                # At least one standby is up (a third daemon gives the one restarted last
                # round time to come up without slowing the loop down).
                standby = wait_for(functools.partial(first_up, others), 20, what="a standby")
                # A daemon takes the lease as it starts, before its API listens: registering
                # through the new owner must wait until it answers.
                ready(victim)
                for _ in range(rng.randint(1, 2)):
                    tx = anvil.send()
                    via = rng.choice([victim, standby])
                    sids.append(
                        via.register(
                            tx, dependent_state={"n": len(sids)}, commit_url=receiver.url("/c")
                        )["settlement_id"]
                    )
                if rng.random() < 0.3:
                    anvil.mine(2)
                    anvil.reorg(2)  # replaces two empty blocks: the owner must follow
                    reorgs += 1
                anvil.mine(rng.randint(1, 3))
                time.sleep(rng.uniform(0.0, 0.6))
                victim.kill9()
                kills += 1
                victim.spawn()  # back as the standby (or the owner, if it wins the lease)
            for d in daemons.values():
                ready(d)
            anvil.mine(4)
            survivor = daemons["A"]
            for sid in sids:
                survivor.wait_verdict(sid, "FINALITY_CONFIRMED", timeout=30)
            # Generous, as every wall-clock wait here: a commit whose sender was killed
            # mid-delivery goes out again only after its claim's lease and backoff; once,
            # under a whole suite's load, 30 s did not suffice (every verdict final already).
            # Lost or doubled commits are asserted below.
            wait_for(lambda: len(commit_counts(receiver)) == len(sids), 120, what="all commits")
            time.sleep(1.5)  # a late duplicate would be applied by now
            counts = commit_counts(receiver)
            assert set(counts) == set(sids), "a commit was lost"
            assert set(counts.values()) == {1}, f"applied twice: {counts.most_common(3)}"

            tokens = survivor.query("SELECT from_token, to_token FROM handoffs ORDER BY id")
            assert len(tokens) >= KILLS, "every kill led to a recorded takeover"
            assert all(f is None or t > f for f, t in tokens)
            assert [t for _, t in tokens] == sorted(t for _, t in tokens)
            final = owner(survivor)
            assert final is not None
            for tok, current in survivor.query(
                "SELECT token, current_token FROM fencing_rejections"
            ):
                assert current is None or tok < current, "a refusal of a current token"
            verdicts = {r[0] for r in survivor.query("SELECT DISTINCT verdict FROM handoffs")}
            assert verdicts <= {"HANDOFF_SAFE", "NO_TRANSACTION"}, verdicts
            assert reorgs >= 1
        finally:
            for d in daemons.values():
                d.close()
