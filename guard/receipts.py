"""The signed receipt format (version 1): its kinds, its fields, and how a body is sealed.

A receipt is one JSON object. All of it but the two trailer fields is the **body**; the
trailer is ``digest`` (``sha256:`` + SHA-256 of the body's canonical JSON, its stable id)
and ``signature`` (65 bytes r || s || v, EIP-712 over :mod:`guard.eip712`'s message, whose
``bodyHash`` is keccak256 of the same canonical JSON). docs/receipts.md documents every
field; :mod:`guard.verify` checks them. Every body has:

``version`` (1), ``kind``, ``settlement_id``, ``chain`` (the watcher's name for it),
``chain_id``, ``tx_hash`` (the watched tx), ``issued_at`` (ms), ``signer`` (0x address).

Kinds:

``settlement_finality_receipt``
    the tx is in a block at depth >= N (headers + receipt and tx proofs; status 1).
``settlement_failure_receipt``
    the tx reverted (the same proofs, status 0), or another tx from the same sender with the
    same nonce is at depth >= N (its proofs, plus the watched tx's own signed bytes); or a
    deposit's transfer was reorged out and not included again by the deadline
    (:mod:`guard.receipt_deposit`: the header chain at the deadline).
``async_settlement_timeout_signature``
    the deadline passed without finality: deadline, policy, head block at the deadline, last
    observation.
``dependent_state_binding_receipt``
    at registration: binds the digest of the dependent state to the settlement's terms.
``receipt_revocation``
    withdraws an earlier receipt (by digest), saying why (a finality violation).

A decision of a payment or job *source* (Stripe, RQ, Celery: :mod:`guard.source`) is signed as
one of the same three decision kinds, with ``chain_id`` 0, ``tx_hash`` = keccak256 of the
source's reference, and an ``offchain`` section instead of ``finality`` and ``proof``
(:func:`offchain_body`; checked by :mod:`guard.verify_offchain`).

Builders are pure: the caller (watcher/receipts/component.py) fetches headers and proofs, the
builders put them in their place, the signer signs :func:`message_hash`, :func:`seal` adds
the trailer.

This module is the public name for the format (docs/library.md): the code lives in
:mod:`guard.receipt_format` (kinds, constants, hashing, sealing), :mod:`guard.receipt_bodies`
(chain settlements) and :mod:`guard.receipt_offchain` (sources); every name is re-exported
here and stays importable from ``guard.receipts``.
"""

from __future__ import annotations

from guard.receipt_bodies import (
    BindingTerms,
    FinalityBasis,
    InclusionProof,
    TimeoutTerms,
    binding_body,
    finality_body,
    replaced_body,
    reverted_body,
    revocation_body,
    timeout_body,
)
from guard.receipt_format import (
    BINDING,
    CLAIM_OF_BASIS,
    DECISION_KINDS,
    FAILURE,
    FINALITY,
    FINALIZED_CLAIM,
    FORMAT_VERSION,
    KINDS,
    OFFCHAIN_BOOKKEEPING,
    OFFCHAIN_CHAIN_ID,
    REVOCATION,
    SAFE_CLAIM,
    TIMEOUT,
    TRAILER,
    VERDICT_KIND,
    Subject,
    body_digest,
    body_hashes,
    body_of,
    message_hash,
    seal,
    typed_data,
)
from guard.receipt_offchain import (
    OffchainTerms,
    decision_bound,
    offchain_binding_body,
    offchain_body,
    offchain_objects,
    ref_hash,
)

__all__ = [
    "BINDING",
    "BindingTerms",
    "CLAIM_OF_BASIS",
    "DECISION_KINDS",
    "FAILURE",
    "FINALITY",
    "FINALIZED_CLAIM",
    "FORMAT_VERSION",
    "FinalityBasis",
    "InclusionProof",
    "KINDS",
    "OFFCHAIN_BOOKKEEPING",
    "OFFCHAIN_CHAIN_ID",
    "OffchainTerms",
    "REVOCATION",
    "SAFE_CLAIM",
    "Subject",
    "TIMEOUT",
    "TRAILER",
    "TimeoutTerms",
    "VERDICT_KIND",
    "binding_body",
    "body_digest",
    "body_hashes",
    "body_of",
    "decision_bound",
    "finality_body",
    "message_hash",
    "offchain_binding_body",
    "offchain_body",
    "offchain_objects",
    "ref_hash",
    "replaced_body",
    "reverted_body",
    "revocation_body",
    "seal",
    "timeout_body",
    "typed_data",
]
