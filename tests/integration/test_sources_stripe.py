"""Stripe PaymentIntents end to end, against a local server that speaks Stripe's API.

Polling goes through the official ``stripe`` library (``api_base`` = the local server) and
the sources component into a real SQLite store: success, failure, settlement of the funds,
the finality window, and a refund after finality (a finality violation). Webhooks are real
HTTP requests to the API under uvicorn, signed the way Stripe signs them: good, tampered,
stale and wrongly keyed. The last test follows one payment from registration to the commit
a receiver applies.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from guard.source import SourceUnavailable
from tests.support.daemon import wait_for
from tests.support.receiver import Receiver
from tests.support.rigs import FakeClock
from tests.support.sources_app import LiveApp, source_config_file
from tests.support.stripe_server import StripeServer, signature_header, signed
from watcher.config.sources import SourceConfig
from watcher.delivery.plan import OutboxPlan
from watcher.sources.poller import SourcePoller, sources_of
from watcher.sources.settlements import new_source_settlement
from watcher.store import Store

KEY = "sk_test_fw_local"
SECRET = "whsec_fw_local"


class Rig:
    """Stripe server, store and sources component sharing one controllable clock."""

    def __init__(self, tmp: Path, **settings: Any) -> None:
        self.clock = FakeClock(int(time.time() * 1000))
        self.stripe = StripeServer(KEY, clock=lambda: self.clock() / 1000)
        self.config = SourceConfig.model_validate(
            {
                "name": "stripe",
                "kind": "stripe_payment_intent",
                "api_key": KEY,
                "api_base": self.stripe.url,
                "timeout_s": 600,
                **settings,
            }
        )
        self.store = Store.open(f"sqlite:///{tmp}/finality.db")
        self.poller = SourcePoller(self.store, [self.config], OutboxPlan(), self.clock)

    def register(self, pi: str) -> str:
        new = new_source_settlement(
            self.config,
            pi,
            self.clock(),
            dependent_state={"order": pi},
            commit_url="http://127.0.0.1:9/c",
        )
        rec, _ = self.store.register(new)
        return rec.settlement_id

    def poll(self, seconds: float = 1.0) -> None:
        self.clock.advance(seconds)
        self.poller.poll("stripe")

    def verdict(self, sid: str) -> str:
        return self.store.settlement(sid).verdict

    def evidence(self, sid: str) -> dict[str, Any]:
        evidence: dict[str, Any] = self.store.settlement(sid).decision["evidence"]
        return evidence

    def events(self, sid: str) -> list[str]:
        return [e.kind for e in self.store.events(settlement_id=sid)]

    def close(self) -> None:
        self.poller.stop()
        self.store.close()
        self.stripe.close()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    yield r
    r.close()


def test_polling_success_then_settlement_then_refund(rig: Rig) -> None:
    pi = rig.stripe.create_payment_intent(amount=4200)
    sid = rig.register(pi)
    rig.poll()
    assert rig.verdict(sid) == "AWAITING_FINALITY"
    assert rig.evidence(sid)["kind"] == "payment_requires_payment_method"

    rig.stripe.confirm(pi)  # succeeded: accepted, not final (the funds are pending)
    rig.poll()
    assert rig.verdict(sid) == "AWAITING_FINALITY"
    facts = rig.evidence(sid)["facts"]
    assert (rig.evidence(sid)["kind"], facts["balance_status"]) == ("payment_succeeded", "pending")

    rig.stripe.settle(pi)  # the balance transaction is available: final
    rig.poll()
    assert rig.verdict(sid) == "FINALITY_CONFIRMED"
    evidence = rig.evidence(sid)
    charge = rig.stripe.objects[pi]["latest_charge"]
    bt = rig.stripe.objects[charge]["balance_transaction"]
    assert evidence["kind"] == "funds_available"
    assert set(evidence["facts"]["objects"]) == {pi, charge, bt}
    assert rig.events(sid) == ["settlement_confirmed"]
    kinds = [d.kind for d in rig.store.outbox().list(settlement_id=sid)]
    assert kinds == ["commit"]

    rig.stripe.refund(pi, amount=1000)  # after finality: a reversal
    rig.poll()
    assert rig.verdict(sid) == "SETTLEMENT_FAILED"
    assert rig.evidence(sid)["kind"] == "refunded"
    assert rig.events(sid) == ["settlement_confirmed", "finality_violation"]
    violation = rig.store.events(settlement_id=sid)[-1]
    assert violation.severity == "critical" and violation.payload["ref"] == pi
    [commit, discard] = rig.store.outbox().list(settlement_id=sid)
    assert commit.state == "cancelled"  # it had not gone out: it never will
    assert (discard.kind, discard.state) == ("discard", "pending")  # the failure is told


def test_polling_a_declined_card_is_a_failure(rig: Rig) -> None:
    pi = rig.stripe.create_payment_intent()
    sid = rig.register(pi)
    rig.stripe.confirm(pi, outcome="declined")
    rig.poll()
    assert rig.verdict(sid) == "SETTLEMENT_FAILED"
    assert rig.evidence(sid)["kind"] == "charge_failed"
    assert rig.evidence(sid)["facts"]["payment_error"] == "card_declined"
    assert [d.kind for d in rig.store.outbox().list(settlement_id=sid)] == ["discard"]


def test_polling_processing_capture_and_cancel(rig: Rig) -> None:
    held, canceled = rig.stripe.create_payment_intent(), rig.stripe.create_payment_intent()
    held_id, canceled_id = rig.register(held), rig.register(canceled)
    rig.stripe.confirm(held, outcome="requires_capture")
    rig.stripe.confirm(canceled, outcome="processing")
    rig.poll()
    assert rig.evidence(held_id)["kind"] == "payment_requires_capture"
    assert rig.evidence(canceled_id)["kind"] == "payment_processing"
    rig.stripe.capture(held)
    rig.stripe.cancel(canceled)
    rig.poll()
    assert rig.evidence(held_id)["kind"] == "payment_succeeded"
    assert rig.verdict(canceled_id) == "SETTLEMENT_FAILED"
    assert rig.evidence(canceled_id)["kind"] == "payment_canceled"


def test_the_finality_window_confirms_a_payment_nobody_took_back(tmp_path: Path) -> None:
    rig = Rig(tmp_path, finality_window_s=3600, timeout_s=7200)
    try:
        pi = rig.stripe.create_payment_intent()
        sid = rig.register(pi)
        rig.stripe.confirm(pi)
        rig.poll()
        rig.poll(3598)
        assert rig.verdict(sid) == "AWAITING_FINALITY"
        rig.poll(2)
        assert rig.verdict(sid) == "FINALITY_CONFIRMED"
        assert rig.evidence(sid)["kind"] == "finality_window"
        rig.stripe.dispute(pi)  # a dispute later is still a reversal
        rig.poll()
        assert rig.events(sid) == ["settlement_confirmed", "finality_violation"]
        assert rig.evidence(sid)["kind"] == "disputed"
    finally:
        rig.close()


def test_a_refund_before_finality_is_a_failure_not_a_violation(rig: Rig) -> None:
    pi = rig.stripe.create_payment_intent()
    sid = rig.register(pi)
    rig.stripe.confirm(pi)
    rig.poll()
    rig.stripe.refund(pi)
    rig.poll()
    assert rig.verdict(sid) == "SETTLEMENT_FAILED"
    assert rig.events(sid) == ["settlement_failed"]


def test_an_outage_stores_nothing_and_is_retried(rig: Rig) -> None:
    pi = rig.stripe.create_payment_intent()
    sid = rig.register(pi)
    rig.stripe.confirm(pi)
    rig.stripe.settle(pi)
    rig.stripe.fail_with = 503
    before = rig.store.settlement(sid)
    with pytest.raises(SourceUnavailable, match="HTTP 503"):
        rig.poll()
    assert rig.store.settlement(sid) == before
    rig.poller.poll_job("stripe")
    assert not rig.poller.healthy("stripe")
    rig.stripe.fail_with = None
    rig.clock.advance(1)
    rig.poller.poll_job("stripe")
    assert rig.verdict(sid) == "FINALITY_CONFIRMED" and rig.poller.healthy("stripe")


# -- webhooks over real HTTP -------------------------------------------------------------------


class Hooked:
    """The API on loopback with a webhook-only Stripe source (no API key: it learns only
    from events), a Stripe-shaped server that makes the events, and one clock for both
    (the service's, and the ``created`` of the events): it moves only when a test says so,
    so the 1 s finality window cannot pass while a slow machine is still delivering the
    events. Webhook signatures keep the real time (their tolerance is checked by stripe)."""

    def __init__(self, app: LiveApp, stripe: StripeServer, clock: FakeClock) -> None:
        self.app = app
        self.stripe = stripe
        self.clock = clock


@pytest.fixture
def hooked(tmp_path: Path) -> Iterator[Hooked]:
    """See :class:`Hooked`."""
    config = source_config_file(
        tmp_path,
        [
            {
                "name": "stripe",
                "kind": "stripe_payment_intent",
                "webhook_secret": SECRET,
                "finality_window_s": 1,
                "timeout_s": 600,
            }
        ],
    )
    clock = FakeClock(int(time.time() * 1000))

    def seconds() -> float:  # the ``created`` of the server's objects and events
        return clock() / 1000

    with StripeServer(KEY, clock=seconds) as stripe, LiveApp(config, clock=clock) as app:
        yield Hooked(app, stripe, clock)


def deliver(app: LiveApp, event: dict[str, Any], secret: str = SECRET, **kw: Any) -> httpx.Response:
    body, headers = signed(event, secret, **kw)
    return app.http.post("/v1/webhooks/stripe", content=body, headers=headers)


def test_signed_webhooks_drive_a_payment_to_finality_and_its_refund_to_a_violation(
    hooked: Hooked,
) -> None:
    app, stripe = hooked.app, hooked.stripe
    pi = stripe.create_payment_intent()
    sid = app.register(kind="stripe_payment_intent", ref=pi)["settlement_id"]
    stripe.confirm(pi)
    for event in stripe.events_of(pi):
        answer = deliver(app, event)
        assert answer.status_code == 200, answer.text
        assert answer.json()["matched"] and answer.json()["settlement_id"] == sid
    view = app.settlement(sid)
    assert (view["verdict"], view["evidence"]["kind"]) == ("AWAITING_FINALITY", "payment_succeeded")
    assert view["evidence"]["facts"]["event_ids"] == [e["id"] for e in stripe.events_of(pi)]

    hooked.clock.advance(1.05)  # the finality window (1 s) passes without a refund or dispute
    poller = sources_of(app.service)
    assert poller is not None
    poller.poll("stripe")  # webhook-only: no request, the window is judged from the evidence
    assert app.settlement(sid)["verdict"] == "FINALITY_CONFIRMED"

    stripe.refund(pi)
    for event in stripe.events_of(pi)[-2:]:  # refund.created, charge.refunded
        assert deliver(app, event).json()["verdict"] == "SETTLEMENT_FAILED"
    assert app.events(sid) == ["settlement_confirmed", "finality_violation"]
    again = deliver(app, stripe.events_of(pi)[-1])  # Stripe redelivers: nothing new
    assert again.status_code == 200
    assert app.events(sid) == ["settlement_confirmed", "finality_violation"]


@pytest.mark.parametrize("case", ["tampered", "stale", "wrong_secret", "missing"])
def test_a_webhook_that_does_not_verify_gets_400_and_stores_nothing(
    hooked: Hooked, case: str
) -> None:
    app, stripe = hooked.app, hooked.stripe
    pi = stripe.create_payment_intent()
    sid = app.register(kind="stripe_payment_intent", ref=pi)["settlement_id"]
    stripe.confirm(pi, outcome="declined")
    event = stripe.events_of(pi)[-1]  # payment_intent.payment_failed: would fail it
    body, headers = signed(event, SECRET)
    if case == "tampered":
        body = body.replace(b"card_declined", b"card_approved")
    elif case == "stale":
        headers["Stripe-Signature"] = signature_header(body, SECRET, int(time.time()) - 301)
    elif case == "wrong_secret":
        headers["Stripe-Signature"] = signature_header(body, "whsec_someone_else")
    else:
        del headers["Stripe-Signature"]
    before = app.service.store.settlement(sid)
    answer = app.http.post("/v1/webhooks/stripe", content=body, headers=headers)
    assert answer.status_code == 400
    assert answer.json()["error"].startswith("Stripe-Signature:")
    assert app.service.store.settlement(sid) == before
    assert app.events(sid) == []
    assert deliver(app, event).json()["verdict"] == "SETTLEMENT_FAILED"  # the genuine one


def test_webhooks_about_unknown_payments_are_acknowledged(
    hooked: Hooked,
) -> None:
    app, stripe = hooked.app, hooked.stripe
    pi = stripe.create_payment_intent()
    answer = deliver(app, stripe.events_of(pi)[0])
    assert answer.status_code == 200
    assert answer.json() == {
        "received": True,
        "event": stripe.events_of(pi)[0]["id"],
        "matched": False,
        "reason": f"no settlement registered for {pi}",
    }
    stripe.confirm(pi)
    stripe.settle(pi)
    balance = stripe.events[-1]
    assert balance["type"] == "balance.available"
    assert deliver(app, balance).json()["matched"] is False
    json_only = {"Content-Type": "application/json"}  # anything else is 415
    other = app.http.post("/v1/webhooks/stripe/other", content=b"{}", headers=json_only)
    assert other.status_code == 404


def test_registration_is_validated_field_by_field(hooked: Hooked) -> None:
    from watcher.api.deps import deps_of
    from watcher.api.source_settlements import register_source_settlement

    app = hooked.app
    service = deps_of(app.service)  # what the routes are given
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"kind": "stripe_payment_intent", "ref": "pi_" + "a" * 64}, 422, "ref"),
        ({"kind": "stripe_payment_intent", "ref": "ch_123"}, 422, "ref"),
        ({"kind": "stripe_payment_intent"}, 422, "ref"),
        ({"kind": "rq_job", "ref": "j1"}, 422, "kind"),
        ({"kind": "evm_tx", "ref": "0x12"}, 422, "kind"),
        ({"kind": "stripe_payment_intent", "ref": "pi_1", "source": "nope"}, 422, "source"),
        ({"kind": "stripe_payment_intent", "ref": "pi_1", "timeout_s": 0}, 422, "timeout_s"),
        ({"kind": "stripe_payment_intent", "ref": "pi_1", "timeout_s": True}, 422, "timeout_s"),
        (
            {"kind": "stripe_payment_intent", "ref": "pi_1", "commit_url": "ftp://x"},
            422,
            "commit_url",
        ),
        (
            {"kind": "stripe_payment_intent", "ref": "pi_1", "dependent_state": [1]},
            422,
            "dependent_state",
        ),
        (
            {"kind": "stripe_payment_intent", "ref": "pi_1", "dependent_state": {"x": 0.5}},
            422,
            "dependent_state",
        ),
        (
            {"kind": "stripe_payment_intent", "ref": "pi_1", "dependent_state": {"x": "y" * 70000}},
            413,
            "dependent_state",
        ),
        (
            {"kind": "stripe_payment_intent", "ref": "pi_1", "confirmations": 3},
            422,
            "confirmations",
        ),
    ]
    for body, status, field in cases:
        answer, code = register_source_settlement(service, body)
        assert (code, answer["fields"]) == (status, [field]), (body, answer)
        assert answer["error"].startswith(field), answer
    assert service.store.verdict_counts() == {}  # nothing stored by any of them
    first, code = register_source_settlement(
        service, {"kind": "stripe_payment_intent", "ref": "pi_1"}
    )
    again, code2 = register_source_settlement(
        service, {"kind": "stripe_payment_intent", "ref": "pi_1"}
    )
    assert (code, code2) == (201, 200) and first["settlement_id"] == again["settlement_id"]
    assert (first["kind"], first["source"], first["ref"], first["chain"]) == (
        "stripe_payment_intent",
        "stripe",
        "pi_1",
        "stripe",
    )


# -- one payment, registration to commit --------------------------------------------------------


def test_a_payment_commits_its_dependent_state_once_final(tmp_path: Path) -> None:
    with StripeServer(KEY) as stripe, Receiver() as receiver:
        config = source_config_file(
            tmp_path,
            [
                {
                    "name": "stripe",
                    "kind": "stripe_payment_intent",
                    "api_key": KEY,
                    "api_base": stripe.url,
                    "poll_interval_s": 0.2,
                }
            ],
            delivery={"receipt_wait_s": 0, "backoff_initial_s": 0.2},
        )
        with LiveApp(config, start_components=True) as app:
            paid, declined = stripe.create_payment_intent(), stripe.create_payment_intent()
            state = {"ship": "order-7", "qty": 2}
            sid = app.register(
                kind="stripe_payment_intent",
                ref=paid,
                dependent_state=state,
                commit_url=receiver.url("/commit"),
            )["settlement_id"]
            other = app.register(
                kind="stripe_payment_intent",
                ref=declined,
                dependent_state={"ship": "order-8"},
                commit_url=receiver.url("/commit"),
            )["settlement_id"]
            stripe.confirm(paid)
            stripe.confirm(declined, outcome="declined")
            app.wait_verdict(sid, "AWAITING_FINALITY")
            app.wait_verdict(other, "SETTLEMENT_FAILED")
            time.sleep(0.5)
            assert receiver.effects(type_="commit") == []  # succeeded is not final: no commit
            stripe.settle(paid)
            app.wait_verdict(sid, "FINALITY_CONFIRMED")
            commit = wait_for(lambda: receiver.effects(type_="commit"), 10, what="the commit")
            discard = wait_for(lambda: receiver.effects(type_="discard"), 10, what="the discard")
            assert len(commit) == 1 and len(discard) == 1
            assert commit[0]["settlement_id"] == sid and commit[0]["dependent_state"] == state
            assert commit[0]["verdict"] == "FINALITY_CONFIRMED"
            assert commit[0]["decision"]["evidence"]["facts"]["payment_intent"] == paid
            assert discard[0]["settlement_id"] == other
            assert discard[0]["dependent_state"] == {"ship": "order-8"}
