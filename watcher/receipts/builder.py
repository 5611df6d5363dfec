"""Turning a stored terminal decision into a receipt body, with what the node provides.

The decision (settlement.decision) says what was decided and on which evidence: block number
and hash, head number and hash at the decision, basis, confirmations. The builder fetches
exactly what proves it, and refuses (:class:`~chains.proofs.BranchMoved`: wait and retry)
when the node's chain is no longer the one the decision saw: a receipt is only signed for
the evidence the verdict rests on.

* finality / reverted: headers from the inclusion block up to depth min(confirmations, N),
  checked to still link with the decision's head, or, where the chain has the EIP-2935
  history contract and it is smaller, the inclusion header and a history proof of the top
  one (watcher/receipts/ancestry.py); both tries of the inclusion block rebuilt
  from ``eth_getBlockReceipts`` and the signed txs (rebuilt from the tx objects the head
  tracker already fetched, else from ``eth_getBlockByHash(hash, true)``, else the node's raw
  bytes), their roots checked against the header;
* replaced: the same for the replacing tx's block, plus the watched tx's signed bytes
  recorded while it was pending (``raw_tx``);
* timeout: the last block at or before the deadline and its child (found by timestamp).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from chains.block_facts import facts_of, header_from_compact
from chains.errors import ChainError
from chains.proofs import (
    BlockTries,
    BranchMoved,
    TxObjectCache,
    fetch_headers,
    fetch_receipts_and_block,
    head_at,
    inclusion_proof,
)
from chains.redact import redact_url
from chains.rpc import RpcClient
from guard.canonical import FrozenJson, digest
from guard.finality_rule import BASES, TAG_OF_BASIS
from guard.receipts import (
    BindingTerms,
    FinalityBasis,
    InclusionProof,
    Subject,
    binding_body,
    finality_body,
    replaced_body,
    reverted_body,
    timeout_body,
)
from guard.settlement import Verdict
from watcher.config.chains import ChainConfig
from watcher.receipts.ahead import ProofsAhead
from watcher.receipts.ancestry import Ancestry, AncestryProver
from watcher.receipts.attestation import (
    attestation_receipt,
    attests_only,
    no_receipt_by_design,
)
from watcher.receipts.consensus import ConsensusSection
from watcher.receipts.headers import HeaderRows, head_linked, stored_chain, stored_ends
from watcher.receipts.spans import HeaderSpans
from watcher.receipts.stored_tries import fetched_tries, stored_tries
from watcher.receipts.terms import timeout_terms
from watcher.store import SettlementRecord
from watcher.store.leaves_store import BlockLeaves, LeavesStore

TRIES_CACHED = 16
"""Blocks whose tries the builder keeps (a block hash names its content for good): those
prepared at inclusion stay until their depth-N receipts at the usual N and spread."""

ChainKey = tuple[int, int, str, tuple[int, str]]
"""(block B, headers wanted from B up, B's hash, the decision's head): one receipt's chain."""

PREPARED_HELD = 64
"""Blocks waiting for :meth:`ReceiptBuilder.prepare` at most (older ones: built when their
first receipt is)."""


def redact(endpoint: str) -> str:
    """An RPC endpoint by its origin, without credentials, path or query (API keys live
    there): the one redaction (chains/redact), without the ``/…`` mark."""
    return redact_url(endpoint, mark=False)


def _frozen(headers: list[dict[str, str]]) -> list[dict[str, str]]:
    """The header objects frozen (guard.canonical.FrozenJson): every receipt of the block
    carries them, and their canonical text and hashes are computed once."""
    return [FrozenJson(h) for h in headers]


class ReceiptBuilder:
    """Builds receipt bodies for one chain, reading through ``client``."""

    def __init__(
        self,
        chain: ChainConfig,
        client: RpcClient,
        signer: str,
        header_rows: HeaderRows | None = None,
        leaves: LeavesStore | None = None,
        consensus: ConsensusSection | None = None,
    ) -> None:
        self.chain = chain
        self.consensus = consensus
        """The chain's light client (``beacon_api``): finality receipts carry its section."""
        self.client = client
        self.signer = signer
        self.leaves = leaves
        """Where the leaves of blocks already proven are kept (watcher/store/leaves_store.py):
        a block's later receipts, after a restart too, rebuild its tries from there."""
        self.header_rows = header_rows
        """The store's header window (watcher/receipts/headers.py): a receipt's headers are
        read there; None (or a gap) asks the node."""
        self.facts = facts_of(client)
        """The block receipts and tx hashes the engine and tracker fetched through
        ``client``: proven from, not fetched again."""
        self.observed_by = [redact(client.endpoint)]
        self.prover = (
            AncestryProver(client, compact=chain.receipt_headers == "compact")
            if chain.receipt_ancestry == "history"
            else None
        )
        """History proofs of the link from B to H (watcher/receipts/ancestry.py); None when
        the chain's receipts carry header chains only, in the form before ``ancestry``."""
        self._chains: OrderedDict[ChainKey, list[dict[str, str]]] = OrderedDict()
        """Header chains read from the store, by (block, count, block hash, head): the
        settlements a block confirmed at one head share one read."""
        self._ends: OrderedDict[ChainKey, list[dict[str, str]]] = OrderedDict()
        """The two ends a history proof links (block B, block H), read from the store by the
        same key: a block's settlements share one read and one encoding of each header (read
        for every receipt, three statements each, they were the receipt's largest cost at
        W = 1,000)."""
        self._tries: OrderedDict[str, BlockTries] = OrderedDict()
        """Recently built tries by block hash: settlements confirmed by the same block (a
        batch of payouts) share one fetch and one build."""
        self.tx_objects = TxObjectCache()
        """The tx objects of the blocks the head tracker fetched through ``client``: the
        signed txs are rebuilt from them instead of being fetched again."""
        client.block_observers.append(self.tx_objects.offer)
        self._fresh: deque[str] = deque(maxlen=PREPARED_HELD)
        """Blocks whose receipts the engine just fetched (they hold watched txs): their
        tries are built ahead (:meth:`prepare`)."""
        client.receipt_observers.append(lambda block_hash, _answer: self._fresh.append(block_hash))
        self.ahead = ProofsAhead(self.facts)  # watched txs' proofs, made while they wait
        self.spans = HeaderSpans.of(client, self.facts, chain.confirmations or 1)
        """Watched blocks' header spans, kept from the fetch (watcher/receipts/spans.py)."""

    def subject(self, rec: SettlementRecord) -> Subject:
        """The common fields for ``rec``."""
        return Subject(rec.settlement_id, rec.chain, self.chain.chain_id, rec.tx_hash, self.signer)

    # -- decisions -----------------------------------------------------------------------

    def decision_body(self, rec: SettlementRecord, now: int) -> dict[str, Any]:
        """The body attesting ``rec``'s terminal decision; raises BranchMoved (wait),
        ProofUnavailable, RpcError, or ValueError for a decision it cannot attest."""
        decision = rec.decision
        evidence = decision.get("evidence") or {}
        facts: dict[str, Any] = evidence.get("facts") or {}
        state = None if rec.dependent_state is None else digest(rec.dependent_state)
        subject = self.subject(rec)
        if rec.verdict == Verdict.TIMEOUT_TREATED_AS_FAILURE:
            return self._timeout(rec, subject, now, state)
        kind = str(evidence.get("kind"))
        basis = self._basis(rec, str(facts.get("basis", kind)), facts, kind)
        none = no_receipt_by_design(self.chain.chain_id, rec.kind, kind, rec.verdict)
        if none is not None:
            raise ValueError(f"{rec.settlement_id}: {none}")
        attest_why = attests_only(self.chain.chain_id)
        if attest_why is not None:  # headers that do not re-hash: a signed attestation
            return attestation_receipt(attest_why, subject, now, decision, basis, state)
        tx_hash = str(facts["replaced_by"]) if kind == "replaced" else rec.tx_hash
        proof = self._inclusion(facts, tx_hash, rec.required_confirmations)
        if rec.verdict == Verdict.FINALITY_CONFIRMED:
            body = finality_body(subject, now, decision, proof, basis, state)
            if self.consensus is not None:  # waits (ConsensusPending) until consensus covers it
                body["consensus"] = self.consensus.section(body)
            return body
        if kind == "reverted":
            return reverted_body(subject, now, decision, proof, basis, state)
        if kind == "replaced":
            return replaced_body(subject, now, decision, proof, basis, state, tx_hash, rec.raw_tx)
        raise ValueError(f"{rec.settlement_id}: no receipt for a {rec.verdict} on {kind!r}")

    def _basis(
        self, rec: SettlementRecord, basis_name: str, facts: Mapping[str, Any], named: str
    ) -> FinalityBasis:
        """The finality basis a receipt of ``rec`` states, from its evidence ``facts`` (the
        tag's block only under a rule on that tag); a ``ValueError`` naming the evidence
        ``named`` when the basis is not chain evidence."""
        if basis_name not in BASES:
            raise ValueError(f"{rec.settlement_id}: evidence {named!r} is not chain evidence")
        tag = TAG_OF_BASIS.get(basis_name)
        return FinalityBasis(
            basis=basis_name,
            required_confirmations=rec.required_confirmations,
            finalized_number=facts.get("finalized_number") if tag == "finalized" else None,
            observed_by=self.observed_by,
            safe_number=facts.get("safe_number") if tag == "safe" else None,
        )

    def _inclusion(self, facts: dict[str, Any], tx_hash: str, required: int) -> InclusionProof:
        number, block_hash = int(facts["block_number"]), str(facts["block_hash"])
        head = (int(facts["head_number"]), str(facts["head_hash"]))
        count = max(1, min(head[0] - number + 1, required))
        key = (number, count, block_hash, head)
        ancestry, headers = self._ancestry(key)
        block: Mapping[str, Any] | None = None
        if ancestry is None or ancestry.history is None:
            block, headers = self._header_chain(key)
            if self.prover is not None and ancestry is None:  # the ends were not stored
                ancestry = self.prover.prove(headers[0], headers[-1], count)
                if ancestry.history is not None:
                    headers = headers[:1]
        ahead = self.ahead.take(block_hash, tx_hash) if headers[0]["hash"] == block_hash else None
        if ahead is not None:  # cut and checked while the tx waited (watcher/receipts/ahead.py)
            proof = InclusionProof(headers, ahead.tx_index, *ahead.proofs)
        else:  # the inclusion block alone when H is in the history proof
            tries = self._block_tries(self._block_of(headers[0]) if block is None else block)
            try:
                index = tries.tx_hashes.index(tx_hash)
            except ValueError:
                raise BranchMoved(f"tx {tx_hash} is not in block {block_hash}") from None
            proof = inclusion_proof(tries, headers, index)
        return replace(
            proof,
            compact_headers=self.chain.receipt_headers == "compact",
            history=None if ancestry is None else ancestry.history,
            header_chain_reason=None if ancestry is None else ancestry.reason,
        )

    def _ancestry(self, key: ChainKey) -> tuple[Ancestry | None, list[dict[str, str]]]:
        """(the prover's answer, [block B, block H] from the store) when the store holds both
        ends; (None, []) without a prover or when it does not (the chain is read whole)."""
        number, count, block_hash, head = key
        if self.prover is None or self.header_rows is None:
            return None, []
        held = self._ends.get(key)
        if held is None:
            ends = stored_ends(self.header_rows, self.chain.name, number, count, block_hash, head)
            if ends is None:
                return None, []
            held = self._ends[key] = _frozen(ends)  # the block's other settlements share them
            while len(self._ends) > TRIES_CACHED:
                self._ends.popitem(last=False)
        first, last = held
        return self.prover.prove(first, last, count), [first]

    def _header_chain(self, key: ChainKey) -> tuple[Mapping[str, Any] | None, list[dict[str, str]]]:
        """(block B's object when the node gave it, the ``count`` headers from B up; B's tx
        hashes are looked for only when no proof was made ahead): from the store,
        else from the node; kept for the block's other settlements either way (a receipt built
        after the store's window moved past B, on a daemon that fell behind, used to fetch
        the chain again for each settlement of the block: 100 batches a block at W = 1,000,
        which put it further behind)."""
        number, count, block_hash, head = key
        headers = self._chains.get(key)
        block: Mapping[str, Any] | None = None
        if headers is None and self.header_rows is not None:
            stored = stored_chain(
                self.header_rows, self.chain.name, number, count, block_hash, head
            )
            headers = None if stored is None else _frozen(stored)  # encoded once a block
        if headers is None:
            linked = partial(head_linked, self.header_rows, self.chain.name)
            kept = self.spans.chain(number, count, block_hash, head, linked)
            headers = None if kept is None else _frozen(kept)  # re-hashed and linked
        if headers is None:
            block, fetched = fetch_headers(self.client, number, count, block_hash, head)
            headers = _frozen(fetched)
        if key not in self._chains:
            self._chains[key] = headers  # the block's other settlements share it
            while len(self._chains) > TRIES_CACHED:
                self._chains.popitem(last=False)
        return block, headers

    def _block_of(self, header: Mapping[str, str]) -> Mapping[str, Any]:
        """The block object the tries need (hash, roots, tx hashes) around a stored header:
        tx hashes from the tracker's full block or the engine's receipts; only when neither
        is held (after a restart) is the full block fetched, once, for its txs too."""
        block_hash = header["hash"]
        built = self._tries.get(block_hash)
        hashes = built.tx_hashes if built is not None else self.facts.tx_hashes(block_hash)
        if hashes is None:
            held = self.facts.receipts(block_hash)
            if held is not None:
                hashes = [str(r["transactionHash"]) for r in held]
        if hashes is None:
            stored = self._stored_tries(header)
            if stored is not None:
                self._keep(stored)
                hashes = stored.tx_hashes
        if hashes is None:  # both calls in flight at once; the tries then find both held
            answers, full = fetch_receipts_and_block(self.client, block_hash)
            if not isinstance(full, Mapping) or not isinstance(full.get("transactions"), list):
                raise BranchMoved(f"the node has no block {block_hash}")
            self.facts.offer_receipts(block_hash, list(answers))
            self.tx_objects.offer(full)
            hashes = [str(t["hash"] if isinstance(t, Mapping) else t) for t in full["transactions"]]
        return {**header, "transactions": hashes}

    def prepare(self) -> int:
        """Build the tries of the blocks whose receipts the engine fetched since the last
        call from what the engine and tracker hold (no call), keep them and store their
        leaves, then cut and check their watched txs' proofs (watcher/receipts/ahead.py);
        returns how many. Their receipts, N blocks later, take the proofs; after a restart
        the tries come from the stored leaves (the receipts thread runs this after its work)."""
        prepared = 0
        while self._fresh:
            block_hash = self._fresh.popleft()
            compact = self.facts.header(block_hash)
            txs = self.tx_objects.get(block_hash)
            if block_hash in self._tries or compact is None or txs is None:
                continue
            known = (self.facts.tries(block_hash), self.facts.receipts(block_hash))  # read once:
            if known == (None, None):  # let go meanwhile (a catch-up): never asked again here
                continue
            held = TxObjectCache()  # exactly these objects: never a fetch if they go meanwhile
            held.offer(txs)
            try:
                header = header_from_compact(compact)
                hashes = [str(t["hash"]) for t in txs["transactions"]]
                self._block_tries({**header, "transactions": hashes}, held, known)
            except (ChainError, ValueError, KeyError, TypeError):
                continue  # built (or refused) at its first receipt, as before
            prepared += 1
        return prepared + self.ahead.prepare(lambda h: self._tries.get(h) or self.facts.tries(h))

    def _block_tries(
        self,
        block: Mapping[str, Any],
        tx_objects: TxObjectCache | None = None,
        known: tuple[BlockTries | None, list[Mapping[str, Any]] | None] | None = None,
    ) -> BlockTries:
        key = str(block["hash"])
        tries = self._tries.pop(key, None) or self._stored_tries(block)
        if tries is None:
            cache = self.tx_objects if tx_objects is None else tx_objects
            found, receipts = known or (self.facts.tries(key), self.facts.receipts(key))
            tries = found or fetched_tries(self.client, block, cache, receipts)
            if self.leaves is not None and not tries.unprovable:
                number = int(str(block["number"]), 16)
                leaves = BlockLeaves(
                    tries.tx_hashes, tries.transactions.values, tries.receipts.values
                )
                self.leaves.put(
                    self.chain.name, key, number, leaves, self.chain.resolved_header_window
                )
        self._keep(tries)
        return tries

    def _keep(self, tries: BlockTries) -> None:
        self._tries.pop(tries.block_hash, None)
        self._tries[tries.block_hash] = tries
        while len(self._tries) > TRIES_CACHED:
            self._tries.popitem(last=False)

    def _stored_tries(self, header: Mapping[str, Any]) -> BlockTries | None:
        return None if self.leaves is None else stored_tries(self.leaves, self.chain.name, header)

    def _timeout(
        self, rec: SettlementRecord, subject: Subject, now: int, state: str | None
    ) -> dict[str, Any]:
        decision = rec.decision
        terms = timeout_terms(rec, self.chain)
        no_headers = attests_only(self.chain.chain_id) is not None
        head, child = (None, None) if no_headers else head_at(self.client, rec.deadline)
        return timeout_body(
            subject, max(now, rec.deadline), decision, terms, head, child, self.observed_by, state
        )

    # -- binding -------------------------------------------------------------------------

    def binding_body(self, rec: SettlementRecord, now: int) -> dict[str, Any] | None:
        """The binding of ``rec``'s dependent state (None when it has none)."""
        if rec.dependent_state is None:
            return None
        terms = BindingTerms(
            dependent_state_digest=digest(rec.dependent_state),
            required_confirmations=rec.required_confirmations,
            finality_mode=rec.finality_mode,
            timeout_ms=rec.timeout_ms,
            initiated_at=rec.initiated_at,
            deadline=rec.deadline,
        )
        return binding_body(self.subject(rec), now, terms)
