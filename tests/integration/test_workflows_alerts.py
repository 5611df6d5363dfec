"""Workflow events reach the alert channels that ask for them (a real webhook receiver on
loopback, the daemon's real sender), and the async client drives the routes as the blocking
one does (its refusals carry the daemon's whole answer)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.daemon import wait_for
from tests.support.receiver import Receiver
from tests.support.sources_app import LiveApp, source_config_file
from watcher.client import AsyncFinalityClient, Rejected, verify_workflow

ASKED = ["workflow_taken_over", "workflow_lease_expired"]


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, receiver: Receiver) -> Iterator[LiveApp]:
    tmp: Path = tmp_path_factory.mktemp("alerts")
    path = source_config_file(tmp, [])
    alerts = receiver.daemon_config(
        None,
        alerts=(("webhook", "/alerts", {"events": ASKED}),),
        allow_destinations=["127.0.0.1"],
        backoff_initial_s=0.1,
    )
    path.write_text(path.read_text() + alerts)
    with LiveApp(path, start_components=True) as live:
        yield live


def test_a_lapse_and_a_takeover_are_alerted_to_the_channel_that_asks(
    app: LiveApp, receiver: Receiver
) -> None:
    async def handoff() -> str:
        async with AsyncFinalityClient(app.url) as client:
            wf = await client.start_workflow(
                ["charge", "ship"], "agent-a", 1.0, idempotent_steps=["charge"]
            )
            wid = str(wf["workflow_id"])
            await client.begin_step(wid, "charge", 1, "charge", recovery={"idempotency_key": "k"})
            try:
                taken = await client.take_over_workflow(wid, "agent-b", 30)
            except Rejected as refused:  # the lease is live (unless this machine was very slow)
                assert refused.status == 409
                assert refused.body["verdict"] == "LOCK_NOT_HELD"
                assert refused.body["holder"] == "agent-a"
                assert refused.body["lease_expires_at"] == wf["lease_expires_at"]
                await asyncio.sleep(max(0.0, wf["lease_expires_at"] / 1000 - time.time()) + 0.1)
                taken = await client.take_over_workflow(wid, "agent-b", 30)
            assert taken["verdict"] == "HANDOFF_SAFE" and taken["fencing_token"] == 2
            for receipt in taken["receipts"].values():
                assert verify_workflow(receipt, wid).valid
            page = await client.workflows(limit=10)
            assert wid in [w["workflow_id"] for w in page["items"]]
            view = await client.get_workflow(wid)
            assert view["holder"] == "agent-b"
            return wid

    started = time.monotonic()
    wid = asyncio.run(handoff())

    def alerted() -> list[str]:
        bodies = [r.json for r in receiver.requests if r.path == "/alerts" and r.json]
        return [b["kind"] for b in bodies if b.get("settlement_id") == wid]

    kinds = wait_for(
        lambda: alerted() if len(alerted()) >= 2 else None, timeout=30, what="the alerts"
    )
    assert sorted(kinds) == sorted(ASKED), kinds  # begun is not asked for: not sent
    assert time.monotonic() - started < 60
