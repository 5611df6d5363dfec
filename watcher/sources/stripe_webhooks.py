"""Stripe's signed webhooks: which ones to trust, and which PaymentIntent each is about."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from watcher.sources.stripe_state import text_of


class WebhookRejected(ValueError):
    """A webhook whose signature, age or body cannot be trusted; answered 400, nothing kept."""


def verify_webhook(
    payload: bytes, header: str | None, secret: str, tolerance_s: int
) -> dict[str, Any]:
    """The event of a webhook whose ``Stripe-Signature`` checks out; raises
    :class:`WebhookRejected` otherwise.

    The check is Stripe's own (``stripe.WebhookSignature.verify_header``): HMAC-SHA256 with
    the endpoint secret over ``"{t}.{body}"``, any ``v1`` signature may match, and ``t`` must
    be at most ``tolerance_s`` old, so a captured request cannot be replayed later."""
    import stripe  # the stripe extra: loaded only where a Stripe source works

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
        return text_of(obj.get("id"))
    pi = obj.get("payment_intent")
    if isinstance(pi, Mapping):
        return text_of(pi.get("id"))
    return text_of(pi)
