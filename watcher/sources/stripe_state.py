"""What is known about one PaymentIntent, and what it means: the pure half of the Stripe
source (no network; :mod:`watcher.sources.stripe_source` fetches, this merges and judges).

See :mod:`watcher.sources.stripe_source` for the table of Stripe states and verdicts.
Webhooks can arrive in any order, so an object only replaces what is known when it is at
least as recent, and refunds and disputes accumulate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from guard.settlement import Evidence
from guard.source import SourceStatus, facts_of, objects_digest

MAX_EVENT_IDS = 100
"""Most webhook event ids kept in the evidence (the newest)."""

ACTIVE_REFUND = frozenset({"pending", "succeeded", "requires_action"})
"""Refund statuses that take money back (a ``failed`` or ``canceled`` refund does not)."""


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
        self.status = text_of(pi.get("status"))
        self.amount = int_of(pi.get("amount"))
        self.currency = text_of(pi.get("currency"))
        error = pi.get("last_payment_error")
        self.payment_error = (
            text_of(error.get("code") or error.get("decline_code") or error.get("type") or "error")
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
        cid = text_of(ch.get("id"))
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
        self.charge_status = text_of(ch.get("status"))
        self.failure_code = text_of(ch.get("failure_code"))
        self.amount_refunded = int_of(ch.get("amount_refunded")) or 0
        self.disputed = bool(ch.get("disputed"))
        created = int_of(ch.get("created"))
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
        btid = text_of(bt.get("id"))
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
            self.balance_status = text_of(bt.get("status"))
        available_on = int_of(bt.get("available_on"))
        self.available_on = None if available_on is None else available_on * 1000
        self.objects[btid] = version
        return True

    def _child(self, obj: Mapping[str, Any], into: dict[str, str]) -> bool:
        oid = text_of(obj.get("id"))
        mine = obj.get("payment_intent") == self.payment_intent or (
            self.charge is not None and obj.get("charge") == self.charge
        )
        if oid is None or not mine:
            return False
        into[oid] = text_of(obj.get("status")) or "unknown"
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


def text_of(value: object) -> str | None:
    """``value`` if it is a string, else None."""
    return value if isinstance(value, str) else None


def int_of(value: object) -> int | None:
    """``value`` if it is an integer (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None
