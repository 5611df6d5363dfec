"""The sender against a real HTTP receiver on loopback: retries, dead letters, signatures,
receipts. The outbox rows are written the way the engine writes them (an event and its
commit in one store transaction); the chain itself is exercised in test_delivery_engine.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.helpers import random_tx_hash, sign_decision, store_receipt
from tests.support.daemon import wait_for
from tests.support.receiver import Receiver, verify_signature
from watcher.clock import wall_clock_ms
from watcher.config.chains import ChainConfig
from watcher.config.sections import DeliveryConfig
from watcher.delivery.plan import OutboxPlan
from watcher.delivery.sender import IDLE_S, Sender, backoff_ms
from watcher.destinations import AllowList
from watcher.settlements import Registration, register
from watcher.store import Store
from watcher.store.outbox_store import DeliveryRecord

LOCAL = AllowList(loopback=True)
"""The receivers here listen on loopback (a dev-chain daemon allows that by default)."""

CHAIN = ChainConfig.model_validate(
    {"name": "local", "chain_id": 31337, "rpc": ["http://127.0.0.1:1"], "confirmations": 3}
)
SECRET = "test-secret-1"
STATE = {"order": 17, "ship": ["book", "pen"], "amount_wei": "1000000000000000000"}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    st = Store.open(f"sqlite:///{tmp_path}/finality.db")
    yield st
    st.close()


@pytest.fixture
def start_sender(store: Store) -> Iterator[Callable[..., Sender]]:
    senders: list[Sender] = []

    def start(idle_s: float = IDLE_S, **config: Any) -> Sender:
        values: dict[str, Any] = {
            "secret": SECRET,
            "max_attempts": 4,
            "backoff_initial_s": 0.05,
            "backoff_max_s": 0.2,
            "timeout_s": 2.0,
            "workers": 2,
            "receipt_wait_s": 0.0,
        }
        values.update(config)
        settings = DeliveryConfig.model_validate(values)
        sender = Sender(store, settings, seed=1, destinations=LOCAL, idle_s=idle_s)
        senders.append(sender)
        sender.start()
        return sender

    yield start
    for sender in senders:
        sender.stop()


def confirm(
    store: Store, url: str, verdict: str = "FINALITY_CONFIRMED", signed: bool = True, **kw: Any
) -> str:
    """A settlement with dependent state, made terminal as the engine does it: the
    lifecycle event and the outbox row in one transaction, then (``signed``) the decision's
    receipt as the receipts component stores it. Returns the settlement id."""
    rec, _ = register(
        store,
        Registration(CHAIN, random_tx_hash(), dependent_state=STATE, commit_url=url, **kw),
        wall_clock_ms(),
    )
    decision = {"verdict": verdict, "directive": "COMMIT: final", "digest": "sha256:00"}
    with store.block_txn("local", wall_clock_ms()) as txn:
        event_id = txn.record_event("settlement_confirmed", "info", decision, rec.settlement_id)
        OutboxPlan().on_verdict(txn, rec, verdict, event_id)
    if signed:
        sign_decision(store, rec.settlement_id, verdict, "sha256:00")
    return rec.settlement_id


def delivery_of(store: Store, sid: str) -> DeliveryRecord:
    [row] = store.outbox().list(settlement_id=sid)
    return row


def wait_state(store: Store, sid: str, state: str, timeout: float = 10) -> DeliveryRecord:
    def reached() -> DeliveryRecord | None:
        row = delivery_of(store, sid)
        return row if row.state == state else None

    return wait_for(reached, timeout, what=f"delivery of {sid} {state}")


def test_receiver_down_then_failing_then_back_applies_the_commit_once(
    store: Store, start_sender: Callable[..., Sender]
) -> None:
    receiver = Receiver(SECRET, start=False)
    try:
        sid = confirm(store, receiver.url("/commit"))
        start_sender(max_attempts=50)
        wait_for(lambda: delivery_of(store, sid).attempts >= 3, 10, what="retries while down")
        pending = delivery_of(store, sid)
        assert pending.state in ("pending", "sending") and "ConnectError" in str(pending.last_error)

        receiver.fail_with = 503  # up, but failing: requests arrive and are not applied
        receiver.start()
        wait_for(lambda: len(receiver.received()) >= 2, 10, what="failing attempts")
        receiver.fail_with = None
        done = wait_state(store, sid, "delivered")
    finally:
        receiver.stop()

    [commit] = receiver.effects("/commit")
    assert commit["type"] == "commit" and commit["provisional"] is False
    assert (commit["settlement_id"], commit["dependent_state"]) == (sid, STATE)
    assert commit["verdict"] == "FINALITY_CONFIRMED"
    attempts = receiver.received("/commit")
    assert len(attempts) >= 3
    assert {r.key for r in attempts} == {f"fw:{sid}:commit"} == {done.idempotency_key}
    assert len({r.body for r in attempts}) == 1  # every retry sent the very same bytes
    assert all(verify_signature(SECRET, r.headers, r.body) for r in attempts)
    assert done.attempts == int(attempts[-1].headers["x-finality-attempt"])


def test_dead_after_max_attempts_then_replay_delivers(
    store: Store, start_sender: Callable[..., Sender]
) -> None:
    with Receiver(SECRET) as receiver:
        receiver.fail_with = 500
        sid = confirm(store, receiver.url("/commit"))
        sender = start_sender(max_attempts=3)
        dead = wait_state(store, sid, "dead")
        assert (dead.attempts, dead.last_status) == (3, 500)
        assert "HTTP 500" in str(dead.last_error)
        assert [d.id for d in store.outbox().list(state="dead")] == [dead.id]
        assert receiver.effects() == []

        receiver.fail_with = None
        store.outbox().replay(dead.id, wall_clock_ms())
        sender.wake.set()
        wait_state(store, sid, "delivered")
        assert len(receiver.effects("/commit", "commit")) == 1
        assert {r.key for r in receiver.received()} == {dead.idempotency_key}
        assert sender.outcomes[("commit", "dead")] == 1
        assert sender.outcomes[("commit", "delivered")] == 1


def test_a_replay_is_sent_when_the_next_poll_wakes_the_dispatcher_not_at_its_tick(
    store: Store, start_sender: Callable[..., Sender]
) -> None:
    """A replay through the store (the CLI's or another process's API) moves the outbox's
    commit count; the daemon's next poll (``after_poll``) sees it and wakes the dispatcher.
    The dispatcher's idle tick is an hour here: only that wake-up can deliver the row."""
    with Receiver(SECRET) as receiver:
        receiver.fail_with = 500
        sid = confirm(store, receiver.url("/commit"))
        sender = start_sender(max_attempts=1, idle_s=3600.0)
        dead = wait_state(store, sid, "dead")
        wait_for(  # the worker's wake-up after its attempt consumed too: nothing wakes it now
            lambda: (
                sender.outcomes[("commit", "dead")] == 1
                and sender.seen_changes == sender.outbox.changes
                and not sender.wake.is_set()
            ),
            10,
            what="the dispatcher idle after burying the row",
        )
        sender.after_poll("local")
        assert not sender.wake.is_set()  # a poll that changed nothing wakes nothing

        receiver.fail_with = None
        before = sender.outbox.changes
        store.outbox().replay(dead.id, wall_clock_ms())
        assert sender.outbox.changes == before + 1
        sender.after_poll("local")
        wait_state(store, sid, "delivered")
        assert len(receiver.effects("/commit", "commit")) == 1
        assert sender.outcomes[("commit", "delivered")] == 1


def test_a_receiver_with_another_secret_refuses_every_attempt(
    store: Store, start_sender: Callable[..., Sender]
) -> None:
    with Receiver("not-the-daemon-secret") as receiver:
        sid = confirm(store, receiver.url("/commit"))
        start_sender(max_attempts=2)
        dead = wait_state(store, sid, "dead")
        assert dead.last_status == 401
        assert receiver.effects() == []  # nothing applied on a bad signature

        # The documented recipe, checked on a real request: right secret passes; a wrong
        # secret, a changed body or a stale timestamp fail.
        request = receiver.received()[0]
        assert verify_signature(SECRET, request.headers, request.body)
        assert not verify_signature("wrong", request.headers, request.body)
        assert not verify_signature(SECRET, request.headers, request.body.replace(b"17", b"18"))
        assert not verify_signature(SECRET, request.headers, request.body, now=time.time() + 3600)
        unsigned = {k: v for k, v in request.headers.items() if k != "x-finality-signature"}
        assert not verify_signature(SECRET, unsigned, request.body)


def test_without_a_secret_requests_are_unsigned_and_the_daemon_says_so(
    store: Store, start_sender: Callable[..., Sender], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "finality.delivery")
    with Receiver(None) as receiver:
        sid = confirm(store, receiver.url("/commit"))
        start_sender(secret=None)
        wait_state(store, sid, "delivered")
        [request] = receiver.received()
        assert "x-finality-signature" not in request.headers
        assert "webhook-signature" not in request.headers
        assert request.headers["webhook-id"] == request.headers["idempotency-key"]
        assert request.headers["idempotency-key"] == f"fw:{sid}:commit"
    assert any("WITHOUT signature headers" in r.getMessage() for r in caplog.records)


def test_a_commit_waits_for_its_receipt_and_carries_it(
    store: Store, start_sender: Callable[..., Sender]
) -> None:
    with Receiver(SECRET) as receiver:
        sid = confirm(store, receiver.url("/commit"), signed=False)
        start_sender(receipt_wait_s=30.0)
        time.sleep(0.6)
        assert receiver.received() == []  # waiting for the signed receipt, not sending
        assert delivery_of(store, sid).body is None
        mine = {"final": True, "decision_digest": "sha256:00"}
        store_receipt(store, sid, "dependent_state_binding_receipt", {"binds": "state"})
        store_receipt(store, sid, "settlement_finality_receipt", mine)
        # Newer, but made for another decision (say, before a reorg reversed it): not sent.
        store_receipt(store, sid, "settlement_finality_receipt", {"decision_digest": "sha256:1"})
        done = wait_state(store, sid, "delivered")
    [commit] = receiver.effects()
    assert commit["receipt"]["kind"] == "settlement_finality_receipt"
    assert commit["receipt"]["receipt"] == mine
    assert commit["binding"]["receipt"] == {"binds": "state"}
    assert "receipt_missing" not in commit
    assert done.body == commit  # stored once assembled: retries would resend these bytes


def test_a_discard_never_goes_without_its_receipt_even_past_the_wait(
    store: Store, start_sender: Callable[..., Sender]
) -> None:
    with Receiver(SECRET) as receiver:
        sid = confirm(store, receiver.url("/discard"), verdict="SETTLEMENT_FAILED", signed=False)
        start_sender(receipt_wait_s=0.2)
        wait_for(
            lambda: delivery_of(store, sid).created_at + 1000 < wall_clock_ms(),
            10,
            what="well past receipt_wait_s",
        )
        assert receiver.received() == []  # past the wait, still not sent without it
        assert delivery_of(store, sid).state in ("pending", "sending")
        failure = {"failed": True, "decision_digest": "sha256:00"}
        store_receipt(store, sid, "settlement_failure_receipt", failure)
        wait_state(store, sid, "delivered")
    [discard] = receiver.effects()
    assert discard["type"] == "discard" and discard["verdict"] == "SETTLEMENT_FAILED"
    assert discard["receipt"]["receipt"] == failure


def test_backoff_doubles_with_jitter_up_to_the_cap() -> None:
    import random

    rng = random.Random(7)
    for attempt in range(1, 12):
        base = min(300.0, 1.0 * 2 ** (attempt - 1))
        delays = [backoff_ms(attempt, 1.0, 300.0, rng) for _ in range(50)]
        assert all(base * 500 <= d <= base * 1000 for d in delays)
        assert len(set(delays)) > 1  # jittered
