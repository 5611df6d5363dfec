"""Stripe's lifecycle mapped to the source vocabulary, without a network: objects in the
shapes Stripe documents, merged as polls and as webhooks (in any order), and the webhook
signature checked the way Stripe signs."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from guard.source import Snapshot, SourceStatus, same_evidence
from guard.types import UnixMillis
from tests.support.stripe_server import signature_header, signed
from watcher.config.sources import SourceConfig
from watcher.sources.stripe_source import StripeSource
from watcher.sources.stripe_state import PaymentState, classify
from watcher.sources.stripe_webhooks import WebhookRejected, payment_intent_of, verify_webhook

PI = "pi_3TestIntent"
CH = "ch_3TestCharge"
BT = "txn_3TestBalance"
T = 1_700_000_000  # seconds, as Stripe writes them
NOW = UnixMillis(T * 1000 + 5_000)
SECRET = "whsec_test_secret"


def intent(status: str, charge: Any = None, error: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": PI,
        "object": "payment_intent",
        "amount": 2000,
        "currency": "usd",
        "created": T,
        "status": status,
        "latest_charge": charge,
        "last_payment_error": error,
    }


def charge(status: str = "succeeded", bt: Any = BT, **extra: Any) -> dict[str, Any]:
    return {
        "id": CH,
        "object": "charge",
        "amount": 2000,
        "amount_refunded": 0,
        "balance_transaction": bt,
        "created": T + 1,
        "currency": "usd",
        "disputed": False,
        "failure_code": None if status != "failed" else "card_declined",
        "payment_intent": PI,
        "refunded": False,
        "status": status,
        **extra,
    }


def balance(status: str = "pending") -> dict[str, Any]:
    return {
        "id": BT,
        "object": "balance_transaction",
        "amount": 2000,
        "available_on": T + 172800,
        "exchange_rate": None,
        "fee": 88,
        "net": 1912,
        "source": CH,
        "status": status,
    }


def event(kind: str, obj: dict[str, Any], created: int, eid: str | None = None) -> dict[str, Any]:
    return {
        "id": eid or f"evt_{kind}_{created}",
        "object": "event",
        "created": created,
        "type": kind,
        "data": {"object": obj},
    }


def source(window_s: float | None = None) -> StripeSource:
    settings: dict[str, Any] = {
        "name": "stripe",
        "kind": "stripe_payment_intent",
        "webhook_secret": SECRET,
    }
    if window_s is not None:
        settings["finality_window_s"] = window_s
    return StripeSource(SourceConfig.model_validate(settings))


def polled(
    pi: dict[str, Any], refunds: list[Any] | None = None, disputes: list[Any] | None = None
) -> Snapshot:
    objects = {"payment_intent": pi, "refunds": refunds or [], "disputes": disputes or []}
    return Snapshot(PI, NOW, objects)


def pushed(evt: dict[str, Any]) -> Snapshot:
    return Snapshot(PI, NOW, {"event": evt}, (evt["id"],))


@pytest.mark.parametrize(
    ("pi", "status", "kind"),
    [
        (
            intent("requires_payment_method"),
            SourceStatus.INITIATED,
            "payment_requires_payment_method",
        ),
        (intent("requires_confirmation"), SourceStatus.INITIATED, "payment_requires_confirmation"),
        (intent("processing"), SourceStatus.INITIATED, "payment_processing"),
        (
            intent("requires_capture", charge(bt=None)),
            SourceStatus.INITIATED,
            "payment_requires_capture",
        ),
        (intent("succeeded", charge(bt=balance())), SourceStatus.ACCEPTED, "payment_succeeded"),
        (
            intent("succeeded", charge(bt=balance("available"))),
            SourceStatus.FINAL,
            "funds_available",
        ),
        (
            intent("requires_payment_method", charge("failed", bt=None), {"code": "card_declined"}),
            SourceStatus.FAILED,
            "charge_failed",
        ),
        (
            intent("requires_payment_method", None, {"code": "card_declined"}),
            SourceStatus.FAILED,
            "payment_failed",
        ),
        (intent("canceled"), SourceStatus.FAILED, "payment_canceled"),
        (
            intent("succeeded", charge(bt=balance("available"), amount_refunded=500)),
            SourceStatus.REVERSED,
            "refunded",
        ),
        (
            intent("succeeded", charge(bt=balance("available"), disputed=True)),
            SourceStatus.REVERSED,
            "disputed",
        ),
    ],
)
def test_polled_payment_intents_map_to_the_vocabulary(
    pi: dict[str, Any], status: SourceStatus, kind: str
) -> None:
    obs = source().observe(PI, polled(pi), None, NOW)
    assert (obs.status, obs.evidence.kind if obs.evidence else None) == (status, kind)


def test_the_evidence_digests_every_object_the_verdict_rests_on() -> None:
    obs = source().observe(
        PI, polled(intent("succeeded", charge(bt=balance("available")))), None, NOW
    )
    assert obs.evidence is not None
    facts = dict(obs.evidence.facts)
    objects = facts["objects"]
    assert isinstance(objects, dict) and set(objects) == {PI, CH, BT}
    assert all(str(d).startswith("sha256:") for d in objects.values())
    assert str(facts["objects_digest"]).startswith("sha256:")
    assert (facts["charge"], facts["balance_transaction"], facts["balance_status"]) == (
        CH,
        BT,
        "available",
    )
    other = source().observe(
        PI, polled(intent("succeeded", charge(bt=balance("available"), amount=1999))), None, NOW
    )
    assert other.evidence is not None
    assert dict(other.evidence.facts)["objects_digest"] != facts["objects_digest"]


def test_refunds_and_disputes_count_only_while_they_take_money() -> None:
    base = intent("succeeded", charge(bt=balance("available")))
    failed_refund = {"id": "re_1", "object": "refund", "payment_intent": PI, "status": "failed"}
    assert (
        source().observe(PI, polled(base, [failed_refund]), None, NOW).status is SourceStatus.FINAL
    )
    pending_refund = {**failed_refund, "status": "pending"}
    assert (
        source().observe(PI, polled(base, [pending_refund]), None, NOW).status
        is SourceStatus.REVERSED
    )
    dispute = {"id": "dp_1", "object": "dispute", "payment_intent": PI, "status": "needs_response"}
    obs = source().observe(PI, polled(base, [], [dispute]), None, NOW)
    assert obs.status is SourceStatus.REVERSED and obs.evidence is not None
    assert dict(obs.evidence.facts)["disputes"] == {"dp_1": "needs_response"}


def test_the_finality_window_runs_from_success_and_needs_no_new_snapshot() -> None:
    src = source(window_s=60)
    accepted = src.observe(PI, polled(intent("succeeded", charge(bt=balance()))), None, NOW)
    assert accepted.status is SourceStatus.ACCEPTED and accepted.evidence is not None
    succeeded_at = dict(accepted.evidence.facts)["succeeded_at"]
    assert succeeded_at == (T + 1) * 1000  # the charge's creation
    just_before = src.observe(PI, None, accepted.evidence, UnixMillis((T + 61) * 1000 - 1))
    at = src.observe(PI, None, accepted.evidence, UnixMillis((T + 61) * 1000))
    assert just_before.status is SourceStatus.ACCEPTED
    assert (at.status, at.evidence.kind if at.evidence else None) == (
        SourceStatus.FINAL,
        "finality_window",
    )


def test_without_a_window_only_settled_funds_are_final() -> None:
    accepted = source().observe(PI, polled(intent("succeeded", charge(bt=balance()))), None, NOW)
    much_later = source().observe(PI, None, accepted.evidence, UnixMillis(NOW + 10**9))
    assert much_later.status is SourceStatus.ACCEPTED


def test_webhooks_out_of_order_never_step_back() -> None:
    src = source()
    succeeded = event("payment_intent.succeeded", intent("succeeded", CH), T + 10)
    processing = event("payment_intent.processing", intent("processing"), T + 5)
    first = src.observe(PI, pushed(succeeded), None, NOW)
    second = src.observe(PI, pushed(processing), first.evidence, NOW)
    assert first.status is second.status is SourceStatus.ACCEPTED
    assert second.evidence is not None
    assert dict(second.evidence.facts)["event_ids"] == [succeeded["id"], processing["id"]]


def test_a_redelivered_event_changes_no_fact() -> None:
    src = source()
    evt = event("payment_intent.succeeded", intent("succeeded", CH), T + 10)
    first = src.observe(PI, pushed(evt), None, NOW)
    again = src.observe(PI, pushed(evt), first.evidence, UnixMillis(NOW + 1000))
    assert same_evidence(first.evidence, again.evidence)


def test_webhooks_build_the_same_state_as_a_poll() -> None:
    src = source()
    obs = None
    for evt in (
        event("payment_intent.created", intent("requires_payment_method"), T),
        event("charge.succeeded", charge(bt=BT), T + 1),
        event("payment_intent.succeeded", intent("succeeded", CH), T + 1),
        event("charge.refunded", charge(bt=BT, amount_refunded=2000, refunded=True), T + 9),
    ):
        obs = src.observe(PI, pushed(evt), obs.evidence if obs else None, NOW)
    assert obs is not None and obs.status is SourceStatus.REVERSED
    facts: dict[str, Any] = dict(obs.evidence.facts) if obs.evidence else {}
    assert (facts["charge"], facts["amount_refunded"], len(facts["event_ids"])) == (CH, 2000, 4)


def test_a_successful_charge_before_the_intents_own_event_is_no_failure() -> None:
    src = source()
    created = src.observe(
        PI, pushed(event("payment_intent.created", intent("requires_payment_method"), T)), None, NOW
    )
    charged = src.observe(
        PI, pushed(event("charge.succeeded", charge(bt=BT), T)), created.evidence, NOW
    )
    assert charged.status is SourceStatus.INITIATED
    done = src.observe(
        PI,
        pushed(event("payment_intent.succeeded", intent("succeeded", CH), T)),
        charged.evidence,
        NOW,
    )
    assert done.status is SourceStatus.ACCEPTED


def test_events_about_another_payment_are_ignored() -> None:
    other = {**intent("canceled"), "id": "pi_someone_else"}
    obs = source().observe(PI, pushed(event("payment_intent.canceled", other, T)), None, NOW)
    assert obs.status is SourceStatus.UNKNOWN and obs.evidence is None


def test_a_new_attempt_replaces_the_failed_charge() -> None:
    state = PaymentState(PI)
    state.apply(charge("failed", bt=None), T * 1000)
    state.apply(intent("requires_payment_method", CH, {"code": "card_declined"}), T * 1000)
    assert classify(state, None, NOW)[0] is SourceStatus.FAILED
    retry = {**charge(bt=BT), "id": "ch_second", "created": T + 30}
    state.apply(retry, (T + 30) * 1000)
    state.apply(intent("succeeded", "ch_second"), (T + 30) * 1000)
    assert (state.charge, state.charge_status) == ("ch_second", "succeeded")
    assert CH not in state.objects
    assert classify(state, None, NOW)[0] is SourceStatus.ACCEPTED


def test_the_state_survives_a_round_trip_through_evidence() -> None:
    obs = source().observe(PI, polled(intent("succeeded", charge(bt=balance()))), None, NOW)
    state = PaymentState.from_evidence(PI, obs.evidence)
    assert (state.status, state.charge, state.balance_status) == ("succeeded", CH, "pending")
    assert PaymentState.from_evidence("pi_other", obs.evidence) == PaymentState("pi_other")


# -- webhook signatures ----------------------------------------------------------------------


def _event_body() -> dict[str, Any]:
    return event("payment_intent.succeeded", intent("succeeded", CH), int(time.time()), "evt_1")


def test_a_webhook_signed_as_stripe_signs_is_accepted() -> None:
    body, headers = signed(_event_body(), SECRET)
    assert verify_webhook(body, headers["Stripe-Signature"], SECRET, 300)["id"] == "evt_1"


def test_any_matching_v1_signature_is_enough() -> None:
    body, headers = signed(_event_body(), SECRET)
    header = headers["Stripe-Signature"] + ",v1=" + "0" * 64 + ",v0=legacy"
    assert verify_webhook(body, header, SECRET, 300)["id"] == "evt_1"


@pytest.mark.parametrize(
    "case", ["tampered", "stale", "wrong_secret", "missing", "garbage", "no_v1"]
)
def test_a_webhook_that_does_not_verify_is_rejected(case: str) -> None:
    body, headers = signed(_event_body(), SECRET)
    header: str | None = headers["Stripe-Signature"]
    if case == "tampered":
        body = body.replace(b'"succeeded"', b'"canceled"')
    elif case == "stale":
        header = signature_header(body, SECRET, int(time.time()) - 301)
    elif case == "wrong_secret":
        header = signature_header(body, "whsec_other")
    elif case == "missing":
        header = None
    elif case == "garbage":
        header = "nonsense"
    elif case == "no_v1":
        header = str(header).replace("v1=", "v0=")
    with pytest.raises(WebhookRejected, match="Stripe-Signature"):
        verify_webhook(body, header, SECRET, 300)


def test_a_verified_body_must_still_be_an_event() -> None:
    body = json.dumps({"object": "payment_intent", "id": PI}).encode()
    with pytest.raises(WebhookRejected, match="not a Stripe event"):
        verify_webhook(body, signature_header(body, SECRET), SECRET, 300)
    with pytest.raises(WebhookRejected, match="not JSON"):
        verify_webhook(b"{nope", signature_header(b"{nope", SECRET), SECRET, 300)


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (intent("succeeded"), PI),
        (charge(), PI),
        ({"id": "re_1", "object": "refund", "payment_intent": PI}, PI),
        ({"id": "dp_1", "object": "dispute", "payment_intent": {"id": PI}}, PI),
        ({"object": "balance", "available": []}, None),
    ],
)
def test_events_are_routed_to_their_payment_intent(
    obj: dict[str, Any], expected: str | None
) -> None:
    assert payment_intent_of(event("x", obj, T)) == expected


def test_payment_intent_ids_are_checked() -> None:
    src = source()
    assert src.check_ref(PI) == PI
    for bad in ("ch_123", "pi_", "pi_" + "a" * 64, "pi_has space"):
        with pytest.raises(ValueError, match="ref"):
            src.check_ref(bad)
