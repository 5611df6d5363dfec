"""What the engine puts in the outbox, driven against a real anvil (no sender, no HTTP).

The rows must appear in the same store transaction as the change they report: when the
verdict is there, the commit is there; before it, nothing (unless provisional).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.integration.helpers import wait_included
from tests.support.anvil import Anvil
from tests.support.rigs import Rig, RigFactory, make_watcher
from watcher.delivery.plan import AlertRoute, OutboxPlan
from watcher.settlements import Registration, new_settlement
from watcher.store.outbox_store import DeliveryRecord

pytestmark = pytest.mark.anvil

COMMIT_URL = "http://127.0.0.1:9/commit"
HOOK = AlertRoute("webhook", "http://127.0.0.1:9/alerts", None, "info")
SLACK = AlertRoute("slack", "http://127.0.0.1:9/slack", frozenset({"reorg"}), "warning")


@pytest.fixture
def rig(anvil: Anvil, make_rig: RigFactory) -> Rig:
    r = make_rig(anvil, confirmations=3)
    r.watcher.plan = OutboxPlan([HOOK, SLACK])
    r.watcher.poll()
    return r


def register(rig: Rig, tx: str, provisional: bool = False, **kw: Any) -> str:
    reg = Registration(rig.config, tx, commit_url=COMMIT_URL, dependent_state={"x": 1}, **kw)
    new = replace(new_settlement(reg, rig.clock()), provisional=provisional)
    rec, _ = rig.store.register(new)
    return rec.settlement_id


def rows(rig: Rig, channel: str = "commit", sid: str | None = None) -> list[DeliveryRecord]:
    return [d for d in rig.store.outbox().list(settlement_id=sid) if d.channel == channel]


def test_the_commit_is_enqueued_with_the_verdict_and_never_before(rig: Rig) -> None:
    first = rig.anvil.send(1, 2)
    tx = rig.anvil.send()
    wait_included(rig.anvil, tx)
    plain = register(rig, first)
    sid = register(rig, tx)
    rig.watcher.poll()
    assert rig.settlement(sid).verdict == "AWAITING_FINALITY"
    assert rows(rig) == []

    rig.mine_and_poll(1)
    assert rig.settlement(sid).verdict == "AWAITING_FINALITY"
    assert rows(rig, sid=sid) == []  # not final: nothing for it, not even provisional
    assert [d.kind for d in rows(rig, sid=plain)] == ["commit"]

    rig.mine_and_poll(1)
    assert rig.settlement(sid).verdict == "FINALITY_CONFIRMED"
    [commit] = rows(rig, sid=sid)
    [event] = rig.events(sid, "settlement_confirmed")
    assert (commit.kind, commit.url, commit.state) == ("commit", COMMIT_URL, "pending")
    assert (commit.idempotency_key, commit.event_id) == (f"fw:{sid}:commit", event.id)
    assert commit.body is None  # assembled by the sender, with the receipt

    rig.mine_and_poll(3)
    assert [d.kind for d in rows(rig, sid=sid)] == ["commit"]  # once, however deep it gets
    assert [d.kind for d in rows(rig, sid=plain)] == ["commit"]
    # Every lifecycle event also went to the generic webhook; the Slack channel only
    # wants reorgs of severity >= warning.
    alerted = {(d.kind, d.settlement_id) for d in rows(rig, "webhook")}
    assert ("settlement_confirmed", sid) in alerted
    assert rows(rig, "slack") == []


def test_a_reverted_tx_enqueues_a_discard_and_no_commit(rig: Rig) -> None:
    tx = rig.anvil.send_revert()
    wait_included(rig.anvil, tx)
    sid = register(rig, tx)
    rig.watcher.poll()
    rig.mine_and_poll(2)
    assert rig.settlement(sid).verdict == "SETTLEMENT_FAILED"
    assert [(d.kind, d.idempotency_key) for d in rows(rig)] == [("discard", f"fw:{sid}:discard")]


def test_provisional_updates_only_for_provisional_registrations(rig: Rig) -> None:
    tx = rig.anvil.send()
    sid = register(rig, tx, provisional=True)
    other = register(rig, rig.anvil.send(1, 2))
    wait_included(rig.anvil, tx)
    rig.watcher.catch_up()
    rig.mine_and_poll(1)
    rig.mine_and_poll(1)
    assert rig.settlement(sid).verdict == "FINALITY_CONFIRMED"

    kinds = [
        (d.kind, (d.body or {}).get("stage"), (d.body or {}).get("confirmations"))
        for d in rows(rig, sid=sid)
    ]
    assert kinds[-1] == ("commit", None, None)
    updates = [d.body for d in rows(rig, sid=sid) if d.kind == "provisional"]
    assert updates and all(b is not None and b["provisional"] is True for b in updates)
    assert updates[0] is not None and updates[0]["stage"] == "included"
    assert [b["confirmations"] for b in updates if b] == list(range(1, len(updates) + 1))
    assert max(b["confirmations"] for b in updates if b) < 3  # depth N is the commit itself
    assert [d.kind for d in rows(rig, sid=other)] == ["commit"]


def test_a_reorg_alert_names_its_depth_and_the_touched_settlements(rig: Rig) -> None:
    anvil = rig.anvil
    anvil.mine(2)
    tx = anvil.send()
    wait_included(anvil, tx)
    sid = register(rig, tx, provisional=True)
    rig.watcher.catch_up()
    anvil.reorg(2)
    rig.watcher.poll()

    [alert] = [d for d in rows(rig, "webhook") if d.kind == "reorg"]
    assert alert.body is not None
    assert (alert.body["type"], alert.body["kind"]) == ("alert", "reorg")
    assert alert.body["payload"]["depth"] == 2
    assert alert.body["payload"]["touched"] == [sid]
    [slack] = rows(rig, "slack")
    assert slack.body is not None and "depth 2" in slack.body["text"]
    gone = [d.body for d in rows(rig, sid=sid) if d.body and d.body.get("stage") == "reorged_out"]
    assert len(gone) == 1 and gone[0] is not None and gone[0]["provisional"] is True


def test_a_finality_violation_cancels_an_undelivered_commit_and_a_new_confirmation_revives_it(
    anvil: Anvil, tmp_path: Path
) -> None:
    rig = make_watcher(anvil, f"sqlite:///{tmp_path}/v.db", confirmations=2)
    rig.watcher.plan = OutboxPlan([HOOK])
    try:
        rig.watcher.poll()
        anvil.mine(2)
        tx = anvil.send()
        wait_included(anvil, tx)
        raw = anvil.raw_tx(tx)
        sid = register(rig, tx)
        rig.watcher.poll()
        rig.mine_and_poll(1)
        [commit] = rows(rig, sid=sid)
        assert rig.settlement(sid).verdict == "FINALITY_CONFIRMED"

        anvil.reorg(3)  # deeper than the confirmation; the tx is erased
        rig.watcher.poll()
        [violation] = [d for d in rows(rig, "webhook") if d.kind == "finality_violation"]
        assert violation.body is not None and violation.body["severity"] == "critical"
        assert violation.body["settlement_id"] == sid
        [cancelled] = rows(rig, sid=sid)
        assert (cancelled.id, cancelled.state) == (commit.id, "cancelled")

        anvil.rpc("eth_sendRawTransaction", raw)  # back in a block, confirmed again
        wait_included(anvil, tx)
        rig.watcher.catch_up()
        rig.mine_and_poll(2)
        assert rig.settlement(sid).verdict == "FINALITY_CONFIRMED"
        [revived] = rows(rig, sid=sid)
        assert (revived.id, revived.state, revived.idempotency_key) == (
            commit.id,
            "pending",
            f"fw:{sid}:commit",
        )
        assert revived.event_id != commit.event_id  # reports the new confirmation
    finally:
        rig.store.close()


def test_rpc_unhealthy_is_raised_once_per_period(rig: Rig) -> None:
    watcher = rig.watcher
    for _ in range(5):
        watcher.note_poll("http://127.0.0.1:1: connection refused")
    watcher.note_poll(None)
    for _ in range(3):
        watcher.note_poll("timeout")
    kinds = [e.kind for e in rig.store.events() if e.kind.startswith("rpc_")]
    assert kinds == ["rpc_unhealthy", "rpc_recovered", "rpc_unhealthy"]
    first = next(e for e in rig.store.events() if e.kind == "rpc_unhealthy")
    assert first.severity == "critical" and first.payload["failed_polls"] == 3
    assert "connection refused" in first.payload["reason"]
    assert [d.kind for d in rows(rig, "webhook")] == kinds
