"""The daemon with ``heads = "ws"``: verdicts arrive long before the next interval poll, the
WebSocket going away only slows things down to polling, and a ws:// endpoint serves reads.
Real daemon processes, a real anvil, a real TCP proxy to cut the WebSocket."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.support.anvil import Anvil
from tests.support.daemon import Daemon, wait_for
from tests.support.tcp_proxy import TcpProxy

LONG_POLL_S = 3600.0
"""Interval of the fallback polling in the ws test: an hour, so no interval poll runs after
the start-up one and every verdict the test sees must have been woken by a head (how fast
that is, is bench/latency.py's figure: a wall-clock bound here would only flake on a busy
machine)."""


def ws_of(anvil: Anvil) -> str:
    return f"ws://127.0.0.1:{anvil.port}"


def heads(daemon: Daemon) -> dict[str, Any]:
    info: dict[str, Any] = daemon.chain_info()["heads"]
    return info


def included(daemon: Daemon, anvil: Anvil) -> tuple[str, int]:
    """Send a tx, register it; returns (settlement id, its block number)."""
    tx = anvil.send()
    block = int(anvil.receipt(tx)["blockNumber"], 16)
    return daemon.register(tx)["settlement_id"], block


def wait_depth(daemon: Daemon, sid: str, depth: int, timeout: float = 5.0) -> None:
    """Wait until the daemon shows the settlement at ``depth`` confirmations."""
    wait_for(
        lambda: daemon.settlement(sid)["confirmations"] >= depth, timeout, what=f"depth {depth}"
    )


def test_ws_heads_confirm_well_before_the_next_interval_poll(
    anvil: Anvil, make_daemon: Callable[..., Daemon]
) -> None:
    daemon = make_daemon(anvil.url, heads="ws", heads_url=ws_of(anvil), poll_interval_s=LONG_POLL_S)
    wait_for(lambda: heads(daemon)["subscribed"], 10, what="subscribed")
    assert heads(daemon)["mode"] == "ws"
    for _ in range(3):
        sid, block = included(daemon, anvil)
        anvil.mine(1)  # depth 2: its head wakes the poll that finds the registration
        wait_depth(daemon, sid, 2, timeout=30)
        anvil.mine(1)  # depth 3 = N
        view = daemon.wait_verdict(sid, "FINALITY_CONFIRMED", timeout=30)  # << LONG_POLL_S
        assert view["block_number"] == block
    info = heads(daemon)
    assert info["heads_received"] >= 9  # 3 rounds: the tx's block and two more each
    assert info["wakes"] >= 6
    assert info["fallbacks"] == 0
    metrics = daemon.get("/metrics").text
    assert 'finality_heads_subscribed{chain="local"} 1.0' in metrics
    assert daemon.terminate(timeout=30.0) == 0, daemon.log_tail()  # the subscription ends too


def test_without_the_websocket_polling_carries_on_and_heads_come_back(
    anvil: Anvil, make_daemon: Callable[..., Daemon]
) -> None:
    with TcpProxy(anvil.port) as proxy:
        daemon = make_daemon(anvil.url, heads="ws", heads_url=proxy.url("ws"), poll_interval_s=1.0)
        wait_for(lambda: heads(daemon)["subscribed"], 10, what="subscribed")

        proxy.cut()
        wait_for(lambda: not heads(daemon)["subscribed"], 10, what="the drop to show")
        down = heads(daemon)
        assert down["fallbacks"] == 1
        assert down["last_error"]
        assert daemon.chain_info()["healthy"]  # the chain is followed; only latency suffers
        sid, _ = included(daemon, anvil)
        anvil.mine(2)
        daemon.wait_verdict(sid, "FINALITY_CONFIRMED", timeout=10)  # by interval polling
        metrics = daemon.get("/metrics").text
        assert 'finality_heads_subscribed{chain="local"} 0.0' in metrics
        assert 'finality_heads_fallbacks_total{chain="local"} 1.0' in metrics

        received = heads(daemon)["heads_received"]
        proxy.restore()
        wait_for(lambda: heads(daemon)["subscribed"], 15, what="resubscribed")
        anvil.mine(1)
        wait_for(lambda: heads(daemon)["heads_received"] > received, 5, what="heads flowing again")
        assert heads(daemon)["reconnects"] >= 1


def test_a_ws_url_as_the_only_rpc_endpoint_tracks_settlements(
    anvil: Anvil, make_daemon: Callable[..., Daemon]
) -> None:
    daemon = make_daemon(ws_of(anvil))  # reads over ws://; heads polled (the default)
    assert heads(daemon)["mode"] == "poll"
    assert heads(daemon)["pacing"]["step_ms"] > 0  # polled: paced to the blocks
    sid, block = included(daemon, anvil)
    anvil.mine(2)
    view = daemon.wait_verdict(sid, "FINALITY_CONFIRMED", timeout=10)
    assert view["block_number"] == block
    assert view["confirmations"] >= 3
