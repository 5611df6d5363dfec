"""``/v1/subscriptions``: standing address watches, and the deposits they saw.

A subscription watches up to 10,000 addresses a request (more through
``POST /v1/subscriptions/{id}/addresses``) for transfers of its assets, in blocks above the
head recorded when each address was added; every transfer becomes a deposit (a settlement
of kind ``evm_deposit``, owned by the subscription's caller: docs/deposits.md). Creating
one costs no call to the node. ``DELETE`` stops it; deposits already seen still go to final.
"""

from __future__ import annotations

import json
import secrets
from typing import Annotated, Any

from fastapi import APIRouter, Query

from guard.settlement import Verdict
from watcher.api.auth import Reader, Registrar
from watcher.api.cursors import CursorParam, cursor_seq
from watcher.api.deps import ApiDeps
from watcher.api.errors import ApiError
from watcher.api.models.deposits import AddressesRequest, SubscriptionRequest
from watcher.api.models.errors import ERRORS
from watcher.api.models.params import DIGITS_ONLY
from watcher.api.models.settlements import MAX_PAGE
from watcher.api.payments import payment_view
from watcher.api.registration import check_confirmations, check_delivery
from watcher.api.views import chain_or_error, head_of
from watcher.store.deposit_records import NewSubscription, SubscriptionRecord
from watcher.store.deposits_store import SubscriptionNotFound

_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: ERRORS[404], 422: ERRORS[422]}


def router(deps: ApiDeps) -> APIRouter:
    """The subscription routes over ``deps``."""
    api = APIRouter()

    @api.post("/v1/subscriptions", status_code=201, responses={422: ERRORS[422]})
    def create_subscription(caller: Registrar, body: SubscriptionRequest) -> dict[str, Any]:
        """Watch ``addresses`` for transfers of ``assets``; each becomes a deposit."""
        return _create(deps, body, caller.name)

    @api.get("/v1/subscriptions")
    def list_subscriptions(caller: Reader) -> dict[str, Any]:
        """The caller's subscriptions, oldest first."""
        return {"items": [_view(deps, sub) for sub in deps.store.subscriptions(caller.name)]}

    @api.get("/v1/subscriptions/{subscription_id}", responses=_NOT_FOUND)
    def get_subscription(caller: Reader, subscription_id: str) -> dict[str, Any]:
        """One of the caller's subscriptions."""
        return _view(deps, _owned(deps, subscription_id, caller.name))

    @api.delete("/v1/subscriptions/{subscription_id}", responses=_NOT_FOUND)
    def delete_subscription(caller: Registrar, subscription_id: str) -> dict[str, Any]:
        """Stop watching; deposits already seen still go to final."""
        _owned(deps, subscription_id, caller.name)
        return _view(deps, deps.store.stop_subscription(subscription_id, caller.name))

    @api.post("/v1/subscriptions/{subscription_id}/addresses", responses=_NOT_FOUND)
    def add_addresses(
        caller: Registrar, subscription_id: str, body: AddressesRequest
    ) -> dict[str, Any]:
        """Watch more addresses (counted above the head recorded now; repeats skipped)."""
        sub = _owned(deps, subscription_id, caller.name)
        if not sub.active:
            raise ApiError(409, f"subscription_id: {subscription_id} was deleted")
        head = head_of(deps, sub.chain)
        added = deps.store.add_subscription_addresses(
            subscription_id, caller.name, body.addresses, head
        )
        return {"added": added, **_view(deps, sub)}

    @api.get("/v1/subscriptions/{subscription_id}/deposits", responses=_NOT_FOUND)
    def list_deposits(
        caller: Reader,
        subscription_id: str,
        verdict: Annotated[Verdict | None, Query()] = None,
        cursor: CursorParam = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE), DIGITS_ONLY] = 100,
    ) -> dict[str, Any]:
        """The subscription's deposits, oldest first, a page at a time."""
        _owned(deps, subscription_id, caller.name)
        wanted = None if verdict is None else verdict.value
        records = deps.store.deposits_of(subscription_id, wanted, cursor_seq(cursor), limit)
        last = records[-1].seq if len(records) == limit else None
        return {
            "items": [payment_view(deps, rec) for rec in records],
            "next_cursor": None if last is None else str(last),
        }

    return api


def _create(deps: ApiDeps, body: SubscriptionRequest, owner: str) -> dict[str, Any]:
    """Check and store a subscription (no call to the node); its view."""
    chain = chain_or_error(deps, body.chain, 422)
    check_confirmations(chain, body.confirmations)
    check_delivery(deps, None, body.commit_url)
    new = NewSubscription(
        subscription_id="sub_" + secrets.token_hex(12),
        chain=chain.name,
        owner=owner,
        assets=tuple(body.assets),
        confirmations=body.confirmations,
        commit_url=body.commit_url,
        reference=body.reference,
        after_block=head_of(deps, chain.name),
        created_at=deps.clock(),
    )
    deps.store.create_subscription(new, body.addresses)
    return _view(deps, deps.store.subscription(new.subscription_id))


def _owned(deps: ApiDeps, subscription_id: str, owner: str) -> SubscriptionRecord:
    try:
        return deps.store.subscription(subscription_id, owner)
    except SubscriptionNotFound:
        raise ApiError(
            404, f"subscription_id: no subscription {subscription_id}", fields=["subscription_id"]
        ) from None


def _view(deps: ApiDeps, sub: SubscriptionRecord) -> dict[str, Any]:
    return {
        "subscription_id": sub.subscription_id,
        "chain": sub.chain,
        "assets": json.loads(sub.assets),
        "addresses": deps.store.address_count(sub.subscription_id),
        "confirmations": sub.confirmations,
        "commit_url": sub.commit_url,
        "reference": sub.reference,
        "active": sub.active,
        "created_at": sub.created_at,
        "counted_after_block": sub.after_block,
    }
