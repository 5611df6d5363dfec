"""Receipt bodies for payments to an address (settlement kind ``evm_payment``).

A payment's decision (guard/payment.py) names in its evidence the terms, the chain's head
and every counted transfer with its basis (None while not final). The builder proves what
the verdict rests on, with the block machinery of an ``evm_tx`` receipt
(watcher/receipts/builder.py: stored headers, the tracker's blocks, both tries rebuilt and
their roots checked), and refuses (:class:`~chains.proofs.BranchMoved`: wait and retry)
when the chain is no longer the one the decision saw:

* finality: the *final* transfers of the evidence, each proven in its block, all blocks in
  one header chain from the first transfer's block up to the latest's depth N (or the
  decision's head, if lower); for a token, the log's position in its receipt is its
  block-wide ``logIndex`` less the logs of the receipts before it;
* timeout: the usual timeout signature (head at the deadline) plus what was paid.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from chains.errors import ChainError
from chains.proofs import BranchMoved, ProofUnavailable, fetch_headers
from chains.rpc import RpcClient
from guard.canonical import digest
from guard.deposit import REORGED_OUT
from guard.payment import ADDRESS_KINDS, PaymentSpec, Transfer
from guard.payment_decode import receipt_logs
from guard.receipt_format import Subject
from guard.receipt_payment import (
    PaymentProof,
    TransferProof,
    payment_finality_body,
    payment_json,
    payment_tx_hash,
)
from guard.settlement import Verdict
from watcher.config.chains import ChainConfig
from watcher.receipts.attestation import attests_only, no_receipt_by_design
from watcher.receipts.builder import ReceiptBuilder
from watcher.receipts.consensus import consensus_section
from watcher.receipts.deposit_failure import reorged_out_receipt
from watcher.receipts.headers import stored_chain
from watcher.store import SettlementRecord
from watcher.store.consensus_store import consensus_store
from watcher.store.leaves_store import leaves_store
from watcher.store.payment_records import PaymentSpecRecord
from watcher.store.store import Store


def spec_of(facts: Mapping[str, Any]) -> PaymentSpec:
    """The payment's terms as its decision's evidence recorded them."""
    sender = facts.get("from")
    return PaymentSpec(
        to=str(facts["to"]),
        asset=str(facts["asset"]),
        amount=int(str(facts["amount"])),
        sender=None if sender is None else str(sender),
    )


def transfer_of(fact: Mapping[str, Any]) -> Transfer:
    """One transfer of the evidence (guard.payment.transfer_facts)."""
    log_index = fact.get("log_index")
    return Transfer(
        tx_hash=str(fact["tx_hash"]),
        block_number=int(fact["block_number"]),
        block_hash=str(fact["block_hash"]),
        tx_index=int(fact["tx_index"]),
        log_index=None if log_index is None else int(log_index),
        sender=str(fact["from"]),
        value=int(str(fact["value"])),
    )


class PaymentReceiptBuilder(ReceiptBuilder):
    """The chain's receipt builder, which also receipts its payments (``payment_spec``:
    the store's ``payment_spec(settlement_id)``, for a timeout before any transfer, whose
    decision records no terms)."""

    def __init__(
        self,
        *args: Any,
        payment_spec: Callable[[str], PaymentSpecRecord] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.payment_spec = payment_spec

    def subject(self, rec: SettlementRecord) -> Subject:
        """The common fields; a payment's ``tx_hash`` is derived from its settlement id."""
        if rec.kind not in ADDRESS_KINDS:
            return super().subject(rec)
        return Subject(
            rec.settlement_id,
            rec.chain,
            self.chain.chain_id,
            payment_tx_hash(rec.settlement_id),
            self.signer,
        )

    def decision_body(self, rec: SettlementRecord, now: int) -> dict[str, Any]:
        """A payment's finality or timeout body (any other settlement: the base builder's)."""
        if rec.kind not in ADDRESS_KINDS:
            return super().decision_body(rec, now)
        evidence = rec.decision.get("evidence") or {}
        facts: dict[str, Any] = evidence.get("facts") or {}
        state = None if rec.dependent_state is None else digest(rec.dependent_state)
        subject = self.subject(rec)
        if rec.verdict == Verdict.TIMEOUT_TREATED_AS_FAILURE:
            body = self._timeout(rec, subject, now, state)
            paid = [transfer_of(t) for t in facts.get("transfers") or []]
            spec = spec_of(facts) if facts else self._spec_of_record(rec)
            proven = self._paid_proof(paid, body["proof"]["head_at_deadline"])
            if proven is not None:
                body["proof"] = {**body["proof"], **proven.as_json()}
            return {**body, "payment": payment_json(spec, paid)}
        if rec.verdict == Verdict.SETTLEMENT_FAILED and evidence.get("kind") == REORGED_OUT:
            none = no_receipt_by_design(self.chain.chain_id, rec.kind, REORGED_OUT, rec.verdict)
            if none is not None:
                raise ValueError(f"{rec.settlement_id}: {none}")
            spec = spec_of(facts)
            return reorged_out_receipt(
                self.chain, self.client, rec, subject, now, state, self.observed_by, spec
            )
        if rec.verdict != Verdict.FINALITY_CONFIRMED:
            raise ValueError(f"{rec.settlement_id}: no payment receipt for a {rec.verdict}")
        basis_name = str(evidence.get("kind"))
        basis = self._basis(rec, basis_name, facts, basis_name)
        none = no_receipt_by_design(self.chain.chain_id, rec.kind, basis_name, rec.verdict)
        if none is not None:  # no header chain to prove transfers in (docs/receipts.md)
            raise ValueError(f"{rec.settlement_id}: {none}")
        final = [transfer_of(t) for t in facts["transfers"] if t.get("basis") is not None]
        if not final:
            raise ValueError(f"{rec.settlement_id}: a confirmed payment without final transfers")
        head = (int(facts["head_number"]), str(facts["head_hash"]))
        proof = self.payment_proof(final, head, rec.required_confirmations)
        return payment_finality_body(
            subject, now, rec.decision, spec_of(facts), proof, basis, state
        )

    def _paid_proof(
        self, paid: list[Transfer], head: Mapping[str, str] | None
    ) -> PaymentProof | None:
        """The proofs of what a timed-out payment was paid, in one header chain through the
        head at the deadline; None (the receipt then states it as the signer's claim) when
        nothing was paid, no head is known, or the transfers cannot be proven now (a
        transfer reorged out since the decision, a node that lags)."""
        if not paid or head is None or attests_only(self.chain.chain_id) is not None:
            return None
        number = int(str(head["number"]), 16)
        try:
            return self.payment_proof(paid, (number, str(head["hash"])), 1, through=number)
        except ChainError:  # BranchMoved, ProofUnavailable, a node error
            return None

    def _spec_of_record(self, rec: SettlementRecord) -> PaymentSpec:
        """Without evidence (a timeout before any transfer) the terms are not in the
        decision: its stored spec holds them."""
        if self.payment_spec is None:
            raise ValueError(f"{rec.settlement_id}: the payment's terms are not in its decision")
        stored = self.payment_spec(rec.settlement_id)
        return PaymentSpec(stored.to_address, stored.asset, int(stored.amount), stored.sender)

    def payment_proof(
        self,
        transfers: list[Transfer],
        head: tuple[int, str],
        required: int,
        through: int = 0,
    ) -> PaymentProof:
        """Every transfer proven in its block, in one header chain from the first one's
        block up to the latest one's depth ``required`` (at most the decision's ``head``),
        and at least to block ``through``."""
        transfers = sorted(transfers, key=Transfer.order)
        first = transfers[0]
        latest = max(t.block_number for t in transfers)
        top = max(latest, through, min(head[0], latest + required - 1))
        count = top - first.block_number + 1
        headers = None
        if self.header_rows is not None:
            headers = stored_chain(
                self.header_rows, self.chain.name, first.block_number, count, first.block_hash, head
            )
        if headers is None:
            _, headers = fetch_headers(
                self.client, first.block_number, count, first.block_hash, head
            )
        proofs = [
            self._transfer_proof(t, headers[t.block_number - first.block_number]) for t in transfers
        ]
        compact = self.chain.receipt_headers == "compact"
        return PaymentProof(headers, transfers, proofs, compact_headers=compact)

    def _transfer_proof(self, transfer: Transfer, header: Mapping[str, str]) -> TransferProof:
        if header["hash"] != transfer.block_hash:
            raise BranchMoved(
                f"block {transfer.block_number} is no longer {transfer.block_hash}: waiting"
            )
        tries = self._block_tries(self._block_of(header))
        index = transfer.tx_index
        if index >= len(tries.tx_hashes) or tries.tx_hashes[index] != transfer.tx_hash:
            raise BranchMoved(f"tx {transfer.tx_hash} is not at {index} of {transfer.block_hash}")
        if index in tries.unprovable:
            raise ProofUnavailable(f"block {tries.block_hash}: {tries.unprovable[index]}")
        position = None
        if transfer.log_index is not None:
            before = sum(len(receipt_logs(leaf)) for leaf in tries.receipts.values[:index])
            position = transfer.log_index - before
            if not 0 <= position < len(receipt_logs(tries.receipts.values[index])):
                raise ProofUnavailable(
                    f"log {transfer.log_index} of block {transfer.block_hash} is not in the "
                    f"receipt of tx {transfer.tx_hash}"
                )
        return TransferProof(
            receipt_proof=["0x" + n.hex() for n in tries.receipts.proof(index)],
            transaction_proof=["0x" + n.hex() for n in tries.transactions.proof(index)],
            log_position=position,
        )


def chain_builder(
    chain: ChainConfig, client: RpcClient, signer: str, store: Store
) -> PaymentReceiptBuilder:
    """The receipt builder of one chain, over the store's header window, block leaves and
    payment specs (watcher/receipts/component.py makes one per chain)."""
    return PaymentReceiptBuilder(
        chain,
        client,
        signer,
        store.compact_headers,
        leaves_store(store),
        payment_spec=store.payment_spec,
        consensus=consensus_section(chain, client, consensus_store(store)),
    )
