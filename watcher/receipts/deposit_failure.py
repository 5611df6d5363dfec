"""The failure receipt of a deposit reorged out and not included again by its deadline.

The decision (guard/deposit.py) names the transfer as it was seen and the deadline; this
module fetches what proves the rest: the head at the deadline (the last block stamped at or
before it, and its child) and the header chain at the deadline from the transfer's height up
to that head, which holds another block at that height (guard/receipt_deposit.py puts them
in place, guard/verify_deposit.py checks them). A node that has no such chain yet, or moves
while it is read, raises :class:`~chains.proofs.BranchMoved`: the receipt waits and retries.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from chains.proofs import BranchMoved, ProofUnavailable, head_at
from chains.rpc import RpcClient
from guard.headers import header_hash, header_json
from guard.payment import PaymentSpec
from guard.receipt_deposit import reorged_out_body
from guard.receipt_format import Subject
from watcher.config.chains import ChainConfig
from watcher.receipts.terms import timeout_terms
from watcher.store import SettlementRecord


def chain_at_deadline(
    client: RpcClient, deadline: int, height: int
) -> tuple[list[dict[str, str]], dict[str, str] | None]:
    """(the linked headers from ``height`` — or the head at the deadline, if lower — up to
    the head at ``deadline``, that head's child if there is one)."""
    head, child = head_at(client, deadline)
    if head is None:
        raise BranchMoved(f"no block is stamped at or before the deadline {deadline} yet")
    top = int(str(head["number"]), 16)
    first = min(height, top)
    raws = client.raw_blocks(list(range(first, top + 1)))
    if any(raw is None for raw in raws):
        raise BranchMoved(f"the node has no block in {first}..{top}: waiting")
    headers = [header_json(raw) for raw in raws if raw is not None]
    if headers[-1]["hash"] != head["hash"]:
        raise BranchMoved(f"block {top} is no longer {head['hash']}: the chain moved, waiting")
    for below, above in itertools.pairwise(headers):
        if above["parentHash"] != below["hash"]:
            raise BranchMoved(f"block {above['number']} does not link: the node switched branch")
    for header in headers:
        if header_hash(header) != header["hash"]:
            raise ProofUnavailable(f"block {header['hash']}: its fields do not hash to its hash")
    return headers, None if child is None else dict(child)


def reorged_out_receipt(
    chain: ChainConfig,
    client: RpcClient,
    rec: SettlementRecord,
    subject: Subject,
    now: int,
    state: str | None,
    observed_by: list[str],
    spec: PaymentSpec,
) -> dict[str, Any]:
    """The body of ``rec``'s ``settlement_failure_receipt`` (see the module doc)."""
    decision = rec.decision
    facts: Mapping[str, Any] = (decision.get("evidence") or {}).get("facts") or {}
    lost = dict(facts["reorged"])
    terms = timeout_terms(rec, chain)
    headers, child = chain_at_deadline(client, rec.deadline, int(lost["block_number"]))
    return reorged_out_body(
        subject,
        max(now, rec.deadline, terms.decided_at),
        decision,
        spec,
        lost,
        terms,
        headers,
        child,
        observed_by,
        state,
        compact_headers=chain.receipt_headers == "compact",
    )
