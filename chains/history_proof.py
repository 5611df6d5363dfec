"""The history contract's proofs at a block, as a node serves them (``eth_getProof``).

A receipt whose confirming block H is at most 8,191 blocks above the inclusion block B can
prove the link by H's state instead of the headers between (guard/history.py). The proof
is one ``eth_getProof`` of the EIP-2935 contract at H, asked by H's hash (EIP-1898, so a
reorg between the decision and the call gives an error, never another block's state), for
the slots of the blocks it confirms.

Nothing in the answer is trusted: the builder checks the proof it cuts from it with the
verifier's own check (:func:`guard.history.verify_history_ancestry`) before it signs, and
uses the header chain when that check fails. Here the answer is only parsed into plain
values, and malformed answers are :class:`~chains.errors.RpcMalformedResponse`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from chains.errors import RpcMalformedResponse
from chains.rpc import RpcClient
from guard.history import HISTORY_STORAGE_ADDRESS

METHOD = "eth_getProof"


@dataclass(frozen=True)
class SlotProof:
    """One storage slot of the contract at H, as the node stated it."""

    value: int
    """The word the node says the slot holds (0: empty)."""
    proof: tuple[str, ...]
    """Nodes (0x hex) from the contract's storage root to the slot."""


@dataclass(frozen=True)
class HistoryState:
    """The history contract at block H: its account proof and the slots asked so far."""

    head_hash: str
    """H's hash (the state the proofs are of)."""
    code_hash: str
    """The account's ``codeHash`` as the node stated it (an account without code has
    keccak256 of nothing)."""
    account_proof: tuple[str, ...]
    """Nodes (0x hex) from H's ``stateRoot`` to the account."""
    slots: Mapping[int, SlotProof]
    """By slot number."""

    def merged(self, other: HistoryState) -> HistoryState:
        """This state with ``other``'s slots added (a second call for the same block)."""
        return HistoryState(
            self.head_hash, self.code_hash, self.account_proof, {**self.slots, **other.slots}
        )


def fetch_history_state(
    client: RpcClient, head_hash: str, slots: Sequence[int]
) -> HistoryState | None:
    """``eth_getProof`` of the history contract at block ``head_hash`` for ``slots`` (one
    call); None when the endpoint does not offer the method (remembered by the client).
    Raises :class:`~chains.errors.RpcError` when the node refuses (an unknown block: the
    chain moved; a state it no longer keeps) or answers malformed."""
    keys = ["0x" + slot.to_bytes(32, "big").hex() for slot in slots]
    answers = client.optional(METHOD, [[HISTORY_STORAGE_ADDRESS, keys, {"blockHash": head_hash}]])
    if answers is None:
        return None
    return parse_history_state(answers[0], head_hash, client.endpoint)


def parse_history_state(answer: Any, head_hash: str, endpoint: str) -> HistoryState:
    """The :class:`HistoryState` of one ``eth_getProof`` answer."""

    def bad(what: str) -> RpcMalformedResponse:
        return RpcMalformedResponse(endpoint, METHOD, what)

    if not isinstance(answer, Mapping):
        raise bad(f"the answer is not an object: {answer!r:.100}")
    code_hash = answer.get("codeHash")
    if not isinstance(code_hash, str):
        raise bad("codeHash is missing")
    account_proof = _nodes(answer.get("accountProof"), "accountProof", bad)
    storage = answer.get("storageProof")
    if not isinstance(storage, list):
        raise bad("storageProof is not a list")
    slots: dict[int, SlotProof] = {}
    for entry in storage:
        if not isinstance(entry, Mapping):
            raise bad("a storageProof entry is not an object")
        try:
            slot, value = int(str(entry.get("key")), 16), int(str(entry.get("value")), 16)
        except ValueError:
            raise bad("a storageProof key or value is not hex") from None
        slots[slot] = SlotProof(value, _nodes(entry.get("proof"), "storageProof.proof", bad))
    return HistoryState(head_hash, code_hash.lower(), account_proof, slots)


def _nodes(value: Any, what: str, bad: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise bad(f"{what} is not a list of hex strings")
    return tuple(n.lower() for n in value)
