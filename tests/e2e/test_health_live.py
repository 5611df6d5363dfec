"""A live look-up (an unregistered tx hash, answered from the node) with the node stalled:
the daemon (a real process) reads its node through a real fault proxy that holds every
answer 6 s. The GET answers within ``[api] live_lookup_timeout_s`` (2 s by default) with
what the store knows, saying the live check timed out; before, it hung past 10 s."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.e2e.helpers import unknown_hash
from tests.support.anvil import Anvil
from tests.support.daemon import CHAIN, Daemon
from tests.support.faulty_proxy import FaultyProxy

pytestmark = pytest.mark.anvil

STALL_S = 6.0
"""How long the stalled node holds each answer."""


def test_a_live_lookup_with_the_node_stalled_answers_in_time_saying_so(
    anvil: Anvil, make_daemon: Callable[..., Daemon]
) -> None:
    proxy = FaultyProxy(anvil.url)
    try:
        _check(proxy, make_daemon(proxy.url))
    finally:
        proxy.close()


def _check(proxy: FaultyProxy, daemon: Daemon) -> None:
    tx = unknown_hash(77)
    answered = daemon.get(f"/v1/chains/{CHAIN}/txs/{tx}")
    assert answered.status_code == 200, answered.text
    assert "live_check" not in answered.json()  # the node answered: a plain live view
    head = daemon.head()

    proxy.delay_s = STALL_S
    started = time.monotonic()
    stalled = daemon.get(f"/v1/chains/{CHAIN}/txs/{tx}", timeout=30)
    took = time.monotonic() - started

    assert stalled.status_code == 200, stalled.text
    assert took < 4.0, f"the look-up took {took:.1f} s with a 2 s limit"
    view = stalled.json()
    assert view["live_check"] == "timed_out"
    assert view["registered"] is False and view["settlement_id"] is None
    assert view["verdict"] == "NO_SETTLEMENT"
    assert "timed out after 2 s" in view["directive"]
    assert view["head_number"] == head  # what the store recorded

    proxy.clear()
    again = daemon.get(f"/v1/chains/{CHAIN}/txs/{tx}", timeout=30)
    assert again.status_code == 200 and "live_check" not in again.json(), again.text
