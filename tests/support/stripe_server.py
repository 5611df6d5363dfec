"""A local HTTP server that speaks Stripe's API shapes, driven by tests.

It is what the official ``stripe`` library talks to when a source's ``api_base`` points at
it: real HTTP on loopback, the JSON objects Stripe documents (PaymentIntent, Charge,
BalanceTransaction, Refund, Dispute, Event, list envelopes, error envelopes), ``expand[]``
of the nested objects, Bearer authentication with one secret key. Tests move payments
through their lifecycle with the driver methods (:meth:`StripeServer.confirm`,
:meth:`~StripeServer.settle`, :meth:`~StripeServer.refund`...), each of which also records
the events Stripe would send; :func:`signed` builds a webhook request from one, signed the
way Stripe signs (``Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, "t.body")>``).

Only the read side of the API is served (``GET``): the watcher never writes to Stripe.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import itertools
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.anvil import free_port

API_VERSION = "2025-10-29.clover"
"""The version stamped on events (the server answers the same shapes for any version)."""

_LISTS = {"refunds": "refund", "disputes": "dispute", "events": "event"}
_PREFIX = {
    "payment_intents": "payment_intent",
    "charges": "charge",
    "balance_transactions": "balance_transaction",
    "refunds": "refund",
    "disputes": "dispute",
    "events": "event",
}


def signature_header(payload: bytes, secret: str, timestamp: int | None = None) -> str:
    """``Stripe-Signature`` for ``payload``, computed as Stripe documents it."""
    t = int(time.time()) if timestamp is None else timestamp
    mac = hmac.new(secret.encode(), f"{t}.".encode() + payload, hashlib.sha256)
    return f"t={t},v1={mac.hexdigest()}"


def signed(
    event: dict[str, Any], secret: str, timestamp: int | None = None
) -> tuple[bytes, dict[str, str]]:
    """The body and headers of the webhook request Stripe would send for ``event``."""
    body = json.dumps(event, indent=2).encode()  # Stripe sends pretty-printed JSON
    return body, {
        "Content-Type": "application/json; charset=utf-8",
        "Stripe-Signature": signature_header(body, secret, timestamp),
        "User-Agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
    }


class StripeServer:
    """The server and its objects (see the module doc). Use as a context manager."""

    def __init__(self, api_key: str = "sk_test_local", clock: Callable[[], float] = time.time):
        self.api_key = api_key
        self.clock = clock
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.objects: dict[str, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.requests: list[str] = []
        self.fail_with: int | None = None
        """Answer every request with this HTTP status (an outage) while set."""
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), _Handler)
        self._server.daemon_threads = True
        self._server.stripe = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> StripeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- driving payments ------------------------------------------------------------------

    def create_payment_intent(
        self, amount: int = 2000, currency: str = "usd", capture_method: str = "automatic"
    ) -> str:
        """A new PaymentIntent awaiting a payment method; returns its id."""
        with self._lock:
            pi = self._new(
                "pi",
                {
                    "object": "payment_intent",
                    "amount": amount,
                    "amount_capturable": 0,
                    "amount_received": 0,
                    "canceled_at": None,
                    "cancellation_reason": None,
                    "capture_method": capture_method,
                    "confirmation_method": "automatic",
                    "currency": currency,
                    "customer": None,
                    "description": None,
                    "last_payment_error": None,
                    "latest_charge": None,
                    "livemode": False,
                    "metadata": {},
                    "payment_method": None,
                    "payment_method_types": ["card"],
                    "status": "requires_payment_method",
                },
            )
            pi["client_secret"] = f"{pi['id']}_secret_local"
            self._event("payment_intent.created", pi)
            return str(pi["id"])

    def confirm(self, pi_id: str, outcome: str = "succeeded") -> None:
        """Confirm with a card: ``succeeded``, ``processing``, ``requires_capture`` or
        ``declined`` (a failed charge; the intent goes back to requires_payment_method)."""
        with self._lock:
            pi = self.objects[pi_id]
            pi["payment_method"] = f"pm_{next(self._ids):08d}"
            if outcome == "processing":
                pi["status"] = "processing"
                self._event("payment_intent.processing", pi)
                return
            charge = self._charge(pi, failed=outcome == "declined")
            pi["latest_charge"] = charge["id"]
            if outcome == "declined":
                pi["status"] = "requires_payment_method"
                pi["last_payment_error"] = {
                    "type": "card_error",
                    "code": "card_declined",
                    "decline_code": "generic_decline",
                    "message": "Your card was declined.",
                    "charge": charge["id"],
                }
                self._event("charge.failed", charge)
                self._event("payment_intent.payment_failed", pi)
            elif outcome == "requires_capture":
                charge["captured"] = False
                pi["status"] = "requires_capture"
                pi["amount_capturable"] = pi["amount"]
                self._event("charge.succeeded", charge)
                self._event("payment_intent.amount_capturable_updated", pi)
            else:
                self._capture(pi, charge)

    def capture(self, pi_id: str) -> None:
        """Capture an intent in requires_capture (it succeeds)."""
        with self._lock:
            pi = self.objects[pi_id]
            self._capture(pi, self.objects[pi["latest_charge"]])

    def settle(self, pi_id: str) -> None:
        """The funds of the intent's charge become available (its balance transaction)."""
        with self._lock:
            charge = self.objects[self.objects[pi_id]["latest_charge"]]
            bt = self.objects[charge["balance_transaction"]]
            bt["status"] = "available"
            bt["available_on"] = int(self.clock())
            self._event(
                "balance.available",
                {"object": "balance", "available": [{"amount": bt["net"], "currency": "usd"}]},
            )

    def refund(self, pi_id: str, amount: int | None = None) -> str:
        """Refund (all, or ``amount`` of) the intent's charge; returns the refund id."""
        with self._lock:
            pi = self.objects[pi_id]
            charge = self.objects[pi["latest_charge"]]
            refund = self._new(
                "re",
                {
                    "object": "refund",
                    "amount": amount or charge["amount"],
                    "charge": charge["id"],
                    "currency": charge["currency"],
                    "payment_intent": pi_id,
                    "reason": "requested_by_customer",
                    "status": "succeeded",
                },
            )
            charge["amount_refunded"] += refund["amount"]
            charge["refunded"] = charge["amount_refunded"] >= charge["amount"]
            self._event("refund.created", refund)
            self._event("charge.refunded", charge)
            return str(refund["id"])

    def dispute(self, pi_id: str) -> str:
        """Open a dispute on the intent's charge; returns the dispute id."""
        with self._lock:
            pi = self.objects[pi_id]
            charge = self.objects[pi["latest_charge"]]
            dispute = self._new(
                "dp",
                {
                    "object": "dispute",
                    "amount": charge["amount"],
                    "charge": charge["id"],
                    "currency": charge["currency"],
                    "payment_intent": pi_id,
                    "reason": "fraudulent",
                    "status": "needs_response",
                },
            )
            charge["disputed"] = True
            self._event("charge.dispute.created", dispute)
            return str(dispute["id"])

    def cancel(self, pi_id: str) -> None:
        """Cancel an intent that has not succeeded."""
        with self._lock:
            pi = self.objects[pi_id]
            pi["status"] = "canceled"
            pi["canceled_at"] = int(self.clock())
            pi["cancellation_reason"] = "requested_by_customer"
            self._event("payment_intent.canceled", pi)

    def events_of(self, pi_id: str) -> list[dict[str, Any]]:
        """The events recorded about an intent (its own, its charge's, refunds, disputes)."""
        out = []
        for event in self.events:
            obj = event["data"]["object"]
            if obj.get("id") == pi_id or obj.get("payment_intent") == pi_id:
                out.append(event)
        return out

    # -- internals ---------------------------------------------------------------------------

    def _new(self, prefix: str, fields: dict[str, Any]) -> dict[str, Any]:
        oid = f"{prefix}_{next(self._ids):08d}Loc"
        obj = {"id": oid, "created": int(self.clock()), **fields}
        self.objects[oid] = obj
        return obj

    def _charge(self, pi: dict[str, Any], failed: bool) -> dict[str, Any]:
        return self._new(
            "ch",
            {
                "object": "charge",
                "amount": pi["amount"],
                "amount_captured": 0 if failed else pi["amount"],
                "amount_refunded": 0,
                "balance_transaction": None,
                "captured": not failed,
                "currency": pi["currency"],
                "disputed": False,
                "failure_code": "card_declined" if failed else None,
                "failure_message": "Your card was declined." if failed else None,
                "outcome": {
                    "network_status": "declined_by_network" if failed else "approved_by_network",
                    "risk_score": 12,
                    "type": "issuer_declined" if failed else "authorized",
                },
                "paid": not failed,
                "payment_intent": pi["id"],
                "payment_method": pi["payment_method"],
                "refunded": False,
                "status": "failed" if failed else "succeeded",
            },
        )

    def _capture(self, pi: dict[str, Any], charge: dict[str, Any]) -> None:
        fee = 30 + pi["amount"] * 29 // 1000
        bt = self._new(
            "txn",
            {
                "object": "balance_transaction",
                "amount": pi["amount"],
                "available_on": int(self.clock()) + 2 * 86400,
                "currency": pi["currency"],
                "description": None,
                "exchange_rate": None,
                "fee": fee,
                "net": pi["amount"] - fee,
                "reporting_category": "charge",
                "source": charge["id"],
                "status": "pending",
                "type": "charge",
            },
        )
        charge["captured"] = True
        charge["balance_transaction"] = bt["id"]
        pi["status"] = "succeeded"
        pi["amount_received"] = pi["amount"]
        pi["amount_capturable"] = 0
        self._event("charge.succeeded", charge)
        self._event("payment_intent.succeeded", pi)

    def _event(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        event = {
            "id": f"evt_{next(self._ids):08d}Loc",
            "object": "event",
            "api_version": API_VERSION,
            "created": int(self.clock()),
            "data": {"object": copy.deepcopy(obj)},
            "livemode": False,
            "pending_webhooks": 1,
            "request": {"id": None, "idempotency_key": None},
            "type": kind,
        }
        self.events.append(event)
        return event

    def _expand(self, obj: dict[str, Any], paths: list[str]) -> dict[str, Any]:
        out = copy.deepcopy(obj)
        for path in paths:
            head, _, rest = path.partition(".")
            child = out.get(head)
            if isinstance(child, str) and child in self.objects:
                out[head] = self._expand(self.objects[child], [rest] if rest else [])
            elif isinstance(child, dict) and rest:
                out[head] = self._expand(child, [rest])
        return out

    def answer(self, path: str, query: dict[str, list[str]], auth: str) -> tuple[int, Any]:
        """The status and JSON of one GET (the handler's whole logic)."""
        with self._lock:
            self.requests.append(path)
            if self.fail_with is not None:
                return self.fail_with, _error("api_error", "told to fail")
            if auth != f"Bearer {self.api_key}":
                return 401, _error("invalid_request_error", "Invalid API Key provided")
            parts = [p for p in path.split("/") if p]
            if len(parts) < 2 or parts[0] != "v1" or parts[1] not in _PREFIX:
                return 404, _error(
                    "invalid_request_error", f"Unrecognized request URL (GET: {path})"
                )
            expand = [v for k, vs in query.items() if k.startswith("expand") for v in vs]
            kind = _PREFIX[parts[1]]
            if len(parts) == 3:
                obj = self.objects.get(parts[2])
                if obj is None or obj.get("object") != kind:
                    return 404, _error(
                        "invalid_request_error",
                        f"No such {kind}: '{parts[2]}'",
                        code="resource_missing",
                    )
                return 200, self._expand(obj, expand)
            if parts[1] not in _LISTS:
                return 404, _error(
                    "invalid_request_error", f"Unrecognized request URL (GET: {path})"
                )
            source = self.events if kind == "event" else self.objects.values()
            wanted = query.get("payment_intent", [None])[0]
            found = [
                self._expand(o, expand)
                for o in source
                if o.get("object") == kind and (wanted is None or o.get("payment_intent") == wanted)
            ]
            found.sort(key=lambda o: o["created"], reverse=True)
            limit = int(query.get("limit", ["10"])[0])
            return 200, {
                "object": "list",
                "data": found[:limit],
                "has_more": len(found) > limit,
                "url": f"/v1/{parts[1]}",
            }


def _error(kind: str, message: str, code: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"type": kind, "message": message}
    if code is not None:
        error["code"] = code
    return {"error": error}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        stripe: StripeServer = self.server.stripe  # type: ignore[attr-defined]
        status, body = stripe.answer(
            parts.path, parse_qs(parts.query), self.headers.get("Authorization", "")
        )
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Request-Id", f"req_local{len(stripe.requests)}")
        self.end_headers()
        self.wfile.write(data)
