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
``api_base`` configurable) and signed webhooks
(:func:`watcher.sources.stripe_webhooks.verify_webhook`, then a snapshot of the event).
Both feed the same :class:`watcher.sources.stripe_state.PaymentState`, kept in the stored decision's
evidence between observations: webhooks can arrive in any order, so an object only
replaces what is known when it is at least as recent, and refunds and disputes accumulate.
The evidence names the webhook event ids applied and carries a digest of each object the
verdict rests on (``objects``) and of all of them (``objects_digest``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import stripe

from guard.settlement import Evidence
from guard.source import (
    Snapshot,
    SourceObservation,
    SourceUnavailable,
    check_ref_text,
)
from guard.types import UnixMillis
from watcher.config.sources import SourceConfig
from watcher.sources.stripe_settings import KIND, StripeSettings
from watcher.sources.stripe_state import PaymentState, classify, int_of

PAYMENT_INTENT_ID = re.compile(r"pi_[A-Za-z0-9_]+")
"""What a PaymentIntent id looks like (``pi_3Mtw...``)."""

HTTP_TIMEOUT_S = 10.0
"""Timeout of one request to the Stripe API."""


class StripeSource:
    """One ``stripe_payment_intent`` source (see the module doc)."""

    kind = KIND
    reversible = True
    settings_model = StripeSettings

    def __init__(self, source: SourceConfig) -> None:
        config = StripeSettings.narrow(source)
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
                created = int_of(event.get("created"))
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


def _describe(exc: stripe.StripeError) -> str:
    status = f"HTTP {exc.http_status}: " if exc.http_status else ""
    return f"{type(exc).__name__}: {status}{exc.user_message or exc}"
