"""Stripe PaymentIntents as settlements: when is a card payment final?

A PaymentIntent reports ``succeeded`` as soon as the charge is authorised and captured, but
the money can still be taken back: the funds are *pending* in the balance until Stripe
settles them, and a refund or a dispute can follow. So ``succeeded`` is only *accepted*:

==========================================================  ==========================
Stripe                                                      status
==========================================================  ==========================
``processing``, ``requires_capture``, ``requires_action``,  ``initiated`` (awaiting)
``requires_confirmation``, ``requires_payment_method``
before any attempt
``succeeded``                                               ``accepted``
``succeeded`` and the charge's balance transaction is       ``final``
``available`` (funds settled)
``succeeded`` for ``finality_window_s`` without refund or   ``final`` (by policy)
dispute
``requires_payment_method`` after an attempt, ``canceled``,  ``failed``
or a ``failed`` charge
a refund (not failed or canceled), a dispute, or a charge   ``reversed``: a failure, or
marked refunded or disputed                                 a finality violation once
                                                            confirmed
==========================================================  ==========================

Two ways to learn: polling (:meth:`StripeSource.fetch`, the official ``stripe`` library,
``api_base`` configurable) and signed webhooks (:func:`verify_webhook`, then a snapshot
of the event). Both feed the same :class:`PaymentState`, kept in the stored decision's
evidence between observations: webhooks can arrive in any order, so an object only
replaces what is known when it is at least as recent, and refunds and disputes accumulate.
The evidence names the webhook event ids applied and carries a digest of each object the
verdict rests on (``objects``) and of all of them (``objects_digest``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

import stripe

from guard.settlement import Evidence
from guard.source import (
    Snapshot,
    SourceObservation,
    SourceStatus,
    SourceUnavailable,
    check_ref_text,
    facts_of,
    objects_digest,
)
from guard.types import UnixMillis

if TYPE_CHECKING:
    from watcher.config import SourceConfig

KIND = "stripe_payment_intent"
"""The settlement kind this module serves."""

PAYMENT_INTENT_ID = re.compile(r"pi_[A-Za-z0-9_]+")
"""What a PaymentIntent id looks like (``pi_3Mtw...``)."""

MAX_EVENT_IDS = 100
"""Most webhook event ids kept in the evidence (the newest)."""

ACTIVE_REFUND = frozenset({"pending", "succeeded", "requires_action"})
"""Refund statuses that take money back (a ``failed`` or ``canceled`` refund does not)."""

HTTP_TIMEOUT_S = 10.0
"""Timeout of one request to the Stripe API."""


class WebhookRejected(ValueError):
    """A webhook whose signature, age or body cannot be trusted; answered 400, nothing kept."""


@dataclass
class PaymentState:
    """What is known about one PaymentIntent, merged from every snapshot so far.

    Times are Unix milliseconds. ``*_as_of`` is the instant of the news that last changed
    that object (a webhook event's ``created``, or the time of a poll): older news arriving
    late never overwrites newer, and news that changes nothing (the same object digest)
    changes nothing, so re-polling an unchanged payment stores nothing new."""

    payment_intent: str
    """The PaymentIntent id (the settlement's ref)."""
    status: str | None = None
    """The PaymentIntent's status, None until seen."""
    as_of: int = 0
    """When ``status`` was current."""
    amount: int | None = None
    """Amount in the currency's smallest unit."""
    currency: str | None = None
    """Three-letter ISO code, lower case."""
    payment_error: str | None = None
    """``last_payment_error`` code: an attempt was made and failed."""
    charge: str | None = None
    """The latest charge's id."""
    charge_status: str | None = None
    """``succeeded``, ``pending`` or ``failed``."""
    charge_as_of: int = 0
    """When the charge fields were current."""
    charge_created: int | None = None
    """The charge's creation time."""
    failure_code: str | None = None
    """The charge's ``failure_code``."""
    amount_refunded: int = 0
    """Refunded so far, per the charge."""
    disputed: bool = False
    """The charge says it is disputed."""
    balance_transaction: str | None = None
    """The charge's balance transaction id."""
    balance_status: str | None = None
    """``pending`` or ``available`` (funds settled)."""
    available_on: int | None = None
    """When the funds become available."""
    succeeded_at: int | None = None
    """When the payment succeeded (charge creation, or the success event): the finality
    window runs from here."""
    refunds: dict[str, str] = field(default_factory=dict)
    """Refund id → status."""
    disputes: dict[str, str] = field(default_factory=dict)
    """Dispute id → status."""
    event_ids: list[str] = field(default_factory=list)
    """Webhook events applied, oldest first (at most :data:`MAX_EVENT_IDS`)."""
    objects: dict[str, str] = field(default_factory=dict)
    """Object id → ``sha256:`` digest of the version the state rests on."""

    @classmethod
    def from_evidence(cls, ref: str, evidence: Evidence | None) -> PaymentState:
        """The state stored in ``evidence`` (a fresh one if it is about something else)."""
        facts = facts_of(evidence)
        if facts.get("payment_intent") != ref:
            return cls(ref)
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {k: v for k, v in facts.items() if k in known}
        values["refunds"] = dict(values.get("refunds") or {})
        values["disputes"] = dict(values.get("disputes") or {})
        values["event_ids"] = list(values.get("event_ids") or [])
        values["objects"] = dict(values.get("objects") or {})
        return cls(**values)

    @property
    def reversed_by(self) -> str | None:
        """``refunded`` or ``disputed`` when money was taken back, else None."""
        if self.amount_refunded > 0 or any(s in ACTIVE_REFUND for s in self.refunds.values()):
            return "refunded"
        if self.disputed or self.disputes:
            return "disputed"
        return None

    # -- merging -------------------------------------------------------------------------

    def apply(self, obj: Mapping[str, Any], as_of: int) -> bool:
        """Merge one Stripe object (any of PaymentIntent, Charge, BalanceTransaction,
        Refund, Dispute); False when it is not about this payment."""
        kind = obj.get("object")
        if kind == "payment_intent":
            return self._intent(obj, as_of)
        if kind == "charge":
            return self._charge(obj, as_of)
        if kind == "balance_transaction":
            return self._balance(obj, as_of)
        if kind == "refund":
            return self._child(obj, self.refunds)
        if kind == "dispute":
            return self._child(obj, self.disputes)
        return False

    def _intent(self, pi: Mapping[str, Any], as_of: int) -> bool:
        if pi.get("id") != self.payment_intent:
            return False
        charge = pi.get("latest_charge")
        if isinstance(charge, Mapping):
            self._charge(charge, as_of)
        version = objects_digest(_collapse(pi, "latest_charge"))
        if self.objects.get(self.payment_intent) == version or _older(as_of, self.as_of):
            return True  # nothing new, or older news than what is known
        self.as_of = as_of
        self.status = _text(pi.get("status"))
        self.amount = _int(pi.get("amount"))
        self.currency = _text(pi.get("currency"))
        error = pi.get("last_payment_error")
        self.payment_error = (
            _text(error.get("code") or error.get("decline_code") or error.get("type") or "error")
            if isinstance(error, Mapping)
            else None
        )
        if isinstance(charge, str) and charge != self.charge:
            self._new_charge(charge, as_of)
        self.objects[self.payment_intent] = version
        if self.status == "succeeded" and self.succeeded_at is None:
            self.succeeded_at = self.charge_created if self.charge_created is not None else as_of
        return True

    def _new_charge(self, charge_id: str, as_of: int) -> None:
        """A new attempt replaces the previous charge: forget what was known of that one."""
        for stale in (self.charge, self.balance_transaction):
            if stale is not None:
                self.objects.pop(stale, None)
        self.charge, self.charge_as_of = charge_id, as_of
        self.charge_status = self.failure_code = None
        self.charge_created = None
        self.balance_transaction = self.balance_status = None
        self.available_on = None
        self.amount_refunded, self.disputed = 0, False

    def _charge(self, ch: Mapping[str, Any], as_of: int) -> bool:
        cid = _text(ch.get("id"))
        if cid is None or ch.get("payment_intent") not in (None, self.payment_intent):
            return False
        bt = ch.get("balance_transaction")
        version = objects_digest(_collapse(ch, "balance_transaction", "refunds"))
        if (cid == self.charge and self.objects.get(cid) == version) or _older(
            as_of, self.charge_as_of
        ):
            # Nothing new about the charge, or older news (an earlier attempt or version);
            # its balance transaction may still have moved on.
            if cid == self.charge and isinstance(bt, Mapping):
                self._balance(bt, as_of)
            return True
        if cid != self.charge:
            self._new_charge(cid, as_of)
        self.charge_as_of = as_of
        self.charge_status = _text(ch.get("status"))
        self.failure_code = _text(ch.get("failure_code"))
        self.amount_refunded = _int(ch.get("amount_refunded")) or 0
        self.disputed = bool(ch.get("disputed"))
        created = _int(ch.get("created"))
        self.charge_created = None if created is None else created * 1000
        if isinstance(bt, Mapping):
            self._balance(bt, as_of)
        elif isinstance(bt, str) and bt != self.balance_transaction:
            self.balance_transaction, self.balance_status, self.available_on = bt, None, None
        refunds = ch.get("refunds")
        if isinstance(refunds, Mapping) and isinstance(refunds.get("data"), list):
            for refund in refunds["data"]:
                if isinstance(refund, Mapping):
                    self._child(refund, self.refunds)
        self.objects[cid] = version
        if self.status == "succeeded" and self.succeeded_at is None:
            self.succeeded_at = self.charge_created
        return True

    def _balance(self, bt: Mapping[str, Any], as_of: int) -> bool:
        btid = _text(bt.get("id"))
        if btid is None:
            return False
        source = bt.get("source")
        if btid != self.balance_transaction and (source is None or source != self.charge):
            return False
        version = objects_digest(bt)
        if self.objects.get(btid) == version:
            return True
        self.balance_transaction = btid
        if self.balance_status != "available":  # funds once available stay settled
            self.balance_status = _text(bt.get("status"))
        available_on = _int(bt.get("available_on"))
        self.available_on = None if available_on is None else available_on * 1000
        self.objects[btid] = version
        return True

    def _child(self, obj: Mapping[str, Any], into: dict[str, str]) -> bool:
        oid = _text(obj.get("id"))
        mine = obj.get("payment_intent") == self.payment_intent or (
            self.charge is not None and obj.get("charge") == self.charge
        )
        if oid is None or not mine:
            return False
        into[oid] = _text(obj.get("status")) or "unknown"
        self.objects[oid] = objects_digest(obj)
        return True

    def note_events(self, event_ids: tuple[str, ...]) -> None:
        """Remember the webhook events applied (idempotent: a redelivery adds nothing)."""
        for event_id in event_ids:
            if event_id not in self.event_ids:
                self.event_ids.append(event_id)
        del self.event_ids[:-MAX_EVENT_IDS]

    def facts(self) -> dict[str, object]:
        """The state as evidence facts (plus the digest over all object digests)."""
        out: dict[str, object] = asdict(self)
        out["objects_digest"] = objects_digest(self.objects)
        return out


def classify(
    state: PaymentState, window_ms: int | None, now: int
) -> tuple[SourceStatus, str | None]:
    """Status and evidence kind of a payment at ``now`` (see the module doc's table)."""
    reversal = state.reversed_by
    if reversal is not None:
        return SourceStatus.REVERSED, reversal
    if state.status == "canceled":
        return SourceStatus.FAILED, "payment_canceled"
    if state.charge_status == "failed" and state.status != "succeeded":
        return SourceStatus.FAILED, "charge_failed"
    if state.status == "requires_payment_method" and state.payment_error is not None:
        # Back to requires_payment_method *after an attempt*: the attempt's error says so.
        # (A charge alone is no failure: charge.succeeded often arrives before the
        # intent's own payment_intent.succeeded.)
        return SourceStatus.FAILED, "payment_failed"
    if state.status == "succeeded":
        if state.balance_status == "available":
            return SourceStatus.FINAL, "funds_available"
        if (
            window_ms is not None
            and state.succeeded_at is not None
            and now >= state.succeeded_at + window_ms
        ):
            return SourceStatus.FINAL, "finality_window"
        return SourceStatus.ACCEPTED, "payment_succeeded"
    if state.status is None:
        return SourceStatus.UNKNOWN, None
    return SourceStatus.INITIATED, f"payment_{state.status}"


class StripeSource:
    """One ``stripe_payment_intent`` source (see the module doc)."""

    kind = KIND
    reversible = True

    def __init__(self, config: SourceConfig) -> None:
        self.name = config.name
        self.window_ms = (
            None if config.finality_window_s is None else int(config.finality_window_s * 1000)
        )
        self.webhook_secret = config.webhook_secret
        self.webhook_tolerance_s = config.webhook_tolerance_s
        self._client: stripe.StripeClient | None = None
        if config.api_key is not None:
            self._client = stripe.StripeClient(
                config.api_key,
                base_addresses={"api": config.api_base} if config.api_base else None,
                max_network_retries=0,  # the poller retries on its own schedule
                http_client=stripe.RequestsClient(timeout=HTTP_TIMEOUT_S),
            )

    @property
    def polls(self) -> bool:
        """Whether this source asks the API (it has a key), or learns by webhooks only."""
        return self._client is not None

    def check_ref(self, ref: str) -> str:
        """A PaymentIntent id: ``pi_`` and letters, digits or _."""
        return check_ref_text(ref, PAYMENT_INTENT_ID, "a PaymentIntent id (pi_...)")

    def fetch(self, ref: str, now: UnixMillis) -> Snapshot | None:
        """The PaymentIntent with its latest charge and balance transaction (one request),
        plus its refunds and disputes when the charge says there are some."""
        client = self._client
        if client is None:
            return None
        try:
            pi = client.v1.payment_intents.retrieve(
                ref, params={"expand": ["latest_charge.balance_transaction"]}
            ).to_dict()
            charge = pi.get("latest_charge")
            refunds: list[dict[str, Any]] = []
            disputes: list[dict[str, Any]] = []
            if isinstance(charge, dict) and (
                charge.get("amount_refunded") or charge.get("refunded")
            ):
                listed = client.v1.refunds.list(params={"payment_intent": ref, "limit": 100})
                refunds = [r.to_dict() for r in listed.data]
            if isinstance(charge, dict) and charge.get("disputed"):
                found = client.v1.disputes.list(params={"payment_intent": ref, "limit": 100})
                disputes = [d.to_dict() for d in found.data]
        except stripe.InvalidRequestError as exc:
            if exc.http_status == 404:
                return Snapshot(ref, now, {"missing": True})
            raise SourceUnavailable(self.name, _describe(exc)) from exc
        except stripe.StripeError as exc:
            raise SourceUnavailable(self.name, _describe(exc)) from exc
        return Snapshot(ref, now, {"payment_intent": pi, "refunds": refunds, "disputes": disputes})

    def observe(
        self, ref: str, snapshot: Snapshot | None, previous: Evidence | None, now: UnixMillis
    ) -> SourceObservation:
        """Merge ``snapshot`` (a poll or a webhook event) into the stored state; classify."""
        state = PaymentState.from_evidence(ref, previous)
        if snapshot is not None:
            objects = snapshot.objects
            event = objects.get("event")
            if isinstance(event, Mapping):
                data = event.get("data")
                obj = data.get("object") if isinstance(data, Mapping) else None
                created = _int(event.get("created"))
                as_of = snapshot.observed_at if created is None else created * 1000
                if isinstance(obj, Mapping) and state.apply(obj, as_of):
                    state.note_events(snapshot.event_ids)
            pi = objects.get("payment_intent")
            if isinstance(pi, Mapping):
                state.apply(pi, snapshot.observed_at)
            for key in ("refunds", "disputes"):
                listed = objects.get(key)
                for item in listed if isinstance(listed, list) else ():
                    if isinstance(item, Mapping):
                        state.apply(item, snapshot.observed_at)
        status, kind = classify(state, self.window_ms, now)
        if kind is None:
            return SourceObservation(ref, status)
        facts = {
            "source": self.name,
            "source_kind": KIND,
            "ref": ref,
            "finality_window_ms": self.window_ms,
            **state.facts(),
        }
        return SourceObservation(ref, status, Evidence.of(kind, now, **facts))

    def close(self) -> None:
        """Nothing to release (the HTTP client keeps no pool between requests)."""


def verify_webhook(
    payload: bytes, header: str | None, secret: str, tolerance_s: int
) -> dict[str, Any]:
    """The event of a webhook whose ``Stripe-Signature`` checks out; raises
    :class:`WebhookRejected` otherwise.

    The check is Stripe's own (``stripe.WebhookSignature.verify_header``): HMAC-SHA256 with
    the endpoint secret over ``"{t}.{body}"``, any ``v1`` signature may match, and ``t`` must
    be at most ``tolerance_s`` old, so a captured request cannot be replayed later."""
    try:
        stripe.WebhookSignature.verify_header(payload, header, secret, tolerance_s)
    except stripe.SignatureVerificationError as exc:
        raise WebhookRejected(f"Stripe-Signature: {exc.user_message or exc}") from None
    except UnicodeDecodeError:
        raise WebhookRejected("body: not UTF-8") from None
    try:
        event = json.loads(payload)
    except ValueError:
        raise WebhookRejected("body: not JSON") from None
    if not isinstance(event, dict) or event.get("object") != "event":
        raise WebhookRejected("body: not a Stripe event object")
    data = event.get("data")
    if (
        not isinstance(event.get("id"), str)
        or not isinstance(event.get("type"), str)
        or not isinstance(data, dict)
        or not isinstance(data.get("object"), dict)
    ):
        raise WebhookRejected("body: an event needs id, type and data.object")
    return event


def payment_intent_of(event: Mapping[str, Any]) -> str | None:
    """The PaymentIntent an event is about (None for events about something else)."""
    obj = event["data"]["object"]
    if obj.get("object") == "payment_intent":
        return _text(obj.get("id"))
    pi = obj.get("payment_intent")
    if isinstance(pi, Mapping):
        return _text(pi.get("id"))
    return _text(pi)


def _collapse(obj: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    """``obj`` with expanded children replaced by their ids (each is digested on its own)."""
    out = dict(obj)
    for key in keys:
        child = out.get(key)
        if isinstance(child, Mapping):
            out[key] = child.get("id")
    return out


def _older(as_of: int, known: int) -> bool:
    """Whether news from ``as_of`` is older than what was known at ``known``, to the second:
    Stripe stamps events in whole seconds, so a poll at 12.5 s cannot tell whether an event
    of second 12 came before it; within the same second the later arrival wins."""
    return as_of // 1000 < known // 1000


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _describe(exc: stripe.StripeError) -> str:
    status = f"HTTP {exc.http_status}: " if exc.http_status else ""
    return f"{type(exc).__name__}: {status}{exc.user_message or exc}"
