"""New heads over WebSocket and JSON-RPC over ws://, against a real anvil.

The subscription is exercised through real faults: a TCP proxy between it and anvil that is
cut and restored, and an endpoint that does not speak WebSocket at all.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from chains.errors import RpcErrorResponse, RpcUnavailable
from chains.heads import HeadSubscription, NewHead
from chains.multi import MultiRpcClient
from chains.pool import client_for
from chains.rpc import connect
from tests.support.anvil import Anvil, free_port
from tests.support.daemon import wait_for
from tests.support.tcp_proxy import TcpProxy


def ws_url(anvil: Anvil) -> str:
    """Anvil serves WebSocket on its HTTP port."""
    return f"ws://127.0.0.1:{anvil.port}"


class Heads:
    """Collects heads from a subscription's thread."""

    def __init__(self) -> None:
        self.got: list[NewHead] = []
        self._lock = threading.Lock()

    def __call__(self, head: NewHead) -> None:
        with self._lock:
            self.got.append(head)

    def numbers(self) -> list[int]:
        with self._lock:
            return [int(h.number) for h in self.got]


@pytest.fixture
def subscribe() -> Iterator[Callable[..., HeadSubscription]]:
    """Factory of started subscriptions, all stopped after the test."""
    subs: list[HeadSubscription] = []

    def make(url: str, on_head: Callable[[NewHead], None], **kwargs: float) -> HeadSubscription:
        kwargs.setdefault("min_backoff_s", 0.05)
        kwargs.setdefault("max_backoff_s", 0.2)
        sub = HeadSubscription(url, on_head, **kwargs).start()  # type: ignore[arg-type]
        subs.append(sub)
        return sub

    yield make
    for sub in subs:
        sub.stop()


def test_subscription_delivers_each_mined_head_with_its_hash(
    anvil: Anvil, subscribe: Callable[..., HeadSubscription]
) -> None:
    heads = Heads()
    sub = subscribe(ws_url(anvil), heads)
    wait_for(lambda: sub.status().state == "subscribed", 5, what="subscribed")
    start = anvil.head()
    anvil.mine(3)
    wait_for(lambda: len(heads.numbers()) >= 3, 5, what="3 heads")
    assert heads.numbers() == [start + 1, start + 2, start + 3]
    for head in heads.got:
        assert head.hash == anvil.block(int(head.number))["hash"]
    status = sub.status()
    assert status.heads == 3
    assert status.last_head_number == start + 3
    assert status.errors == 0 and status.reconnects == 0
    assert status.seconds_since_last_head is not None


def test_stop_ends_the_thread_promptly(
    anvil: Anvil, subscribe: Callable[..., HeadSubscription]
) -> None:
    sub = subscribe(ws_url(anvil), Heads(), silence_s=60)
    wait_for(lambda: sub.status().state == "subscribed", 5, what="subscribed")
    sub.stop(timeout_s=3)  # blocked in a read that would last 60 s without stop()
    assert not sub.alive
    assert sub.status().state == "stopped"


def test_dropped_connection_is_reported_and_heads_flow_again_after_reconnect(
    anvil: Anvil, subscribe: Callable[..., HeadSubscription]
) -> None:
    heads = Heads()
    with TcpProxy(anvil.port) as proxy:
        sub = subscribe(proxy.url("ws"), heads)
        wait_for(lambda: sub.status().state == "subscribed", 5, what="subscribed")
        anvil.mine(1)
        wait_for(lambda: len(heads.numbers()) == 1, 5, what="first head")

        proxy.cut()
        wait_for(lambda: sub.status().drops == 1, 5, what="the drop to be seen")
        anvil.mine(1)  # while down: nothing can arrive
        # A refused redial, waited for (not a fixed 0.3 s: a busy machine redials later).
        wait_for(lambda: sub.status().errors >= 2, 10, what="a refused redial")
        down = sub.status()
        assert down.state in ("backoff", "connecting")
        assert down.last_error is not None
        assert down.errors >= 2  # the drop, then refused redials
        assert len(heads.numbers()) == 1

        proxy.restore()
        wait_for(lambda: sub.status().state == "subscribed", 5, what="resubscribed")
        anvil.mine(1)
        wait_for(lambda: len(heads.numbers()) == 2, 5, what="a head after the reconnect")
        assert heads.numbers()[-1] == anvil.head()
        assert sub.status().reconnects >= 1


def test_silence_is_treated_as_a_dead_subscription(
    anvil: Anvil, subscribe: Callable[..., HeadSubscription]
) -> None:
    sub = subscribe(ws_url(anvil), Heads(), silence_s=0.3)
    wait_for(lambda: sub.status().errors >= 1, 5, what="the silence to be noticed")
    status = sub.status()
    assert "no new head for 0.3 s" in (status.last_error or "")
    assert status.drops >= 1
    wait_for(lambda: sub.status().reconnects >= 1, 5, what="a redial")


def test_an_endpoint_without_websocket_is_an_error_not_a_crash(
    anvil: Anvil, subscribe: Callable[..., HeadSubscription]
) -> None:
    refused = subscribe(f"ws://127.0.0.1:{free_port()}", Heads())
    wait_for(lambda: refused.status().errors >= 2, 5, what="refused dials")
    assert refused.alive
    assert refused.status().state in ("backoff", "connecting")
    assert refused.status().drops == 0  # never subscribed: nothing was lost


def test_ws_transport_reads_single_calls_and_batches(anvil: Anvil) -> None:
    anvil.mine(3)
    client = connect(ws_url(anvil))
    assert client.chain_id() == 31337
    blocks = client.blocks([1, 2, 3], full=False)
    assert [b.header.hash if b else None for b in blocks] == [
        anvil.block(n)["hash"] for n in (1, 2, 3)
    ]
    with pytest.raises(RpcErrorResponse):
        client.call("no_such_method")
    assert client.chain_id() == 31337  # the connection survives an error answer


def test_ws_transport_maps_a_dead_endpoint_and_recovers(anvil: Anvil) -> None:
    with TcpProxy(anvil.port) as proxy:
        client = connect(proxy.url("ws"), timeout_s=2)
        assert client.chain_id() == 31337
        proxy.cut()
        with pytest.raises(RpcUnavailable):
            client.chain_id()
        proxy.restore()
        assert client.chain_id() == 31337  # the next call dials again


def test_ws_member_of_a_multi_endpoint_client_serves_reads_and_fails_over(
    anvil: Anvil,
) -> None:
    with TcpProxy(anvil.port) as proxy:
        client = client_for([proxy.url("ws"), anvil.url], chain_id=31337, timeout_s=2)
        assert isinstance(client, MultiRpcClient)
        head = client.header("latest")
        assert head is not None and head.number == anvil.head()
        assert client.transport.active == 0  # the ws endpoint answered
        proxy.cut()
        anvil.mine(1)
        head = client.header("latest")  # the ws member fails: read over HTTP instead
        assert head is not None and head.number == anvil.head()
        assert client.transport.active == 1
        assert client.health[0].last_error is not None
