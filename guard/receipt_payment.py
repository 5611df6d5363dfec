"""Bodies of the receipts about a payment to an address (settlement kind ``evm_payment``).

A payment has no one tx: it is final when the final transfers of ``asset`` to ``to`` add up
to ``amount`` (guard/payment.py decides). Its receipts are the usual decision kinds
(``settlement_finality_receipt``, ``async_settlement_timeout_signature``) with one more
section, ``payment`` (``{"kind": "evm_payment", "version": 1, ...}``: the terms and the
counted transfers), so every existing receipt and verifier path stays exactly as it was:

* the finality receipt proves **each** counted transfer: its tx and receipt by Merkle-Patricia
  proof under the roots of its block (as an ``evm_tx`` inclusion is proven), and for a token
  its ``Transfer`` log by position in the proven receipt, every block in one header chain
  that runs from the first transfer's block up (``proof.transfers[i]`` goes with
  ``payment.transfers[i]``);
* the timeout receipt is the usual timeout signature plus the ``payment`` section
  (:func:`payment_json`): what was paid before the deadline (the signer's word: a partial
  payment is the caller's to refund).

Builders are pure (watcher/receipts/payment.py fetches); guard/payment_proof.py verifies;
docs/receipts.md documents every field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from guard.hashing import keccak256
from guard.header_chain import encode_header_chain
from guard.payment import PAYMENT_KIND, PaymentSpec, Transfer
from guard.receipt_bodies import FinalityBasis, decided
from guard.receipt_format import FINALITY, Subject

PAYMENT_VERSION = 1
"""``payment.version``: the only layout of the section this code writes and reads."""


def payment_tx_hash(settlement_id: str) -> str:
    """The 32-byte ``tx_hash`` of a payment's receipts (the EIP-712 message needs one, and a
    payment has no one tx): 0x keccak256 of ``evm_payment:`` + the settlement id."""
    return "0x" + keccak256(f"{PAYMENT_KIND}:{settlement_id}".encode()).hex()


@dataclass(frozen=True)
class TransferProof:
    """The proof of one counted transfer, in its block of the header chain."""

    receipt_proof: Sequence[str]
    """Trie nodes (0x hex RLP) from the block's ``receiptsRoot`` to the tx's receipt."""
    transaction_proof: Sequence[str]
    """Trie nodes from ``transactionsRoot`` to the signed tx."""
    log_position: int | None
    """The ``Transfer`` log's position in that receipt's logs (ERC-20); None for native.
    (``payment.transfers[i].log_index`` is the block-wide index JSON-RPC reports.)"""

    def as_json(self) -> dict[str, Any]:
        """One entry of ``proof.transfers``."""
        return {
            "receipt_proof": list(self.receipt_proof),
            "transaction_proof": list(self.transaction_proof),
            "log_position": self.log_position,
        }


@dataclass(frozen=True)
class PaymentProof:
    """The transfers a finality rests on, their proofs, and one header chain over them."""

    headers: Sequence[Mapping[str, str]]
    """Header objects, the first transfer's block first, each the parent of the next, up to
    the confirming head."""
    transfers: Sequence[Transfer]
    """The counted final transfers, in chain order."""
    proofs: Sequence[TransferProof]
    """One per transfer, in the same order."""
    compact_headers: bool = False
    """Carry the headers as ``header_chain`` (guard/header_chain.py) instead of a list."""

    def as_json(self) -> dict[str, Any]:
        """The ``proof`` object of a payment finality body."""
        if self.compact_headers:
            chain: dict[str, Any] = {"header_chain": encode_header_chain(self.headers)}
        else:
            chain = {"headers": [dict(h) for h in self.headers]}
        return {**chain, "transfers": [p.as_json() for p in self.proofs]}

    def depth(self) -> int:
        """Depth of the latest transfer's block under the last header (its confirmations)."""
        top = int(str(self.headers[-1]["number"]), 16)
        return top - max(t.block_number for t in self.transfers) + 1


def transfer_json(transfer: Transfer) -> dict[str, Any]:
    """One entry of ``payment.transfers`` (the value as a decimal string)."""
    return {
        "tx_hash": transfer.tx_hash,
        "block_number": transfer.block_number,
        "block_hash": transfer.block_hash,
        "tx_index": transfer.tx_index,
        "log_index": transfer.log_index,
        "from": transfer.sender,
        "value": str(transfer.value),
    }


def payment_json(spec: PaymentSpec, transfers: Sequence[Transfer]) -> dict[str, Any]:
    """The ``payment`` section: the terms, the transfers and what they add up to."""
    paid = sum(t.value for t in transfers)
    return {
        "kind": PAYMENT_KIND,
        "version": PAYMENT_VERSION,
        "to": spec.to,
        "asset": spec.asset,
        "amount": str(spec.amount),
        "from": spec.sender,
        "paid": str(paid),
        "remaining": str(max(0, spec.amount - paid)),
        "transfers": [transfer_json(t) for t in transfers],
    }


def payment_finality_body(
    subject: Subject,
    issued_at: int,
    decision: Mapping[str, Any],
    spec: PaymentSpec,
    proof: PaymentProof,
    basis: FinalityBasis,
    dependent_state_digest: str | None,
) -> dict[str, Any]:
    """Body of a ``settlement_finality_receipt`` for a payment's FINALITY_CONFIRMED
    ``decision``; ``finality.confirmations`` is the depth of the latest transfer."""
    return {
        **subject.head(FINALITY, issued_at),
        **decided(decision, dependent_state_digest),
        "payment": payment_json(spec, proof.transfers),
        "finality": basis.as_json(proof.depth()),
        "proof": proof.as_json(),
    }
