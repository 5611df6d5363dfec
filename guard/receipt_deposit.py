"""Body of the failure receipt of a deposit whose transfer was reorged out.

A deposit (settlement kind ``evm_deposit``, :mod:`guard.deposit`) that a reorg took out and
no block included again by its deadline ends ``SETTLEMENT_FAILED`` on evidence
``reorged_out``. Its ``settlement_failure_receipt`` is the payment layout
(:mod:`guard.receipt_payment`: ``tx_hash`` derived from the settlement id, a ``payment``
section with the terms and nothing counted) with:

* ``failure``: ``{"reason": "reorged_out", "transfer": {...}}``, the transfer as it was
  seen (its tx, the block number and hash it was seen in, log index, sender, value: the
  decision's evidence names it the same way);
* ``timeout``: the deadline's terms, as in a timeout signature (the deadline is proven by
  its arithmetic, the head at the deadline by two linked headers around it);
* ``proof``: ``head_at_deadline``, ``next_header``, and the header chain at the deadline
  from the transfer's height (or the head at the deadline, if lower) up to that head: it
  holds another block at that height, so the block the transfer was seen in is not on it.

That the tx was not included again anywhere up to the deadline cannot be proven by a few
headers (an absence); the verifier states it as the signer's claim. guard/verify_deposit.py
checks the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from guard.deposit import REORGED_OUT
from guard.header_chain import encode_header_chain
from guard.payment import PaymentSpec
from guard.receipt_bodies import TimeoutTerms, decided
from guard.receipt_format import FAILURE, Subject
from guard.receipt_payment import payment_json


def reorged_out_body(
    subject: Subject,
    issued_at: int,
    decision: Mapping[str, Any],
    spec: PaymentSpec,
    lost: Mapping[str, Any],
    terms: TimeoutTerms,
    headers: Sequence[Mapping[str, str]],
    next_header: Mapping[str, str] | None,
    observed_by: Sequence[str],
    dependent_state_digest: str | None,
    compact_headers: bool = False,
) -> dict[str, Any]:
    """Body of a deposit's ``settlement_failure_receipt`` (see the module doc): ``headers``
    is the chain at the deadline, its last one the head at the deadline; ``lost`` the
    transfer as seen (the evidence's ``reorged``: :data:`guard.deposit.LOST_KEYS`)."""
    chain: dict[str, Any] = (
        {"header_chain": encode_header_chain(headers)}
        if compact_headers
        else {"headers": [dict(h) for h in headers]}
    )
    return {
        **subject.head(FAILURE, issued_at),
        **decided(decision, dependent_state_digest),
        "payment": payment_json(spec, []),
        "failure": {"reason": REORGED_OUT, "transfer": dict(lost)},
        "timeout": terms.as_json(observed_by),
        "proof": {
            "head_at_deadline": dict(headers[-1]),
            "next_header": None if next_header is None else dict(next_header),
            **chain,
        },
    }
