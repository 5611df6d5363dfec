"""Ancestry in constant size: block B is an ancestor of block H because H's state says so.

EIP-2935 (Prague on Ethereum, Isthmus on OP Stack) keeps recent block hashes in the storage
of a system contract at :data:`HISTORY_STORAGE_ADDRESS`. At the start of every block n the
protocol calls it with n's parent hash, and its code stores that hash at slot
``(n - 1) mod 8191``. So the state *after* block H (the one H's ``stateRoot`` commits to)
holds, at slot ``B mod 8191``, the hash of block B for every B with ``1 <= H - B <= 8191``:
block B + 1 wrote it (as its parent's hash), and block B + 1 + 8191 will overwrite it.
Block H's own hash is not there (block H + 1 writes it), nor is any block more than 8,191
below H.

A receipt's ``proof.ancestry`` of kind ``history_storage`` therefore replaces the H - B
headers between the inclusion block B and the confirming block H by three things:

* ``header``: block H's header, as a one-header ``header_chain`` object (format
  ``rlp-linked/1``, guard/header_chain.py: its consensus RLP in base64, strictly decoded;
  its hash is recomputed, never stated);
* ``account_proof``: the Merkle-Patricia nodes from H's ``stateRoot`` to the contract's
  account, keyed by keccak256(address); the account is ``rlp([nonce, balance,
  storageRoot, codeHash])`` and its ``codeHash`` must be the EIP's code (so the slots mean
  what the EIP says: only the protocol's system call writes them);
* ``storage_proof``: the nodes from that ``storageRoot`` to slot ``B mod 8191``, keyed by
  keccak256 of the slot as 32 bytes; the value (RLP of the word without leading zeros) must
  be B's hash, recomputed from the inclusion header the receipt carries.

What it proves, and on what: as a header chain does, that B is an ancestor of H, hence the
depth H - B + 1; a header chain rests on the hash links alone, this proof on H's state
being the result of executing H's chain (true of every block a node accepts). Neither says
that H is canonical: the signer, ``finality verify --rpc`` or Ethereum's consensus does.

The other kind, ``header_chain``, says that the ancestry is the proof's header chain (and
``reason``, why no history proof was used). A proof without ``ancestry`` is the header
chain too (receipts from before this section).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from guard import rlp
from guard.errors import ReceiptInvalid
from guard.fields import array, child, hex_nodes, keys, text
from guard.hashing import keccak256
from guard.header_chain import decode_header_chain, one_header_chain
from guard.headers import field_bytes
from guard.mpt import ProofError, verify_proof

HISTORY_STORAGE_ADDRESS = "0x0000f90827f1c53a10cb7a02335b175320002935"
"""The EIP-2935 system contract (the same address on every chain that has it)."""

HISTORY_SERVE_WINDOW = 8191
"""Slots of the ring buffer: block hashes at most this many blocks below H are kept."""

HISTORY_STORAGE_CODE = bytes.fromhex(
    "3373fffffffffffffffffffffffffffffffffffffffe14604657602036036042575f35600143038111604257"
    "611fff81430311604257611fff9006545f5260205ff35b5f5ffd5b5f35611fff60014303065500"
)
"""The contract's runtime code (EIP-2935): a call from the system address stores its
calldata at slot ``(number - 1) mod 8191``; any other call reads a slot."""

HISTORY_CODE_HASH = keccak256(HISTORY_STORAGE_CODE)
"""keccak256 of :data:`HISTORY_STORAGE_CODE`: the ``codeHash`` the account proof must show."""

HISTORY_STORAGE = "history_storage"
"""``proof.ancestry.kind``: the history contract's storage proves B's hash in H's state."""

HEADER_CHAIN = "header_chain"
"""``proof.ancestry.kind``: the proof's header chain links B to H (one header per block)."""

REASONS = (
    "beyond_history_window",
    "no_history_contract",
    "smaller",
    "unavailable",
    "disabled",
)
"""Why a builder used the header chain: H is more than 8,191 blocks above B (or is B), the
chain has no history contract (or no hash of B in it), the header chain is the smaller
proof, the node did not serve a usable proof, or the chain's configuration turned it off."""

ACCOUNT_FIELDS = 4
"""An account is rlp([nonce, balance, storageRoot, codeHash])."""


def history_slot(number: int) -> bytes:
    """The storage slot (32 bytes, big-endian) that holds block ``number``'s hash."""
    return (number % HISTORY_SERVE_WINDOW).to_bytes(32, "big")


def in_window(block_number: int, head_number: int) -> bool:
    """Whether the state after ``head_number`` still holds the hash of ``block_number``."""
    return 1 <= head_number - block_number <= HISTORY_SERVE_WINDOW


def account_storage_root(account: bytes, where: str) -> bytes:
    """The storage root of the history contract's account leaf, once its code is the EIP's;
    :class:`ReceiptInvalid` otherwise."""
    try:
        fields = rlp.decode(account)
    except rlp.RlpError as exc:
        raise ReceiptInvalid(f"{where}: the account is not valid RLP: {exc}") from exc
    if isinstance(fields, bytes) or len(fields) != ACCOUNT_FIELDS:
        raise ReceiptInvalid(f"{where}: the account is not [nonce, balance, storageRoot, codeHash]")
    storage_root, code_hash = fields[2], fields[3]
    if not isinstance(storage_root, bytes) or len(storage_root) != 32:
        raise ReceiptInvalid(f"{where}: the account's storageRoot is not 32 bytes")
    if code_hash != HISTORY_CODE_HASH:
        shown = code_hash.hex() if isinstance(code_hash, bytes) else "a list"
        raise ReceiptInvalid(
            f"{where}: the account's codeHash 0x{shown} is not the history contract's code "
            f"(0x{HISTORY_CODE_HASH.hex()})"
        )
    return storage_root


def stored_word(value: bytes, where: str) -> int:
    """The 256-bit word a storage leaf holds: RLP of the word without leading zeros."""
    try:
        word = rlp.decode(value)
    except rlp.RlpError as exc:
        raise ReceiptInvalid(f"{where}: the stored value is not valid RLP: {exc}") from exc
    if not isinstance(word, bytes) or len(word) > 32:
        raise ReceiptInvalid(f"{where}: the stored value is not a 256-bit word")
    try:
        return rlp.decode_uint(word, "the stored value")
    except rlp.RlpError as exc:
        raise ReceiptInvalid(f"{where}: {exc}") from exc


def _nodes(values: list[Any], where: str) -> list[bytes]:
    return hex_nodes(values, lambda i: f"{where}[{i}]")


@dataclass(frozen=True)
class HistoryLink:
    """What a checked ``history_storage`` ancestry showed: block H, above block B."""

    head_number: int
    """H's number."""
    head_hash: str
    """H's hash (recomputed from its header)."""
    depth: int
    """H - B + 1: the depth of B that H shows."""


def verify_history_ancestry(
    ancestry: Mapping[str, Any],
    block_number: int,
    block_hash: str,
    head: tuple[int, str, Mapping[str, Any]],
) -> HistoryLink:
    """Check a ``history_storage`` ancestry (its ``header`` already checked and decoded into
    ``head``: number, recomputed hash, header) against the inclusion block B
    (``block_number``, ``block_hash``, recomputed). :class:`ReceiptInvalid` names the first
    failed check: H not within 1..8191 blocks above B, an account or storage proof that does
    not walk from H's ``stateRoot``, another contract's code, a slot holding another hash."""
    where = "proof.ancestry"
    keys(ancestry, ("kind", "header", "account_proof", "storage_proof"), where)
    head_number, head_hash, header = head
    if not in_window(block_number, head_number):
        raise ReceiptInvalid(
            f"{where}.header: block {head_number} is not 1 to {HISTORY_SERVE_WINDOW} blocks "
            f"above block {block_number}: its state holds no hash of it"
        )
    state_root = field_bytes("stateRoot", "hash32", header["stateRoot"])
    account_nodes = _nodes(array(ancestry, "account_proof", where, 1), f"{where}.account_proof")
    try:
        account = verify_proof(
            state_root,
            keccak256(bytes.fromhex(HISTORY_STORAGE_ADDRESS[2:])),
            account_nodes,
            f"stateRoot of block {head_number}",
        )
    except ProofError as exc:
        raise ReceiptInvalid(f"{where}.account_proof: {exc}") from exc
    storage_root = account_storage_root(account, f"{where}.account_proof")
    slot = history_slot(block_number)
    storage_nodes = _nodes(array(ancestry, "storage_proof", where, 1), f"{where}.storage_proof")
    try:
        value = verify_proof(
            storage_root,
            keccak256(slot),
            storage_nodes,
            f"the history contract's storageRoot at block {head_number}",
        )
    except ProofError as exc:
        raise ReceiptInvalid(f"{where}.storage_proof: {exc}") from exc
    word = stored_word(value, f"{where}.storage_proof")
    if word != int(block_hash, 16):
        raise ReceiptInvalid(
            f"{where}.storage_proof: slot {int.from_bytes(slot, 'big')} holds "
            f"0x{word:064x}, not the hash of block {block_number} ({block_hash})"
        )
    return HistoryLink(head_number, head_hash, head_number - block_number + 1)


def header_chain_reason(ancestry: Mapping[str, Any]) -> str:
    """The ``reason`` of a ``header_chain`` ancestry, which must be one of :data:`REASONS`."""
    keys(ancestry, ("kind", "reason"), "proof.ancestry")
    reason = text(ancestry, "reason", "proof.ancestry")
    if reason not in REASONS:
        raise ReceiptInvalid(f"proof.ancestry.reason: {reason!r} is not one of {REASONS}")
    return reason


def ancestry_head(ancestry: Mapping[str, Any]) -> tuple[int, str, Mapping[str, Any]]:
    """(number, recomputed hash, header) of block H, from the ancestry's ``header``."""
    where = "proof.ancestry.header"
    headers = decode_header_chain(child(ancestry, "header", "proof.ancestry"), where)
    if len(headers) != 1:
        raise ReceiptInvalid(f"{where}: must hold one header, not {len(headers)}")
    return headers[0]


def ancestry_kind(proof: Mapping[str, Any]) -> tuple[str, Mapping[str, Any] | None]:
    """(the ancestry kind of a proof, its ``ancestry`` object or None when absent)."""
    if "ancestry" not in proof:
        return HEADER_CHAIN, None
    ancestry = child(proof, "ancestry", "proof")
    kind = text(ancestry, "kind", "proof.ancestry")
    if kind not in (HISTORY_STORAGE, HEADER_CHAIN):
        raise ReceiptInvalid(
            f"proof.ancestry.kind: {kind!r} is not {HISTORY_STORAGE!r} or {HEADER_CHAIN!r}"
        )
    return kind, ancestry


@dataclass(frozen=True)
class HistoryProof:
    """The ``history_storage`` ancestry a builder puts in a receipt (guard/receipt_bodies)."""

    header: Mapping[str, str]
    """Block H's header object (:func:`guard.headers.header_json`); carried compact (a
    frozen one, as the builder's, is encoded once for every receipt of the block)."""
    account_proof: Sequence[str]
    """Nodes (0x hex RLP) from H's ``stateRoot`` to the history contract's account."""
    storage_proof: Sequence[str]
    """Nodes from the contract's ``storageRoot`` to slot ``B mod 8191``."""

    def as_json(self) -> dict[str, Any]:
        """The ``proof.ancestry`` object (H's header as a one-header ``header_chain`` object:
        its RLP in base64, half the size of the JSON object)."""
        return {
            "kind": HISTORY_STORAGE,
            "header": one_header_chain(self.header),  # encoded once for a frozen header
            "account_proof": list(self.account_proof),
            "storage_proof": list(self.storage_proof),
        }
