"""Which proof links a receipt's block B to its confirming block H, and that proof.

The header chain costs one header per block (about 1.6 KB, 0.8 KB compact): 600 of them for
a depth of 600. Where the chain has the EIP-2935 history contract, H's header, one account
proof and one storage proof do it in a few KB whatever the depth (guard/history.py). The
builder asks :class:`AncestryProver` for the second and falls back to the first, saying
why (``proof.ancestry.reason``):

* ``smaller``: the header chain is no larger (a shallow depth; judged from the byte sizes
  of both once the history proof is known, and before any call from the size of the last
  history proof, so shallow receipts cost no call);
* ``beyond_history_window``: H is more than 8,191 blocks above B, so H's state no longer
  holds B's hash (or H is B itself);
* ``no_history_contract``: the account at H has no EIP-2935 code (a chain or a block before
  the fork), or its slot does not hold B's hash (B before the fork); the prover then does
  not ask again for :data:`RECHECK_BLOCKS` blocks;
* ``unavailable``: the node does not offer ``eth_getProof``, refused it (a state it no
  longer keeps), or served a proof that does not check.

Cost: one ``eth_getProof`` per confirming block, kept for the last :data:`HEADS_HELD`
blocks, so every receipt a block confirms shares it (a second B confirmed by the same H,
which the depth rule never gives, costs one more call for its slot). Nothing from the node
is trusted: the proof is checked with the verifier's own check before it is used.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from chains.errors import RpcErrorResponse, RpcMalformedResponse
from chains.history_proof import HistoryState, fetch_history_state
from chains.rpc import RpcClient
from guard import rlp
from guard.errors import ReceiptInvalid
from guard.headers import header_fields, header_number
from guard.history import (
    HISTORY_CODE_HASH,
    HISTORY_SERVE_WINDOW,
    HistoryProof,
    in_window,
    verify_history_ancestry,
)

log = logging.getLogger("finality.receipts")

HEADS_HELD = 16
"""Confirming blocks whose history state is kept (by hash)."""

RECHECK_BLOCKS = 1024
"""After a block without the history contract, blocks to go before asking again (a chain
without it costs one call per this many blocks; one that gains it at a fork, at most this
many blocks of header chains more)."""

ENVELOPE_BYTES = 120
"""The JSON around a history proof (keys, quotes, commas): part of its size estimate."""


@dataclass(frozen=True)
class Ancestry:
    """The prover's answer: a history proof, or why the header chain is used."""

    history: HistoryProof | None
    """The proof when used, else None."""
    reason: str | None
    """Without a proof: one of :data:`guard.history.REASONS`."""


def header_size(header: Mapping[str, str], compact: bool) -> int:
    """Bytes one header costs in a receipt: its JSON object, or its base64 RLP (compact)."""
    if compact:
        return (len(rlp.encode(list(header_fields(header)))) + 2) // 3 * 4
    return len(json.dumps(dict(header), separators=(",", ":")))


class AncestryProver:
    """History proofs for one chain's receipts, read through ``client``."""

    def __init__(self, client: RpcClient, compact: bool) -> None:
        self.client = client
        self.compact = compact
        """Whether the receipts carry ``header_chain`` (the sizes compared differ)."""
        self._states: OrderedDict[str, HistoryState] = OrderedDict()
        self._proven: OrderedDict[tuple[str, str, int], Ancestry] = OrderedDict()
        """Answers by (B's hash, H's hash, depth): a block's receipts share one (and its
        check)."""
        self._absent_below = -1
        """Confirming blocks below this number are not asked (no contract was found)."""
        self._proof_bytes = 0
        """Size of the last history proof's nodes: a depth whose header chain is no larger
        than that (and the two headers) is not worth a call."""

    def prove(self, block: Mapping[str, str], head: Mapping[str, str], depth: int) -> Ancestry:
        """The history proof that ``block`` (B) is ``depth - 1`` blocks below ``head`` (H),
        when it is smaller than the ``depth`` headers and the node serves one that checks;
        else the reason for the header chain. Raises RpcUnavailable (the node is down: the
        receipt waits, as for any call)."""
        key = (block["hash"], head["hash"], depth)
        answer = self._proven.get(key)
        if answer is None:
            answer = self._prove(block, head, depth)
            if answer.reason != "unavailable":  # a node that failed once is asked again
                self._proven[key] = answer
            while len(self._proven) > HEADS_HELD:
                self._proven.popitem(last=False)
        return answer

    def _prove(self, block: Mapping[str, str], head: Mapping[str, str], depth: int) -> Ancestry:
        number, head_number = header_number(block), header_number(head)
        per_header = header_size(block, self.compact)
        floor = per_header + header_size(head, True) + ENVELOPE_BYTES
        if depth * per_header <= floor + self._proof_bytes:
            return Ancestry(None, "smaller")
        if not in_window(number, head_number):
            return Ancestry(None, "beyond_history_window")
        if head_number < self._absent_below:
            return Ancestry(None, "no_history_contract")
        state = self._state(head["hash"], number % HISTORY_SERVE_WINDOW)
        if state is None:
            return Ancestry(None, "unavailable")
        if state.code_hash != "0x" + HISTORY_CODE_HASH.hex():
            self._absent_below = head_number + RECHECK_BLOCKS
            return Ancestry(None, "no_history_contract")
        slot = state.slots.get(number % HISTORY_SERVE_WINDOW)
        if slot is None or slot.value != int(block["hash"], 16):
            return Ancestry(None, "no_history_contract")  # B is older than the fork
        proof = HistoryProof(head, state.account_proof, slot.proof)
        try:
            verify_history_ancestry(
                proof.as_json(), number, block["hash"], (head_number, head["hash"], head)
            )
        except ReceiptInvalid as exc:
            log.warning("the node's history proof at block %s does not check: %s", head_number, exc)
            return Ancestry(None, "unavailable")
        self._proof_bytes = sum(len(n) + 3 for n in (*state.account_proof, *slot.proof))
        if floor + self._proof_bytes >= depth * per_header:
            return Ancestry(None, "smaller")
        return Ancestry(proof, None)

    def _state(self, head_hash: str, slot: int) -> HistoryState | None:
        """The history state at ``head_hash`` holding ``slot``: kept, or asked now."""
        held = self._states.get(head_hash)
        if held is not None and slot in held.slots:
            return held
        try:
            fetched = fetch_history_state(self.client, head_hash, [slot])
        except (RpcErrorResponse, RpcMalformedResponse) as exc:
            log.info("no history proof at block %s: %s", head_hash, exc)
            return None
        if fetched is None:
            return None
        state = fetched if held is None else held.merged(fetched)
        self._states[head_hash] = state
        self._states.move_to_end(head_hash)
        while len(self._states) > HEADS_HELD:
            self._states.popitem(last=False)
        return state
