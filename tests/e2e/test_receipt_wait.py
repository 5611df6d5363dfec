"""``GET /v1/settlements/{id}/receipt?wait=S``: a client asks once and has the signed
receipt the moment it is stored, whatever the verdict was when it asked.

What a client notices: a read waiting on a settlement that is not final yet is answered with
the receipt once the depth-N block is mined and the receipt signed (the same bytes a plain
read answers); a wait that runs out is answered as a read without ``wait`` (404, ``verdict``,
``pending``), never a 200 that is not a receipt; a bad ``wait`` is a 422 naming it; more
waiting reads than the API's worker threads do not hold up a route that needs one; and the
Python clients (``receipt(id, wait_s=…)``) wait this way.

Real parts: a daemon as a process (receipts on, N = 2), a real automining anvil: no block
is mined unless a test mines it, so a settlement stays one block deep, and waits, until then.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.support.anvil import Anvil
from tests.support.daemon import Daemon, wait_for
from watcher.client import AsyncFinalityClient, FinalityClient, Rejected

pytestmark = pytest.mark.anvil

WAITERS = 60
"""Waiting reads at once: more than the API's 40 worker threads."""


@pytest.fixture(scope="module")
def anvil(module_anvil: Anvil) -> Anvil:
    return module_anvil


@pytest.fixture(scope="module")
def daemon(anvil: Anvil, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    daemon = Daemon(tmp_path_factory.mktemp("wait"), anvil.url, confirmations=2)
    yield daemon
    daemon.close()


def _one_deep(daemon: Daemon, anvil: Anvil) -> str:
    """A fresh tx mined and registered, one block deep of two: its settlement id."""
    tx = anvil.send()
    anvil.receipt(tx)
    sid = str(daemon.register(tx)["settlement_id"])
    wait_for(lambda: daemon.settlement(sid)["confirmations"] == 1, 15, what="the tx seen 1 deep")
    return sid


def _waiting(daemon: Daemon) -> int:
    """Receipt reads the daemon holds asleep now (its ``/metrics``)."""
    for line in daemon.get("/metrics").text.splitlines():
        if line.startswith("finality_receipt_reads_waiting "):
            return int(float(line.split()[1]))
    raise AssertionError("no finality_receipt_reads_waiting in /metrics")


def test_a_waiting_read_gets_the_receipt_when_it_is_signed(daemon: Daemon, anvil: Anvil) -> None:
    sid = _one_deep(daemon, anvil)
    path = f"/v1/settlements/{sid}/receipt"
    with (
        ThreadPoolExecutor(3) as pool,
        FinalityClient(daemon.url) as client,
        httpx.Client(base_url=daemon.url, timeout=60) as http,
    ):
        raw = pool.submit(lambda: http.get(path, params={"wait": 30}))
        typed = pool.submit(lambda: client.receipt(sid, wait_s=30))

        async def from_async() -> dict[str, Any]:
            async with AsyncFinalityClient(daemon.url) as aclient:
                return await aclient.receipt(sid, wait_s=30)

        awaited = pool.submit(lambda: asyncio.run(from_async()))
        wait_for(lambda: _waiting(daemon) >= 3, 15, what="three reads asleep")
        assert not raw.done() and daemon.settlement(sid)["verdict"] == "AWAITING_FINALITY"
        anvil.mine()  # the depth-N block: the verdict, then the receipt, wakes them
        answer = raw.result(timeout=60)
        receipt, also = typed.result(timeout=60), awaited.result(timeout=60)
    assert answer.status_code == 200, answer.text  # within the 30 s: woken, not timed out
    assert answer.content == daemon.get(path).content  # the stored bytes, as a plain read
    assert answer.json()["settlement_id"] == sid and answer.json()["signature"]
    assert receipt == also == answer.json()
    assert _waiting(daemon) == 0


def test_a_wait_that_runs_out_is_answered_as_a_plain_read(daemon: Daemon, anvil: Anvil) -> None:
    sid = _one_deep(daemon, anvil)
    path = f"/v1/settlements/{sid}/receipt"
    started = time.monotonic()
    waited = daemon.get(path, params={"wait": 0.5})
    took = time.monotonic() - started
    plain = daemon.get(path)
    assert waited.status_code == plain.status_code == 404, waited.text
    assert took >= 0.5
    assert waited.json() == plain.json()
    assert waited.json()["verdict"] == "AWAITING_FINALITY" and waited.json()["pending"] is False
    assert daemon.get(path, params={"wait": 0}).json() == plain.json()  # no wait at all

    with FinalityClient(daemon.url) as client, pytest.raises(Rejected) as refused:
        client.receipt(sid, wait_s=0.3)
    assert refused.value.status == 404 and refused.value.body["verdict"] == "AWAITING_FINALITY"

    unknown = "0" * 64  # an unknown id is not waited on
    started = time.monotonic()
    missing = daemon.get(f"/v1/settlements/{unknown}/receipt", params={"wait": 30})
    assert missing.status_code == 404 and missing.json()["fields"] == ["settlement_id"]
    assert time.monotonic() - started < 10
    with FinalityClient(daemon.url) as client, pytest.raises(Rejected) as refused:
        client.receipt(unknown, wait_s=30)
    assert refused.value.fields == ["settlement_id"]


@pytest.mark.parametrize("value", ["-1", "60.5", "3600", "soon", "nan", "inf", ""])
def test_a_bad_wait_is_a_422_naming_it(daemon: Daemon, value: str) -> None:
    answer = daemon.get("/v1/settlements/" + "0" * 64 + "/receipt", params={"wait": value})
    assert answer.status_code == 422, answer.text
    assert answer.json()["fields"] == ["wait"], answer.text


def test_many_waiting_reads_hold_no_worker_thread(daemon: Daemon, anvil: Anvil) -> None:
    """Sixty reads asleep at once, then a route that runs on a worker thread (a settlement's
    events) still answers; the block wakes every one of them with the receipt."""
    sid = _one_deep(daemon, anvil)
    path = f"/v1/settlements/{sid}/receipt"
    with (
        ThreadPoolExecutor(WAITERS) as pool,
        httpx.Client(
            base_url=daemon.url, timeout=60, limits=httpx.Limits(max_connections=WAITERS + 5)
        ) as http,
    ):
        waiters = [pool.submit(lambda: http.get(path, params={"wait": 40})) for _ in range(WAITERS)]
        wait_for(lambda: _waiting(daemon) >= WAITERS, 30, what=f"{WAITERS} reads asleep")
        started = time.monotonic()
        events = http.get(f"/v1/settlements/{sid}/events", timeout=10)
        assert events.status_code == 200, events.text
        assert time.monotonic() - started < 10
        assert not any(w.done() for w in waiters)
        anvil.mine()
        answers = [w.result(timeout=60) for w in waiters]
    assert {a.status_code for a in answers} == {200}
    assert len({a.content for a in answers}) == 1
    assert _waiting(daemon) == 0
