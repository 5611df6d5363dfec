"""A finality violation told at the commit_url: the engine in-process on a real anvil, the
real sender, a real HTTP receiver on loopback.

What a receiver must see (docs/delivery.md, "When finality is reversed"): a commit it may
have applied is followed by a ``finality_violation`` on the same channel, never preceded by
it, even when the reorg lands while the commit is still on the wire; a commit that never
went out is cancelled silently; a reversal straight to a failure brings the ``discard``.
A real receipts component signs beside the engine (as the daemon's receipts thread does):
a commit or discard never goes without its receipt, and a violation carries the signed
revocation of the receipt its commit carried.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest

from tests.integration.helpers import wait_included
from tests.integration.receipts_helpers import Receipts, receipts_for
from tests.support.anvil import Anvil
from tests.support.daemon import wait_for
from tests.support.receiver import Receiver
from tests.support.rigs import FakeClock, Rig, RigFactory
from watcher.clock import wall_clock_ms
from watcher.config.sections import DeliveryConfig
from watcher.delivery.plan import OutboxPlan
from watcher.delivery.sender import Sender
from watcher.destinations import AllowList
from watcher.settlements import Registration, new_settlement
from watcher.store.outbox_store import DeliveryRecord

LOCAL = AllowList(loopback=True)
"""The receivers here listen on loopback (a dev-chain daemon allows that by default)."""

pytestmark = pytest.mark.anvil

SECRET = "violation-secret"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver(SECRET) as r:
        yield r


@pytest.fixture
def rig(anvil: Anvil, make_rig: RigFactory) -> Rig:
    r = make_rig(anvil, confirmations=2, clock=FakeClock(wall_clock_ms()))
    r.watcher.plan = OutboxPlan()
    r.watcher.poll()
    anvil.mine(3)  # room below the reorgs
    r.watcher.catch_up()
    return r


@pytest.fixture(autouse=True)
def signing(rig: Rig) -> Iterator[Receipts]:
    """The receipts component, issuing every 50 ms in a thread of its own."""
    receipts = receipts_for(rig)
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(0.05):
            receipts.run(rig)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield receipts
    stop.set()
    thread.join(5)


@pytest.fixture
def start_sender(rig: Rig) -> Iterator[Callable[[], Sender]]:
    senders: list[Sender] = []

    def start() -> Sender:
        config = DeliveryConfig.model_validate(
            {
                "secret": SECRET,
                "backoff_initial_s": 0.05,
                "backoff_max_s": 0.1,
                "timeout_s": 5.0,
                "workers": 2,
                "receipt_wait_s": 10.0,
            }
        )
        sender = Sender(rig.store, config, wall_clock_ms, seed=1, destinations=LOCAL)
        senders.append(sender)
        sender.start()
        return sender

    yield start
    for sender in senders:
        sender.stop()


def now(rig: Rig) -> None:
    """The rig's clock to the wall's instant (forward only; seconds since the rig began).
    The sender runs on the wall clock (the receiver checks its signatures' times against
    it) and waits for a body's receipt from the verdict's instant, which the rig's clock
    gives: a verdict at the rig's default instant, years ago, was past ``receipt_wait_s`` at
    once, so a body not signed at the sender's first look was looked at again only 5 s
    later (and a violation went without waiting for its revocation)."""
    rig.clock.now = max(rig.clock.now, wall_clock_ms())


def register(rig: Rig, tx: str, receiver: Receiver) -> str:
    reg = Registration(
        rig.config, tx, commit_url=receiver.url("/commit"), dependent_state={"order": 7}
    )
    rec, _ = rig.store.register(new_settlement(reg, rig.clock()))
    return rec.settlement_id


def confirm(rig: Rig, receiver: Receiver, sender: int = 2) -> tuple[str, str]:
    """A tx confirmed at N=2 with a commit row queued: (tx hash, settlement id)."""
    tx = rig.anvil.send(sender=sender, to=3)
    wait_included(rig.anvil, tx)
    now(rig)
    sid = register(rig, tx, receiver)
    rig.watcher.catch_up()
    rig.mine_and_poll(1)
    assert rig.settlement(sid).verdict == "FINALITY_CONFIRMED"
    return tx, sid


def rows(rig: Rig, sid: str) -> list[DeliveryRecord]:
    return [d for d in rig.store.outbox().list(settlement_id=sid) if d.channel == "commit"]


def answered(receiver: Receiver) -> list[tuple[str, int]]:
    """(type, status) of every request to the commit_url, in arrival order."""
    return [(r.json["type"], r.status) for r in receiver.received("/commit")]


def replacing(anvil: Anvil, tx: str) -> dict[str, Any]:
    """A transfer with the nonce of ``tx`` (signed by anvil inside ``anvil_reorg``): once it
    is in the chain, ``tx`` can never be."""
    sent = anvil.rpc("eth_getTransactionByHash", tx)
    return {"from": sent["from"], "to": anvil.accounts[5], "value": "0x3", "nonce": sent["nonce"]}


def test_a_reorg_while_the_commit_is_on_the_wire_sends_the_violation_after_it(
    rig: Rig, receiver: Receiver, start_sender: Callable[[], Sender], signing: Receipts
) -> None:
    _, sid = confirm(rig, receiver)
    receiver.hold_next("/commit")  # the commit arrives and waits for its answer
    start_sender()
    assert receiver.held.wait(10), "the commit never arrived"
    [commit] = rows(rig, sid)
    assert commit.state == "sending"

    rig.anvil.reorg(3)  # the tx is erased: the confirmation is reversed mid-request
    rig.watcher.poll()
    signing.run(rig)  # the revocation, signed before the violation can go
    [event] = rig.events(sid, "finality_violation")
    archived, violation = rows(rig, sid)
    assert (archived.id, archived.state) == (commit.id, "sending")  # its attempt stands
    assert archived.idempotency_key == f"fw:{sid}:commit~{event.id}"
    assert (violation.kind, violation.idempotency_key, violation.event_id) == (
        "finality_violation",
        f"fw:{sid}:violation:{event.id}",
        event.id,
    )
    # Held back behind the commit in flight: no claim can take it now.
    assert rig.store.outbox().claim(wall_clock_ms(), 10, 1000) == []

    receiver.release()
    got = wait_for(lambda: answered(receiver)[1:] or None, 10, what="the violation")
    assert answered(receiver) == [("commit", 200), ("finality_violation", 200)]
    assert got[0] == ("finality_violation", 200)
    body = receiver.effects("/commit", "finality_violation")[0]
    assert body["idempotency_key"] == violation.idempotency_key
    assert body["reorg"]["depth"] == 3 and body["reorg"]["replaced_by"] is not None
    assert body["commit_block"]["number"] == body["reorg"]["commit_block"]["number"]
    assert body["dependent_state"] == {"order": 7}
    # The commit carried its signed receipt; the violation carries its signed revocation.
    assert body["revocation"]["kind"] == "receipt_revocation"
    assert body["revocation_missing"] is None
    assert wait_for(lambda: rows(rig, sid)[0].state == "delivered" or None, 5, what="recorded")


def test_a_commit_whose_attempt_failed_during_the_reorg_is_cancelled_not_resent(
    rig: Rig, receiver: Receiver, start_sender: Callable[[], Sender]
) -> None:
    _, sid = confirm(rig, receiver)
    receiver.hold_next("/commit")
    start_sender()
    assert receiver.held.wait(10), "the commit never arrived"
    rig.anvil.reorg(3)
    rig.watcher.poll()
    receiver.fail_with = 503  # the held attempt fails: the commit was never applied
    receiver.release()
    wait_for(lambda: len(answered(receiver)) >= 1 and answered(receiver)[0][1] == 503, 10)
    receiver.fail_with = None

    wait_for(lambda: receiver.effects("/commit") or None, 10, what="the violation")
    wait_for(lambda: rows(rig, sid)[0].state == "cancelled" or None, 5, what="cancelled")
    # (The violation may be claimed before the test stops the 503s: then it is retried.)
    answers = answered(receiver)
    assert answers[0] == ("commit", 503)
    assert answers[-1] == ("finality_violation", 200)
    assert {kind for kind, _ in answers[1:]} == {"finality_violation"}, "the commit was resent"
    [applied] = receiver.effects("/commit")
    assert applied["type"] == "finality_violation"
    assert "If you never applied that commit" in applied["directive"]


def test_a_reversal_before_the_commit_went_out_tells_the_receiver_nothing(
    rig: Rig, receiver: Receiver, start_sender: Callable[[], Sender]
) -> None:
    _, sid = confirm(rig, receiver)
    rig.anvil.reorg(3)  # no sender yet: the commit is still pending
    rig.watcher.poll()
    assert rig.events(sid, "finality_violation")
    [commit] = rows(rig, sid)
    assert (commit.kind, commit.state, commit.idempotency_key) == (
        "commit",
        "cancelled",
        f"fw:{sid}:commit",
    )
    # Something after it on the same receiver arrives, and nothing of ``sid`` before it.
    _, later = confirm(rig, receiver, sender=4)  # (the erased tx's nonce stays unused)
    start_sender()
    wait_for(lambda: receiver.effects("/commit") or None, 10, what="the later commit")
    assert [(b["type"], b["settlement_id"]) for b in receiver.effects("/commit")] == [
        ("commit", later)
    ]


@pytest.mark.parametrize("at", [0, 1], ids=["branch-first-block", "branch-second-block"])
def test_a_reversal_then_a_failure_sends_violation_then_discard(
    rig: Rig, receiver: Receiver, start_sender: Callable[[], Sender], at: int
) -> None:
    tx, sid = confirm(rig, receiver)
    start_sender()
    wait_for(lambda: receiver.effects("/commit") or None, 10, what="the commit")
    wait_for(lambda: rows(rig, sid)[0].state == "delivered" or None, 5, what="recorded")

    # The tx's nonce goes to another transfer in the new branch: it can never come back.
    # In the branch's first block the confirmed settlement is no longer in the watch index
    # (a terminal one is not watched): it must be found by sender and nonce all the same.
    rig.anvil.rpc("anvil_reorg", 3, [[replacing(rig.anvil, tx), at]])
    rig.watcher.poll()
    rig.mine_and_poll(1)
    assert rig.settlement(sid).verdict == "SETTLEMENT_FAILED"
    assert [d.kind for d in rows(rig, sid)] == ["commit", "finality_violation", "discard"]

    wait_for(lambda: len(receiver.effects("/commit")) >= 3 or None, 10, what="the discard")
    assert answered(receiver) == [
        ("commit", 200),
        ("finality_violation", 200),
        ("discard", 200),
    ]
    discard = receiver.effects("/commit", "discard")[0]
    assert discard["verdict"] == "SETTLEMENT_FAILED"
    assert discard["idempotency_key"] == f"fw:{sid}:discard"


def test_a_provisional_registration_gets_the_violation_too(
    rig: Rig, receiver: Receiver, start_sender: Callable[[], Sender]
) -> None:
    tx = rig.anvil.send(sender=2, to=3)
    wait_included(rig.anvil, tx)
    now(rig)
    reg = Registration(rig.config, tx, commit_url=receiver.url("/commit"))
    rec, _ = rig.store.register(replace(new_settlement(reg, rig.clock()), provisional=True))
    rig.watcher.catch_up()
    rig.mine_and_poll(1)
    start_sender()
    wait_for(lambda: receiver.effects("/commit", "commit") or None, 10, what="the commit")
    wait_for(
        lambda: rows(rig, rec.settlement_id)[-1].state == "delivered" or None, 5, what="recorded"
    )
    rig.anvil.reorg(3)
    rig.watcher.poll()
    wait_for(
        lambda: receiver.effects("/commit", "finality_violation") or None, 10, what="violation"
    )
    kinds = [b["type"] for b in receiver.effects("/commit")]
    assert kinds[-2:] == ["commit", "finality_violation"]
    assert kinds[:-2] and set(kinds[:-2]) == {"provisional"}  # inclusion came first
