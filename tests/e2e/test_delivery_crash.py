"""kill -9 around a delivery: the commit is applied exactly once after a restart.

Two moments: after the verdict is stored but before the commit went out (the receiver is
down), and in the middle of the request (the receiver holds it, the daemon is killed, the
receiver then applies it and the restarted daemon sends it again under the same key). Also:
a node going away raises one ``rpc_unhealthy`` alert.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.anvil import Anvil
from tests.support.daemon import Daemon, wait_for
from tests.support.receiver import Receiver

pytestmark = pytest.mark.anvil

SECRET = "crash-secret"
DELIVERY: dict[str, Any] = {
    "backoff_initial_s": 0.2,
    "backoff_max_s": 0.5,
    "timeout_s": 1.0,
    "receipt_wait_s": 0.5,
    "max_attempts": 50,
}


def daemon_for(make_daemon: Callable[..., Daemon], anvil: Anvil, receiver: Receiver) -> Daemon:
    d = make_daemon(anvil.url, start=False)
    d.config_path.write_text(d.config_path.read_text() + receiver.daemon_config(SECRET, **DELIVERY))
    d.start()
    return d


def commit_rows(daemon: Daemon, sid: str) -> list[tuple[Any, ...]]:
    """(id, state, attempts, idempotency key) of the settlement's commit deliveries, as
    ``GET /v1/deliveries`` lists them."""
    rows = daemon.deliveries(settlement_id=sid)
    return [
        (r["id"], r["state"], r["attempts"], r["idempotency_key"])
        for r in rows
        if r["channel"] == "commit"
    ]


def test_killed_after_the_verdict_before_delivery(
    anvil: Anvil, make_daemon: Callable[..., Daemon]
) -> None:
    receiver = Receiver(SECRET, start=False)  # down: the commit cannot go out
    try:
        daemon = daemon_for(make_daemon, anvil, receiver)
        tx = anvil.send()
        sid = daemon.register(tx, dependent_state={"n": 1}, commit_url=receiver.url("/c"))[
            "settlement_id"
        ]
        anvil.mine(2)
        daemon.wait_verdict(sid, "FINALITY_CONFIRMED")
        [(row_id, state, _, key)] = wait_for(lambda: commit_rows(daemon, sid), 5, what="row")
        assert state in ("pending", "sending")
        daemon.kill9()

        receiver.start()
        daemon.start()
        wait_for(lambda: commit_rows(daemon, sid)[0][1] == "delivered", 15, what="delivered")
        time.sleep(0.5)
        [commit] = receiver.effects("/c")
        assert commit["settlement_id"] == sid and commit["dependent_state"] == {"n": 1}
        assert key == f"fw:{sid}:commit"
        assert {r.key for r in receiver.received("/c")} == {key}
        assert commit_rows(daemon, sid)[0][0] == row_id
    finally:
        receiver.stop()


def test_killed_in_the_middle_of_the_request(
    anvil: Anvil, make_daemon: Callable[..., Daemon]
) -> None:
    with Receiver(SECRET) as receiver:
        daemon = daemon_for(make_daemon, anvil, receiver)
        receiver.hold_next("/c")  # the commit is read, then held: the daemon waits
        tx = anvil.send()
        sid = daemon.register(tx, commit_url=receiver.url("/c"))["settlement_id"]
        anvil.mine(2)
        assert receiver.held.wait(15), "the commit request never arrived"
        assert commit_rows(daemon, sid)[0][1] == "sending"
        daemon.kill9()
        receiver.release()  # the receiver applies what it got; nobody hears the answer
        wait_for(lambda: len(receiver.effects("/c")) == 1, 5, what="first effect")

        daemon.start()  # the row is still "sending": resent once its lease ends
        wait_for(lambda: commit_rows(daemon, sid)[0][1] == "delivered", 20, what="delivered")
        requests = receiver.received("/c")
        # Sent again after the restart under the same key and body (more than once if an
        # attempt ran past its 1 s deadline on a loaded machine), applied once.
        assert len(requests) >= 2, requests
        assert {r.key for r in requests} == {f"fw:{sid}:commit"}
        assert all(r.body == requests[0].body for r in requests)
        assert len(receiver.effects("/c")) == 1  # applied once
        assert commit_rows(daemon, sid)[0][2] >= len(requests)  # attempts: each one counted


def test_a_node_that_goes_away_raises_one_rpc_unhealthy_alert(
    start_anvil: Callable[..., Anvil], make_daemon: Callable[..., Daemon]
) -> None:
    node = start_anvil()
    with Receiver(SECRET) as receiver:
        daemon = daemon_for(make_daemon, node, receiver)
        node.stop()
        alert = wait_for(lambda: receiver.alerts("rpc_unhealthy"), 15, what="rpc_unhealthy")[0]
        assert alert["severity"] == "critical" and alert["payload"]["failed_polls"] == 3
        assert alert["payload"]["endpoint"] == node.url
        time.sleep(1.5)  # several more failed polls: still one alert for the period
        assert len(receiver.alerts("rpc_unhealthy")) == 1
        assert daemon.get("/healthz").status_code == 503
