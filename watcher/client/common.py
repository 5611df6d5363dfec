"""What the sync and async clients share: the request bodies, the answer checks, and the
rule of which event makes a waiting client look at its settlement again.

Kept free of I/O so :mod:`.sync_client` and :mod:`.async_client` cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

import httpx

from guard.settlement import TERMINAL_VERDICTS
from watcher.client.errors import Rejected, Unreachable

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from Python 3.12

TERMINAL: frozenset[str] = TERMINAL_VERDICTS
"""Verdicts after which a settlement never changes (short of a finality violation): the
guard's own set (its members are the verdict strings a view carries), named here for callers."""

View = dict[str, Any]
"""A settlement view as ``GET /v1/settlements/{id}`` answers it."""

Event = dict[str, Any]
"""An event as ``GET /v1/events`` answers it: id, chain, settlement_id, kind, severity,
payload, created_at."""

SSE_HEADERS = {"Accept": "text/event-stream"}

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
"""Methods the daemon takes only with ``Content-Type: application/json``."""


def auth_headers(token: str | None) -> dict[str, str]:
    """The ``Authorization`` header for ``token`` (none without one)."""
    return {"Authorization": f"Bearer {token}"} if token else {}


def with_json_body(method: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` for ``httpx.request``, with an empty JSON body on a mutating request that
    has none (a replay): the daemon refuses a POST that is not JSON (415)."""
    if method.upper() in MUTATING and not {"json", "content", "data", "files"} & kwargs.keys():
        return {**kwargs, "json": {}}
    return kwargs


class DeliveryOptions(TypedDict, total=False):
    """What every registration may add: a deadline, and state for the daemon to deliver.
    ``None`` is the same as leaving a field out (the daemon's default)."""

    timeout_s: float | None
    """Seconds until the settlement is treated as failed (at least 1; capped by the chain)."""
    dependent_state: Mapping[str, Any] | None
    """JSON object the daemon holds and delivers once: commit on finality, discard on failure."""
    commit_url: str | None
    """Where the commit or discard is POSTed (docs/delivery.md)."""


class RegistrationOptions(DeliveryOptions, total=False):
    """The keyword arguments of ``register``: every field of ``POST /v1/settlements`` besides
    ``chain`` and ``tx_hash`` (the API's ``SettlementRequest`` and ``SourceSettlementRequest``),
    typed, so an IDE and ``mypy --strict`` catch a misspelt or mistyped one."""

    confirmations: int | None
    """Depth N (the chain's default if left out)."""
    provisional: bool | None
    """Also deliver inclusion and depth updates before finality, marked provisional."""
    sender: str | None
    """The tx's sender (with ``nonce``): the daemon can prove a replacement without a lookup."""
    nonce: int | None
    """The tx's nonce (with ``sender``)."""
    raw_tx: str | None
    """The signed tx (0x hex), checked against ``tx_hash``."""
    kind: str | None
    """An off-chain source kind (``stripe_payment_intent``, ``rq_job``, ``celery_task``)."""
    ref: str | None
    """The payment intent, job or task id of a source kind."""
    source: str | None
    """The configured source's name (optional when only one has the kind)."""


class PaymentOptions(DeliveryOptions, total=False):
    """The keyword arguments of ``register_payment`` (a payment to an address, docs/api.md)."""

    sender: str | None
    """Only transfers from this address count (the body's ``from``)."""
    reference: str | None
    """Idempotency key: the same payment again; without it every call is a new payment."""
    confirmations: int | None
    """Depth N of each transfer (the chain's default if left out)."""


def registration(
    chain: str | None, tx_hash: str | None, **opts: Unpack[RegistrationOptions]
) -> dict[str, Any]:
    """The ``POST /v1/settlements`` body: only the fields given (the daemon checks them)."""
    given: dict[str, Any] = {"chain": chain, "tx_hash": tx_hash, **opts}
    return {k: v for k, v in given.items() if v is not None}


def payment_registration(
    chain: str, to: str, asset: str, amount: int | str, **opts: Unpack[PaymentOptions]
) -> dict[str, Any]:
    """The ``POST /v1/settlements`` body of a payment to an address (``kind`` evm_payment):
    ``amount`` in base units, sent as a decimal string (an int keeps every digit);
    ``sender`` is the body's ``from``."""
    body = {"kind": "evm_payment", "chain": chain, "to": to, "asset": asset}
    body["amount"] = str(amount) if isinstance(amount, int) else amount
    given: dict[str, Any] = {**opts}
    given["from"] = given.pop("sender", None)
    return {**body, **{k: v for k, v in given.items() if v is not None}}


def subscription_body(
    chain: str, addresses: list[str], assets: list[str], **opts: Any
) -> dict[str, Any]:
    """The ``POST /v1/subscriptions`` body: ``opts`` are ``confirmations``, ``commit_url``,
    ``reference`` (None left out)."""
    body = {"chain": chain, "addresses": addresses, "assets": assets}
    return {**body, **{k: v for k, v in opts.items() if v is not None}}


def invoice_body(
    chain: str, asset: str, amount: int | str, expires_in_s: float, **opts: Any
) -> dict[str, Any]:
    """The ``POST /v1/invoices`` body (``amount`` as a decimal string); ``opts`` are
    ``reference``, ``dependent_state``, ``commit_url`` (None left out)."""
    body = {"chain": chain, "asset": asset, "amount": str(amount), "expires_in_s": expires_in_s}
    return {**body, **{k: v for k, v in opts.items() if v is not None}}


def unreachable(base: str, exc: Exception) -> Unreachable:
    """The error for a request that got no answer."""
    return Unreachable(f"cannot reach the finality daemon at {base}: {exc}")


def answer(base: str, response: httpx.Response) -> Any:
    """The JSON body of a finished response, or the error it stands for."""
    try:
        body = response.json()
    except ValueError:
        raise Unreachable(
            f"{base}{response.request.url.path}: HTTP {response.status_code}, not JSON",
            response.status_code,
        ) from None
    if response.status_code >= 400:
        message = str(body.get("error", body)) if isinstance(body, Mapping) else str(body)
        fields = body.get("fields") if isinstance(body, Mapping) else None
        kind = Unreachable if response.status_code >= 500 else Rejected
        raise kind(
            message,
            response.status_code,
            fields if isinstance(fields, list) else None,
            dict(body) if isinstance(body, Mapping) else None,
        )
    return body


def stream_error(base: str, response: httpx.Response, text: str) -> Exception:
    """The error for an event stream the daemon refused (its body already read)."""
    fake = httpx.Response(response.status_code, content=text.encode(), request=response.request)
    try:
        answer(base, fake)
    except (Rejected, Unreachable) as exc:
        return exc
    return Unreachable(f"{base}/v1/events: HTTP {response.status_code}, no event stream")


def concerns(event: Event, view: View) -> bool:
    """Whether ``event`` may have changed ``view``'s settlement: one of its own, or a reorg
    (or other chain-wide event without a settlement) on its chain. A ``head`` frame is not
    one: it moves only the depth, which :func:`at_head` derives without asking the daemon."""
    if event.get("kind") == "head":
        return False
    if event.get("settlement_id") == view["settlement_id"]:
        return True
    chain = view.get("chain")
    return chain is not None and event.get("settlement_id") is None and event.get("chain") == chain


def unseen(event: Event, view: View) -> bool:
    """Whether a ``head`` frame of its chain may have included ``view``'s tx, not in a block
    yet: no stored event marks an inclusion, so without a read here the client learnt of it
    only when the stream next reconnected (up to ``SSE_MAX_S``, 15 s, late). One read per
    head above the one the view was read at, and only while the tx waits for a block."""
    head, seen = event.get("head_number"), view.get("head_number")
    return (
        event.get("kind") == "head"
        and event.get("chain") == view.get("chain")
        and view.get("block_number") is None
        and view.get("verdict") not in TERMINAL
        and isinstance(head, int)
        and (not isinstance(seen, int) or head > seen)
    )


def at_head(event: Event, view: View) -> View | None:
    """``view`` at the head a ``head`` frame of its chain announces (its depth, ``head -
    block + 1``, shown as progress), or None when the frame says nothing new about it (another
    chain, not included yet, or no deeper). The verdict stays the daemon's: only a
    settlement's own events and reorgs make the client read the view again."""
    block, depth = view.get("block_number"), view.get("confirmations")
    if event.get("kind") != "head" or event.get("chain") != view.get("chain"):
        return None
    head = event.get("head_number")
    if not isinstance(block, int) or not isinstance(depth, int) or not isinstance(head, int):
        return None
    moved = head - block + 1
    return {**view, "confirmations": moved} if moved > depth else None


@dataclass(frozen=True)
class WaitStep:
    """What a waiting client does with one frame of the event stream (the rule both clients
    follow; each does the reading with its own I/O)."""

    read: bool
    """Read the settlement's view again: the stream just opened, or the frame concerns it."""
    shown: View | None
    """Else this view, to show as progress: a head frame moved its depth (no read needed)."""


def wait_step(event: Event, view: View | None) -> WaitStep:
    """The :class:`WaitStep` for ``event`` while waiting on ``view`` (None: not read yet)."""
    if event.get("opened") or (view is not None and (concerns(event, view) or unseen(event, view))):
        return WaitStep(True, None)
    return WaitStep(False, None if view is None else at_head(event, view))


def wait_over(view: View | None, deadline: float | None, now: float) -> bool:
    """Whether a wait ends: its view is terminal, or its deadline has passed."""
    terminal = view is not None and view["verdict"] in TERMINAL
    return terminal or (deadline is not None and now >= deadline)


def last_event_id(events: list[Event]) -> int:
    """The highest id among ``events`` (0 for none): where a stream of what follows starts."""
    return max((int(e["id"]) for e in events), default=0)
