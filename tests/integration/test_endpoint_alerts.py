"""One bad endpoint among several is an alert, even though the chain runs on.

A real daemon over two proxies in front of one anvil: the followed endpoint starts failing
(HTTP 500), its circuit opens, failover reads on from the other, and the daemon stores one
``rpc_unhealthy`` event naming that endpoint, its state and why; once the fault ends and the
endpoint answers again, one ``rpc_recovered``. Neither repeats while nothing changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.anvil import Anvil
from tests.support.daemon import Daemon, wait_for
from tests.support.faulty_proxy import FaultyProxy


def endpoint_events(daemon: Daemon, endpoint: str) -> list[dict[str, Any]]:
    events = daemon.get("/v1/events").json()
    return [
        e
        for e in events
        if e["kind"] in ("rpc_unhealthy", "rpc_recovered")
        and e["payload"].get("endpoint") == endpoint
    ]


def test_an_endpoint_that_fails_and_comes_back_is_reported_once_each_way(
    anvil: Anvil, tmp_path: Path
) -> None:
    proxies = [FaultyProxy(anvil.url) for _ in range(2)]
    # Quorum 2 of 2: the second endpoint is asked at every block, so its failures add up
    # and its circuit opens while the chain is followed on the first.
    daemon = Daemon(
        tmp_path,
        proxies[0].url,
        start=False,
        rpc=[p.url for p in proxies],
        quorum=2,
        rpc_timeout_s=1.0,
        rpc_backoff_s=0.3,
        poll_interval_s=0.1,
    )
    bad, good = proxies[1], proxies[0]
    try:
        daemon.start()
        tx = anvil.send()
        view = daemon.register(tx)
        bad.http_500 = True
        for _ in range(6):
            anvil.mine(1)
            daemon.wait_head(anvil.head())
        [down] = wait_for(
            lambda: endpoint_events(daemon, bad.url) or None, 10, what="an rpc_unhealthy event"
        )
        assert down["kind"] == "rpc_unhealthy" and down["severity"] == "warning"
        assert down["payload"]["state"] == "open"
        assert "500" in down["payload"]["reason"], down
        assert endpoint_events(daemon, good.url) == []
        assert daemon.settlement(view["settlement_id"])["verdict"] == "AWAITING_FINALITY"

        bad.clear()
        anvil.mine(1)
        wait_for(
            lambda: daemon.settlement(view["settlement_id"])["verdict"] == "FINALITY_CONFIRMED",
            15,
            what="confirmed once both endpoints agree",
        )
        events = wait_for(
            lambda: (lambda es: es if len(es) >= 2 else None)(endpoint_events(daemon, bad.url)),
            10,
            what="rpc_recovered",
        )
        anvil.mine(3)
        daemon.wait_head(anvil.head())
        kinds = [e["kind"] for e in endpoint_events(daemon, bad.url)]
        assert kinds == ["rpc_unhealthy", "rpc_recovered"], kinds
        assert events[1]["payload"]["state"] == "closed"
    finally:
        daemon.close()
        for proxy in proxies:
            proxy.close()
