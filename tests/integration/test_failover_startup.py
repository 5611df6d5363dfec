"""Start-up chain-id check by majority: real anvil, proxies that answer for another chain.

With several endpoints the chain starts when ``quorum`` of them serve the configured chain
id; the others are marked ``wrong_chain``, logged and reported as ``rpc_unhealthy``. Too
few right answers refuse the start with a message naming every endpoint and what it said.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chains.errors import ChainIdMismatch, RpcUnavailable
from tests.integration.quorum_helpers import close_built, service_over
from tests.support.anvil import Anvil, free_port
from tests.support.daemon import Daemon, wait_for
from tests.support.faulty_proxy import FaultyProxy


def test_daemon_starts_on_the_majority_and_marks_the_wrong_chain(
    anvil: Anvil, tmp_path: Path
) -> None:
    proxies = [FaultyProxy(anvil.url) for _ in range(3)]
    proxies[2].chain_id = 5
    daemon = Daemon(tmp_path, proxies[0].url, start=False, rpc=[p.url for p in proxies], quorum=2)
    try:
        daemon.start()
        [chain] = daemon.get("/v1/chains").json()
        states = {e["endpoint"]: e["state"] for e in chain["rpc"]}
        assert states[proxies[2].url] == "wrong_chain", chain["rpc"]
        assert states[proxies[0].url] == "closed"
        event = wait_for(
            lambda: next(
                (e for e in daemon.get("/v1/events").json() if e["kind"] == "rpc_unhealthy"),
                None,
            ),
            what="an rpc_unhealthy event",
        )
        assert event["payload"]["endpoint"] == proxies[2].url
        assert "chain id 5" in event["payload"]["reason"]
        assert f"endpoint {proxies[2].url} serves chain id 5, not 31337" in daemon.log_tail(200)
        # Settlements are followed on the right endpoints; the wrong one is never read.
        tx = anvil.send()
        view = daemon.register(tx)
        anvil.mine(3)
        wait_for(
            lambda: (
                daemon.get(f"/v1/settlements/{view['settlement_id']}").json()["verdict"]
                == "FINALITY_CONFIRMED"
            ),
            what="finality",
        )
        assert set(proxies[2].calls) == {"eth_chainId"}
    finally:
        daemon.close()
        for p in proxies:
            p.close()


def test_two_of_three_wrong_with_quorum_two_refuses_naming_each(
    anvil: Anvil, tmp_path: Path
) -> None:
    proxies = [FaultyProxy(anvil.url) for _ in range(3)]
    proxies[1].chain_id = 5
    proxies[2].chain_id = 1
    service = service_over(tmp_path, [p.url for p in proxies], quorum=2, rpc_timeout_s=1.0)
    try:
        with pytest.raises(ChainIdMismatch) as info:
            service.start_chain("local")
        message = str(info.value)
        assert "1 of 3 rpc endpoints serve chain id 31337" in message
        assert "2 needed (quorum)" in message
        assert f"{proxies[0].url}: chain id 31337" in message
        assert f"{proxies[1].url}: chain id 5" in message
        assert f"{proxies[2].url}: chain id 1" in message
    finally:
        close_built(service)
        for p in proxies:
            p.close()


def test_a_dead_endpoint_is_no_reason_to_refuse(anvil: Anvil, tmp_path: Path) -> None:
    proxies = [FaultyProxy(anvil.url) for _ in range(2)]
    dead = f"http://127.0.0.1:{free_port()}"
    service = service_over(
        tmp_path, [proxies[0].url, dead, proxies[1].url], quorum=2, rpc_timeout_s=1.0
    )
    try:
        service.start_chain("local")  # 2 of 3 right, one unreachable: starts
        assert service.health["local"].started
    finally:
        close_built(service)
    # Only one right and one dead, quorum 2: not refused (the dead one may come back), but
    # not started either: the service keeps trying.
    proxies[1].chain_id = 5
    service = service_over(
        tmp_path, [proxies[0].url, dead, proxies[1].url], quorum=2, rpc_timeout_s=1.0
    )
    try:
        with pytest.raises(RpcUnavailable, match=r"1 of 3 endpoints confirmed chain id 31337"):
            service.start_chain("local")
        assert not service.health["local"].started
    finally:
        close_built(service)
        for p in proxies:
            p.close()
