"""``AsyncFinalityClient``: the same calls as :class:`~watcher.client.sync_client.FinalityClient`
for asyncio programs (agents, async backends), with the same SSE-based ``wait``."""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
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

AsyncProgress = Callable[[View], Awaitable[None] | None]
"""Called (and awaited, if it returns an awaitable) with each view a wait reads."""


class AsyncFinalityClient:
    """An asyncio client of one finality daemon; see the sync client for every method."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 15.0,
        http: httpx.AsyncClient | None = None,
        token: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base = base_url.rstrip("/")
        self.http = http or httpx.AsyncClient(base_url=self.base, timeout=timeout)
        self.http.headers.update(common.auth_headers(token))  # never logged or shown
        self.clock = clock

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.http.aclose()

    async def __aenter__(self) -> AsyncFinalityClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Any route: its JSON answer."""
        try:
            response = await self.http.request(
                method, path, **common.with_json_body(method, kwargs)
            )
        except httpx.HTTPError as exc:
            raise common.unreachable(self.base, exc) from None
        return common.answer(self.base, response)

    async def chains(self) -> list[dict[str, Any]]:
        """The chains the daemon follows."""
        return list(await self.request("GET", "/v1/chains"))

    async def register(
        self,
        chain: str | None = None,
        tx_hash: str | None = None,
        **opts: Unpack[RegistrationOptions],
    ) -> View:
        """Register a tx or (``kind``/``ref``) a payment or job; idempotent (see
        ``FinalityClient.register``)."""
        body = common.registration(chain, tx_hash, **opts)
        return dict(await self.request("POST", "/v1/settlements", json=body))

    async def register_payment(
        self, chain: str, to: str, asset: str, amount: int | str, **opts: Unpack[PaymentOptions]
    ) -> View:
        """Register a payment to an address (see ``FinalityClient.register_payment``)."""
        body = common.payment_registration(chain, to, asset, amount, **opts)
        return dict(await self.request("POST", "/v1/settlements", json=body))

    async def subscribe(
        self, chain: str, addresses: list[str], assets: list[str], **opts: Any
    ) -> View:
        """Watch addresses for deposits (see ``FinalityClient.subscribe``)."""
        body = common.subscription_body(chain, addresses, assets, **opts)
        return dict(await self.request("POST", "/v1/subscriptions", json=body))

    async def deposits(self, subscription_id: str, **filters: str | int | None) -> dict[str, Any]:
        """One page of a subscription's deposits (``verdict``, ``cursor``, ``limit``)."""
        params = {k: v for k, v in filters.items() if v is not None}
        path = f"/v1/subscriptions/{subscription_id}/deposits"
        return dict(await self.request("GET", path, params=params))

    async def create_invoice(
        self, chain: str, asset: str, amount: int | str, expires_in_s: float, **opts: Any
    ) -> View:
        """An invoice at a fresh address (see ``FinalityClient.create_invoice``)."""
        body = common.invoice_body(chain, asset, amount, expires_in_s, **opts)
        return dict(await self.request("POST", "/v1/invoices", json=body))

    async def invoice(self, invoice_id: str) -> View:
        """An invoice's view."""
        return dict(await self.request("GET", f"/v1/invoices/{invoice_id}"))

    async def get(self, settlement_id: str) -> View:
        """One settlement's view."""
        return dict(await self.request("GET", f"/v1/settlements/{settlement_id}"))

    async def check(self, chain: str, tx_hash: str, *, confirmations: int | None = None) -> View:
        """Where any tx hash stands on ``chain``, registered or not."""
        params = {"confirmations": confirmations} if confirmations else None
        path = f"/v1/chains/{chain}/txs/{tx_hash}"
        return dict(await self.request("GET", path, params=params))

    async def signers(self) -> list[SignerView]:
        """The daemon's receipt-signing addresses (see ``FinalityClient.signers``)."""
        return [SignerView.model_validate(s) for s in await self.request("GET", "/v1/signers")]

    async def receipt(self, settlement_id: str, *, wait_s: float | None = None) -> dict[str, Any]:
        """The settlement's signed receipt; ``wait_s``: wait for it (see the sync client)."""
        path = f"/v1/settlements/{settlement_id}/receipt"
        get = functools.partial(self.request, "GET", path)
        return await receipt_wait.receipt_async(get, self.clock, self.http.timeout.read, wait_s)

    async def settlements(self, **filters: str | int | None) -> SettlementPage:
        """One page of registered settlements, typed (see the sync client)."""
        params = {k: v for k, v in filters.items() if v is not None}
        body = await self.request("GET", "/v1/settlements", params=params)
        return SettlementPage.model_validate(body)

    async def register_batch(self, items: list[dict[str, Any]]) -> BatchResponse:
        """Up to 1,000 registrations in one store transaction; a typed result per item."""
        body = await self.request("POST", "/v1/settlements/batch", json={"items": items})
        return BatchResponse.model_validate(body)

    async def settlement_events(self, settlement_id: str) -> list[Event]:
        """The events recorded for one settlement, oldest first."""
        return list(await self.request("GET", f"/v1/settlements/{settlement_id}/events"))

    async def events(
        self, after: int = 0, *, follow: bool = False, limit: int = 100
    ) -> AsyncIterator[Event]:
        """Events after id ``after`` (stored ones; with ``follow`` the live stream, resumed
        with ``Last-Event-ID`` across reconnects)."""
        if not follow:
            while True:
                params = {"after": after, "limit": limit}
                page = await self.request("GET", "/v1/events", params=params)
                for event in page:
                    yield event
                if len(page) < limit:
                    return
                after = common.last_event_id(page)
        while True:
            async for event in self._stream(after, None):
                after = int(event["id"])
                yield event

    async def wait(
        self,
        settlement_id: str,
        *,
        timeout_s: float | None = None,
        on_progress: AsyncProgress | None = None,
    ) -> View:
        """The view once terminal, or the current view once ``timeout_s`` has passed."""
        deadline = None if timeout_s is None else self.clock() + timeout_s
        cursor = common.last_event_id(await self.settlement_events(settlement_id))
        while True:
            parser = FrameParser(last_id=cursor)
            view: View | None = None
            async for event in self._stream(cursor, deadline, parser, opened=True, heads=True):
                step = common.wait_step(event, view)
                if step.read:
                    view = await self._read(settlement_id, on_progress)
                elif step.shown is not None:
                    view = await self._shown(step.shown, on_progress)
                if common.wait_over(view, deadline, self.clock()):
                    break
            cursor = parser.last_id or cursor
            if common.wait_over(view, deadline, self.clock()):
                return view if view is not None else await self.get(settlement_id)

    # -- workflows (docs/workflows.md; the requests are watcher.client.workflows') -------------

    async def start_workflow(
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
        return dict(await self.request(method, path, **kw))

    async def begin_step(
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
        return dict(await self.request(method, path, **kw))

    async def complete_step(
        self,
        workflow_id: str,
        step: str,
        fencing_token: int,
        *,
        side_effects: Mapping[str, Any] | None = None,
    ) -> View:
        """Mark an in-flight ``step`` completed with what it committed."""
        method, path, kw = wf.complete(workflow_id, step, fencing_token, side_effects)
        return dict(await self.request(method, path, **kw))

    async def renew_workflow_lease(self, workflow_id: str, fencing_token: int) -> View:
        """Renew the lease (409 once the token is stale)."""
        method, path, kw = wf.renew(workflow_id, fencing_token)
        return dict(await self.request(method, path, **kw))

    async def release_workflow(self, workflow_id: str, fencing_token: int) -> View:
        """Hand the workflow off now: a successor may take over at once."""
        method, path, kw = wf.release(workflow_id, fencing_token)
        return dict(await self.request(method, path, **kw))

    async def take_over_workflow(self, workflow_id: str, holder: str, lease_s: float) -> View:
        """Take over a released or lapsed workflow: verdict, directive, ``fencing_token``,
        ``recovery`` per in-flight step, the four ``receipts``. While the lease is live:
        :class:`~watcher.client.errors.Rejected` (409) whose ``body`` names the holder."""
        method, path, kw = wf.take_over(workflow_id, holder, lease_s)
        return dict(await self.request(method, path, **kw))

    async def get_workflow(self, workflow_id: str) -> View:
        """One workflow's view, its in-flight steps' ``recovery`` resolved now."""
        method, path, kw = wf.get(workflow_id)
        return dict(await self.request(method, path, **kw))

    async def workflows(self, *, cursor: str | None = None, limit: int | None = None) -> View:
        """One page of the caller's workflows (``items``, ``next_cursor``)."""
        method, path, kw = wf.page(cursor, limit)
        return dict(await self.request(method, path, **kw))

    async def _read(self, settlement_id: str, on_progress: AsyncProgress | None) -> View:
        return await self._shown(await self.get(settlement_id), on_progress)

    @staticmethod
    async def _shown(view: View, on_progress: AsyncProgress | None) -> View:
        """``view``, after handing it to ``on_progress`` (awaited when it is a coroutine)."""
        if on_progress is not None:
            result = on_progress(view)
            if result is not None:
                await result
        return view

    async def _stream(
        self,
        after: int,
        deadline: float | None,
        parser: FrameParser | None = None,
        *,
        opened: bool = False,
        heads: bool = False,
    ) -> AsyncIterator[Event]:
        """One connection of the event stream (see the sync client's ``_stream``)."""
        parser = parser or FrameParser(last_id=after)
        read_s = 30.0 if deadline is None else max(0.05, min(30.0, deadline - self.clock()))
        headers = {**common.SSE_HEADERS, "Last-Event-ID": str(after)}
        timeout = httpx.Timeout(10.0, read=read_s)
        try:
            async with self.http.stream(
                "GET",
                "/v1/events",
                headers=headers,
                params={"heads": "true"} if heads else None,
                timeout=timeout,
            ) as response:
                if response.status_code != 200:
                    text = (await response.aread()).decode()
                    raise common.stream_error(self.base, response, text)
                if opened:
                    yield {"opened": True}
                async for line in response.aiter_lines():
                    event = parser.feed(line)
                    if event is not None:
                        yield event
        except httpx.ReadTimeout:
            return
        except ClientError:
            raise
        except httpx.HTTPError as exc:
            raise common.unreachable(self.base, exc) from None
