"""``/v1/chains``, ``/v1/chains/{chain}/txs/{tx_hash}`` and ``/v1/reorgs``: the configured
chains and what happened on them; any tx hash, registered or not."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request

from chains import pool
from chains.errors import ChainError
from chains.finality_modes import NEEDS_FINALIZED, NEEDS_SAFE
from chains.registry import known_chain
from guard.errors import InvalidHash
from guard.hexes import parse_tx_hash
from watcher.api.auth import Reader
from watcher.api.deps import ApiDeps
from watcher.api.errors import ApiError
from watcher.api.live_limits import LiveLimits, caller_key
from watcher.api.models.errors import ERRORS
from watcher.api.models.params import DIGITS_ONLY
from watcher.api.models.settlements import TX_HASH
from watcher.api.models.views import ChainView, ReorgView, TxView
from watcher.api.views import (
    beacon_of,
    chain_or_error,
    chain_settlement_view,
    endpoints,
    shown_error,
)
from watcher.app.status import budget_json
from watcher.config.chains import ChainConfig
from watcher.config.secrets import configured_secrets
from watcher.store import ChainRecord, SettlementNotFound

MAX_LIVE_CONFIRMATIONS = 2**31 - 1
"""Largest N a live answer accepts (decisions encode integers below 2**53)."""


LiveConfirmations = Annotated[int | None, Query(ge=1, le=MAX_LIVE_CONFIRMATIONS), DIGITS_ONLY]
"""The ``confirmations`` query parameter of a live look-up."""


def router(deps: ApiDeps) -> APIRouter:
    """The chain routes over ``deps``."""
    api = APIRouter()
    live = LiveLimits.of(deps.config)

    @api.get(
        "/v1/chains/{chain}/txs/{tx_hash}",
        response_model=TxView,
        response_model_exclude_unset=True,
        responses={429: ERRORS[429]},
    )
    def get_tx(
        request: Request,
        caller: Reader,
        chain: str,
        tx_hash: Annotated[str, Path(json_schema_extra={"pattern": TX_HASH})],
        confirmations: LiveConfirmations = None,
    ) -> dict[str, Any]:
        """Verdict for any tx hash: the caller's settlement, or a live answer from the node."""
        config = chain_or_error(deps, chain)
        try:
            tx = parse_tx_hash(tx_hash)
        except InvalidHash as exc:
            raise ApiError(422, str(exc), fields=["tx_hash"]) from None
        registered = _registered_view(deps, chain, tx, caller.name)
        if registered is not None:
            return registered
        live.admit(caller_key(deps.config, caller.name, request), config)
        return _live(deps, config, tx, confirmations)

    @api.get("/v1/chains", response_model=list[ChainView], response_model_exclude_unset=True)
    def list_chains(caller: Reader) -> list[dict[str, Any]]:
        """Configured chains with their head, health and RPC use."""
        recorded = deps.store.chains()  # the heads the owners recorded, on every instance
        secrets = configured_secrets(deps.config)
        return [
            _chain_json(deps, chain, recorded.get(chain.name), secrets)
            for chain in deps.config.chains
        ]

    @api.get(
        "/v1/reorgs",
        response_model=list[ReorgView],
        response_model_exclude_unset=True,
        responses={404: ERRORS[404]},
    )
    def list_reorgs(
        caller: Reader,
        chain: str | None = None,
        limit: Annotated[int, Query(ge=1, le=1000), DIGITS_ONLY] = 100,
    ) -> list[dict[str, Any]]:
        """Reorgs seen, newest first: depth, common ancestor, the caller's touched settlements."""
        if chain is not None:
            chain_or_error(deps, chain)
        return [_reorg_json(r) for r in deps.store.reorgs(chain, limit, owner=caller.name)]

    return api


def _registered_view(deps: ApiDeps, chain: str, tx: str, owner: str) -> dict[str, Any] | None:
    """The view of ``owner``'s settlement of ``tx`` (None: it registered none; another
    caller's settlement of the tx is not shown)."""
    try:
        return chain_settlement_view(deps, deps.store.settlement_by_tx(chain, tx, owner=owner))
    except SettlementNotFound:
        return None


def _reorg_json(r: Any) -> dict[str, Any]:
    """One reorg as ``/v1/reorgs`` lists it."""
    return {
        "id": r.id,
        "chain": r.chain,
        "detected_at": r.detected_at,
        "depth": r.depth,
        "common_ancestor": {"number": r.ancestor_number, "hash": r.ancestor_hash},
        "old_head": {"number": r.old_head_number, "hash": r.old_head_hash},
        "new_head": {"number": r.new_head_number, "hash": r.new_head_hash},
        "replaced": r.replaced,
        "touched": r.touched,
        "finality_violation": r.finality_violation,
    }


def _live(deps: ApiDeps, config: ChainConfig, tx: str, confirmations: int | None) -> dict[str, Any]:
    """The live view of an unregistered tx within ``[api] live_lookup_timeout_s``; past it,
    what the store knows (the recorded head), saying the live check timed out; a 503 if
    the node failed."""
    from watcher.engine.live import LiveTimeout, live_view_within, timed_out_view

    limit = deps.config.api.live_lookup_timeout_s
    client = deps.live_clients[config.name]
    try:
        return live_view_within(limit, client, config, tx, confirmations, deps.clock())
    except ChainError as exc:
        raise ApiError(
            503,
            f"chain {config.name!r}: node unavailable for a live answer: "
            f"{shown_error(str(exc), configured_secrets(deps.config))}",
        ) from None
    except LiveTimeout as exc:
        head = deps.store.chain(config.name)
        number = head.head_number if head is not None else None
        return timed_out_view(config, tx, confirmations, number, str(exc))


def _safe_json(chain: ChainConfig, safe_number: int | None) -> dict[str, Any]:
    """Which block tags the chain's rule reads, and the ``safe`` tag's height as this
    instance's watcher last read it: a rule not on the ``safe`` tag answers no height (a
    height nobody read would be made up)."""
    mode = chain.resolved_finality
    tags: dict[str, Any] = {"finalized_followed": mode in NEEDS_FINALIZED}
    if mode not in NEEDS_SAFE:
        return {**tags, "safe_followed": False}
    return {**tags, "safe_followed": True, "safe_number": safe_number}


def _block_time(chain: ChainConfig) -> float | None:
    """The registry's block time of the chain (what a depth rule means in time); None for a
    chain the registry does not know."""
    known = known_chain(chain.chain_id)
    return None if known is None else known.block_time_s


def _beacon_endpoints(deps: ApiDeps, chain: ChainConfig) -> list[dict[str, object]]:
    """The chain's Beacon API endpoints (redacted) with their health, as its RPC ones."""
    beacon = beacon_of(deps, chain.name)
    return endpoints(chain.beacon_api, None if beacon is None else beacon.health_report())


def _chain_json(
    deps: ApiDeps, chain: ChainConfig, head: ChainRecord | None, secrets: Sequence[str]
) -> dict[str, Any]:
    """One chain as ``/v1/chains`` lists it (error texts scrubbed of ``secrets``)."""
    status = deps.status(chain.name)
    client = deps.clients[chain.name]
    report = None if deps.heads is None else deps.heads.report(chain.name)
    return {
        "name": chain.name,
        "chain_id": chain.chain_id,
        "confirmations": chain.resolved_confirmations,
        "finality": chain.resolved_finality,
        "poll_interval_s": chain.resolved_poll_interval_s,
        "head_number": head.head_number if head else None,
        "head_hash": head.head_hash if head else None,
        "finalized_number": head.finalized_number if head else None,
        **_safe_json(chain, status.safe_number),
        "block_time_s": _block_time(chain),
        "healthy": deps.healthy(chain.name),
        "lagging": status.lagging,
        "last_error": shown_error(status.health.last_error, secrets),
        "watched": status.watched,
        "rpc": endpoints(chain.rpc, pool.health_report(client)),
        "beacon_api": _beacon_endpoints(deps, chain),
        "rpc_calls": dict(client.calls),
        "budget": budget_json(deps.budgets.get(chain.name), status),
        "heads": report
        if report is not None
        else {"mode": "poll", "pacing": deps.pacing(chain.name)},
    }
