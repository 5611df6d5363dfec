"""What a registration must look like before anything is stored: the chain body of
``POST /v1/settlements``, and the checks every registration shares (its chain, its depth, its
timeout, its dependent state and commit URL), written once for transactions, payments,
subscriptions, invoices and source settlements."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from guard.canonical import CanonicalError, canonical_json
from watcher.api.commit_url import check_commit_url
from watcher.api.deps import ApiDeps
from watcher.api.errors import ApiError
from watcher.api.models.limits import shape_problem
from watcher.api.models.settlements import SettlementRequest
from watcher.api.sender_facts import FieldProblem, sender_facts
from watcher.api.views import chain_or_error
from watcher.config.chains import ChainConfig
from watcher.settlements import ANONYMOUS_OWNER, Registration, differing_terms, new_settlement
from watcher.store import NewSettlement, SettlementRecord

__all__ = [
    "MAX_DEPENDENT_STATE_BYTES",
    "ChainTerms",
    "SettlementRequest",
    "check_confirmations",
    "check_delivery",
    "check_dependent_state",
    "checked_chain_terms",
    "checked_settlement",
    "same_terms",
]

MAX_DEPENDENT_STATE_BYTES = 64 * 1024
"""Default largest ``dependent_state``; the limit applied is ``[delivery]
max_dependent_state_bytes``."""


def check_dependent_state(state: object, limit: int, name: str = "dependent_state") -> None:
    """Refuse dependent state that is not a JSON object, has NaN or Infinity, is over
    ``limit`` bytes (413, with the limit), or has no canonical JSON form (a float: its
    digest is signed into the binding receipt); raises :class:`ApiError`. ``name`` is the
    field named (a workflow step's ``side_effects`` are bounded the same way)."""
    if not isinstance(state, dict):
        raise ApiError(422, f"{name}: must be a JSON object", fields=[name])
    problem = shape_problem(state, name)  # what is stored must read back
    if problem is not None:
        raise ApiError(422, problem, fields=[name])
    try:
        encoded = json.dumps(state, separators=(",", ":"), allow_nan=False)
    except ValueError:
        raise ApiError(
            422, f"{name}: must be JSON without NaN or Infinity", fields=[name]
        ) from None
    size = len(encoded.encode())
    if size > limit:
        raise ApiError(413, f"{name}: {size} bytes is over the limit of {limit} bytes", limit=limit)
    try:
        canonical_json(state)
    except CanonicalError as exc:
        message = str(exc).replace("$", name, 1)
        raise ApiError(422, message, fields=[name]) from None


def check_delivery(deps: ApiDeps, dependent_state: object | None, commit_url: str | None) -> None:
    """What the daemon is asked to deliver: the dependent state (when given) within the
    configured size and canonical, then the commit URL allowed; raises :class:`ApiError`."""
    if dependent_state is not None:
        check_dependent_state(dependent_state, deps.config.delivery.max_dependent_state_bytes)
    check_commit_url(deps, commit_url)


def check_confirmations(chain: ChainConfig, confirmations: int | None) -> None:
    """A 422 naming ``confirmations`` when it is not below the chain's header window (the
    headers a receipt is built from are kept that deep)."""
    window = chain.resolved_header_window
    if confirmations is not None and confirmations >= window:
        raise ApiError(
            422,
            f"confirmations: must be below the header window of chain {chain.name!r} "
            f"({window}), got {confirmations}",
            fields=["confirmations"],
        )


@dataclass(frozen=True)
class ChainTerms:
    """The terms every registration on a chain shares, checked."""

    chain: ChainConfig
    """The configured chain named by the request."""
    timeout_s: float | None
    """The timeout asked for, capped at the chain's max wait (None: the chain's default)."""


def checked_chain_terms(
    deps: ApiDeps,
    chain_name: str,
    confirmations: int | None,
    timeout_s: float | None,
    dependent_state: object | None,
    commit_url: str | None,
) -> ChainTerms:
    """Check what a transaction and a payment registration share, in the order a caller
    reads its errors: the chain is known, ``confirmations`` below its header window, then the
    delivery (:func:`check_delivery`). A timeout over the policy's max wait is capped (the
    deadline would be the same; capping also keeps a huge value from overflowing the stored
    milliseconds)."""
    chain = chain_or_error(deps, chain_name, 422)
    check_confirmations(chain, confirmations)
    if timeout_s is not None and timeout_s > chain.max_wait_s:
        timeout_s = chain.max_wait_s
    check_delivery(deps, dependent_state, commit_url)
    return ChainTerms(chain, timeout_s)


def checked_settlement(
    deps: ApiDeps, body: SettlementRequest, owner: str = ANONYMOUS_OWNER
) -> NewSettlement:
    """The row a valid chain registration stores, checked against its chain (known,
    confirmations below the header window, timeout capped at the policy's max wait,
    dependent state, sender facts); raises :class:`ApiError` naming the field. The row is
    ``owner``'s (the caller's name)."""
    terms = checked_chain_terms(
        deps, body.chain, body.confirmations, body.timeout_s, body.dependent_state, body.commit_url
    )
    try:
        known = sender_facts(body.tx_hash, body.sender, body.nonce, body.raw_tx)
    except FieldProblem as exc:
        raise ApiError(422, str(exc), fields=[exc.field]) from None
    registration = Registration(
        chain=terms.chain,
        tx_hash=body.tx_hash,
        confirmations=body.confirmations,
        timeout_s=terms.timeout_s,
        dependent_state=body.dependent_state,
        commit_url=body.commit_url,
        sender=known.sender,
        nonce=known.nonce,
        raw_tx=known.raw_tx,
        owner=owner,
    )
    new = new_settlement(registration, deps.clock())
    # ``replace`` copies every field: a fifth of this function's time in a batch of 1,000.
    return replace(new, provisional=True) if body.provisional else new


def same_terms(stored: SettlementRecord, new: NewSettlement) -> None:
    """A repeated registration must ask for the stored settlement's terms: else a 409
    :class:`ApiError` naming each field that differs (the stored settlement is unchanged;
    its id is in the answer)."""
    fields = differing_terms(stored, new)
    if fields:
        raise ApiError(
            409,
            f"{', '.join(fields)}: settlement {stored.settlement_id} is already registered "
            f"with other {', '.join(fields)} (its terms are in GET /v1/settlements/"
            f"{stored.settlement_id}); repeat it with the same terms",
            fields=fields,
            settlement_id=stored.settlement_id,
        )
