"""``FinalityClient``: the daemon's HTTP API for a backend, in plain blocking calls.

``wait`` follows ``GET /v1/events`` (Server-Sent Events) instead of polling: it subscribes
from the settlement's last known event, then reads the settlement once (so nothing that
happened between the read and the subscription is lost), re-reads it only when an event
concerns it (its own, or a reorg on its chain), and again once after every reconnect.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import httpx

from watcher.api.models.settlements import BatchResponse, SettlementPage
from watcher.api.models.views import SignerView
from watcher.client import common, receipt_wait
from watcher.client import workflows as wf
from watcher.client.common import Event, PaymentOptions, RegistrationOptions, View
from watcher.client.errors import ClientError
from watcher.client.sse import FrameParser

if TYPE_CHECKING:
    from typing_extensions import Unpack  # typing.Unpack from Python 3.12

Progress = Callable[[View], None]
"""Called with the settlement view each time a wait reads it."""


class FinalityClient:
    """A blocking client of one finality daemon (``base_url`` such as ``http://127.0.0.1:8710``).

    ``token`` is the bearer token of one ``[[api.tokens]]`` caller, sent on every request
    (``Authorization: Bearer``; a daemon without tokens ignores it). Every method raises
    :class:`~watcher.client.errors.Rejected` for a 4xx answer (bad input, unknown id, 401
    no valid token, 403 a scope missing) and :class:`~watcher.client.errors.Unreachable`
    when there is no answer."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 15.0,
        http: httpx.Client | None = None,
        token: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base = base_url.rstrip("/")
        self.http = http or httpx.Client(base_url=self.base, timeout=timeout)
        self.http.headers.update(common.auth_headers(token))  # never logged or shown
        self.clock = clock
        """Monotonic seconds; a wait's deadline is measured on it (tests inject their own)."""

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()

    def __enter__(self) -> FinalityClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Any route: its JSON answer (the typed methods below are built on this)."""
        try:
            response = self.http.request(method, path, **common.with_json_body(method, kwargs))
        except httpx.HTTPError as exc:
            raise common.unreachable(self.base, exc) from None
        return common.answer(self.base, response)

    def chains(self) -> list[dict[str, Any]]:
        """The chains the daemon follows (``GET /v1/chains``)."""
        return list(self.request("GET", "/v1/chains"))

    def register(
        self,
        chain: str | None = None,
        tx_hash: str | None = None,
        **opts: Unpack[RegistrationOptions],
    ) -> View:
        """Register a tx (``chain``, ``tx_hash``) or, with ``kind``/``ref``, a payment or job.

        Options (typed: :class:`~watcher.client.common.RegistrationOptions`): ``confirmations``,
        ``timeout_s``, ``dependent_state``, ``commit_url``, ``provisional``, ``sender`` and
        ``nonce``, ``raw_tx``, ``kind``, ``ref``, ``source``. Idempotent on (chain, tx hash):
        the existing view."""
        body = common.registration(chain, tx_hash, **opts)
        return dict(self.request("POST", "/v1/settlements", json=body))

    def register_payment(
        self, chain: str, to: str, asset: str, amount: int | str, **opts: Unpack[PaymentOptions]
    ) -> View:
        """Register a payment of ``amount`` base units of ``asset`` (``"native"`` or a token
        contract) to ``to``: final once final transfers add up to it (docs/api.md).

        Options: ``sender`` (only transfers from it count), ``reference`` (idempotency key:
        the same payment again; without it every call is a new payment), ``confirmations``,
        ``timeout_s``, ``dependent_state``, ``commit_url``."""
        body = common.payment_registration(chain, to, asset, amount, **opts)
        return dict(self.request("POST", "/v1/settlements", json=body))

    def subscribe(self, chain: str, addresses: list[str], assets: list[str], **opts: Any) -> View:
        """Watch ``addresses`` for transfers of ``assets`` (``"native"``, token contracts);
        each becomes a deposit (docs/deposits.md). Options: ``confirmations``,
        ``commit_url``, ``reference``."""
        body = common.subscription_body(chain, addresses, assets, **opts)
        return dict(self.request("POST", "/v1/subscriptions", json=body))

    def unsubscribe(self, subscription_id: str) -> View:
        """Stop a subscription (deposits already seen still go to final)."""
        return dict(self.request("DELETE", f"/v1/subscriptions/{subscription_id}"))

    def deposits(self, subscription_id: str, **filters: str | int | None) -> dict[str, Any]:
        """One page of a subscription's deposits (``verdict``, ``cursor``, ``limit``)."""
        params = {k: v for k, v in filters.items() if v is not None}
        path = f"/v1/subscriptions/{subscription_id}/deposits"
        return dict(self.request("GET", path, params=params))

    def create_invoice(
        self, chain: str, asset: str, amount: int | str, expires_in_s: float, **opts: Any
    ) -> View:
        """An invoice at a fresh address (docs/invoices.md). Options: ``reference``,
        ``dependent_state``, ``commit_url``."""
        body = common.invoice_body(chain, asset, amount, expires_in_s, **opts)
        return dict(self.request("POST", "/v1/invoices", json=body))

    def invoice(self, invoice_id: str) -> View:
        """An invoice's view: its state, address, payment URI, what was paid."""
        return dict(self.request("GET", f"/v1/invoices/{invoice_id}"))

    def accept_invoice(self, invoice_id: str) -> View:
        """Accept a late payment (state ``paid_late``): the invoice becomes ``settled``."""
        return dict(self.request("POST", f"/v1/invoices/{invoice_id}/accept"))

    def get(self, settlement_id: str) -> View:
        """One settlement's view (``GET /v1/settlements/{id}``)."""
        return dict(self.request("GET", f"/v1/settlements/{settlement_id}"))

    def check(self, chain: str, tx_hash: str, *, confirmations: int | None = None) -> View:
        """Where any tx hash stands on ``chain``, registered or not."""
        params = {"confirmations": confirmations} if confirmations else None
        return dict(self.request("GET", f"/v1/chains/{chain}/txs/{tx_hash}", params=params))

    def signers(self) -> list[SignerView]:
        """The daemon's receipt-signing addresses (``GET /v1/signers``), current first, then
        the retired ones: pin them once and pass them to :func:`verify` as ``signers=``."""
        return [SignerView.model_validate(s) for s in self.request("GET", "/v1/signers")]

    def receipt(self, settlement_id: str, *, wait_s: float | None = None) -> dict[str, Any]:
        """The settlement's signed receipt, as ``finality verify`` and :func:`verify` take it;
        ``wait_s``: have it the moment it is signed, whatever the verdict now (``?wait=``).
        :class:`Rejected` (404, ``.body["verdict"]``) while there is none (after ``wait_s``)."""
        get = functools.partial(self.request, "GET", f"/v1/settlements/{settlement_id}/receipt")
        return receipt_wait.receipt(get, self.clock, self.http.timeout.read, wait_s)

    def settlements(self, **filters: str | int | None) -> SettlementPage:
        """One page of registered settlements, typed (``chain``, ``verdict``, ``kind``,
        ``cursor`` = the previous page's ``next_cursor``, ``limit``)."""
        params = {k: v for k, v in filters.items() if v is not None}
        return SettlementPage.model_validate(self.request("GET", "/v1/settlements", params=params))

    def register_batch(self, items: list[dict[str, Any]]) -> BatchResponse:
        """Up to 1,000 registrations in one store transaction; a typed result per item."""
        body = self.request("POST", "/v1/settlements/batch", json={"items": items})
        return BatchResponse.model_validate(body)

    def settlement_events(self, settlement_id: str) -> list[Event]:
        """The events recorded for one settlement, oldest first."""
        return list(self.request("GET", f"/v1/settlements/{settlement_id}/events"))

    def events(self, after: int = 0, *, follow: bool = False, limit: int = 100) -> Iterator[Event]:
        """Events after id ``after``, oldest first. Resumable: pass the last id you handled.

        Without ``follow`` the stored ones (paged with ``limit``), then stop; with ``follow``
        the live stream, reconnecting with ``Last-Event-ID`` forever (stop iterating to end)."""
        if not follow:
            while True:
                page = self.request("GET", "/v1/events", params={"after": after, "limit": limit})
                yield from page
                if len(page) < limit:
                    return
                after = common.last_event_id(page)
        while True:
            for event in self._stream(after, None):
                after = int(event["id"])
                yield event

    def wait(
        self,
        settlement_id: str,
        *,
        timeout_s: float | None = None,
        on_progress: Progress | None = None,
    ) -> View:
        """The view once terminal, or the current view once ``timeout_s`` has passed."""
        deadline = None if timeout_s is None else self.clock() + timeout_s
        cursor = common.last_event_id(self.settlement_events(settlement_id))
        while True:
            parser = FrameParser(last_id=cursor)
            view: View | None = None
            for event in self._stream(cursor, deadline, parser, opened=True, heads=True):
                step = common.wait_step(event, view)
                if step.read:
                    view = self._read(settlement_id, on_progress)
                elif step.shown is not None:
                    view = self._shown(step.shown, on_progress)
                if common.wait_over(view, deadline, self.clock()):
                    break
            cursor = parser.last_id or cursor
            if common.wait_over(view, deadline, self.clock()):
                return view if view is not None else self.get(settlement_id)

    # -- workflows (docs/workflows.md; the requests are watcher.client.workflows') -------------

    def start_workflow(
        self,
        steps: Sequence[str],
        holder: str,
        lease_s: float,
        *,
        idempotent_steps: Sequence[str] | None = None,
        reference: str | None = None,
    ) -> View:
        """Create a workflow held by ``holder``: its view and ``lock`` (fencing token 1)."""
        method, path, kw = wf.start(steps, holder, lease_s, idempotent_steps, reference)
        return dict(self.request(method, path, **kw))

    def begin_step(
        self,
        workflow_id: str,
        step: str,
        fencing_token: int,
        operation: str,
        *,
        recovery: Mapping[str, str] | None = None,
    ) -> View:
        """Put ``step`` in flight; ``recovery``: ``{"settlement_id": ...}`` or
        ``{"idempotency_key": ...}`` (how a successor learns its real state)."""
        method, path, kw = wf.begin(workflow_id, step, fencing_token, operation, recovery)
        return dict(self.request(method, path, **kw))

    def complete_step(
        self,
        workflow_id: str,
        step: str,
        fencing_token: int,
        *,
        side_effects: Mapping[str, Any] | None = None,
    ) -> View:
        """Mark an in-flight ``step`` completed with what it committed."""
        method, path, kw = wf.complete(workflow_id, step, fencing_token, side_effects)
        return dict(self.request(method, path, **kw))

    def renew_workflow_lease(self, workflow_id: str, fencing_token: int) -> View:
        """Renew the lease (409 once the token is stale)."""
        method, path, kw = wf.renew(workflow_id, fencing_token)
        return dict(self.request(method, path, **kw))

    def release_workflow(self, workflow_id: str, fencing_token: int) -> View:
        """Hand the workflow off now: a successor may take over at once."""
        method, path, kw = wf.release(workflow_id, fencing_token)
        return dict(self.request(method, path, **kw))

    def take_over_workflow(self, workflow_id: str, holder: str, lease_s: float) -> View:
        """Take over a released or lapsed workflow: verdict, directive, ``fencing_token``,
        ``recovery`` per in-flight step, the four ``receipts``. While the lease is live:
        :class:`~watcher.client.errors.Rejected` (409) whose ``body`` names the holder."""
        method, path, kw = wf.take_over(workflow_id, holder, lease_s)
        return dict(self.request(method, path, **kw))

    def get_workflow(self, workflow_id: str) -> View:
        """One workflow's view, its in-flight steps' ``recovery`` resolved now."""
        method, path, kw = wf.get(workflow_id)
        return dict(self.request(method, path, **kw))

    def workflows(self, *, cursor: str | None = None, limit: int | None = None) -> View:
        """One page of the caller's workflows (``items``, ``next_cursor``)."""
        method, path, kw = wf.page(cursor, limit)
        return dict(self.request(method, path, **kw))

    def _read(self, settlement_id: str, on_progress: Progress | None) -> View:
        return self._shown(self.get(settlement_id), on_progress)

    @staticmethod
    def _shown(view: View, on_progress: Progress | None) -> View:
        """``view``, after handing it to ``on_progress``."""
        if on_progress is not None:
            on_progress(view)
        return view

    def _stream(
        self,
        after: int,
        deadline: float | None,
        parser: FrameParser | None = None,
        *,
        opened: bool = False,
        heads: bool = False,
    ) -> Iterator[Event]:
        """One connection of the event stream from ``after``: its events until the daemon
        ends it (or the deadline passes). ``opened``: first yield ``{"opened": True}`` once
        the daemon has accepted the subscription; ``heads``: ask for a frame at each new
        head of a chain too (a wait re-reads its settlement then: each new depth shows)."""
        parser = parser or FrameParser(last_id=after)
        read_s = 30.0 if deadline is None else max(0.05, min(30.0, deadline - self.clock()))
        headers = {**common.SSE_HEADERS, "Last-Event-ID": str(after)}
        try:
            with self.http.stream(
                "GET",
                "/v1/events",
                headers=headers,
                params={"heads": "true"} if heads else None,
                timeout=httpx.Timeout(10.0, read=read_s),
            ) as response:
                if response.status_code != 200:
                    raise common.stream_error(self.base, response, response.read().decode())
                if opened:
                    yield {"opened": True}
                for line in response.iter_lines():
                    event = parser.feed(line)
                    if event is not None:
                        yield event
        except httpx.ReadTimeout:
            return
        except ClientError:
            raise
        except httpx.HTTPError as exc:
            raise common.unreachable(self.base, exc) from None
