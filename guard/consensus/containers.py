"""The light-client containers of the beacon chain, as frozen values with their roots.

A light client follows the chain through three answers of a beacon node
(consensus-specs, ``altair/light-client/sync-protocol.md`` and its Capella, Deneb and Electra
amendments):

* a **bootstrap**: a header the client trusts (its root is the checkpoint) and the sync
  committee of that header's period, with the branch proving it in the header's state;
* an **update**: a header signed by a sync committee (the *attested* header), the committee of
  the next period and the branch proving it in the attested state, optionally a *finalized*
  header and the branch proving it is the attested state's finalized checkpoint;
* a **finality update**: the same without the next committee.

Every header carries its execution payload header (from Capella on) and the branch proving it
in the beacon block body: that is how an execution block's hash is tied to consensus.
"""

from __future__ import annotations

from dataclasses import dataclass

from guard.consensus.ssz import (
    ZERO_CHUNK,
    byte_list_root,
    bytes_root,
    merkleize,
    sha256,
    uint_chunk,
)


@dataclass(frozen=True, slots=True)
class BeaconBlockHeader:
    """A beacon block's header: what sync committees sign and checkpoints name."""

    slot: int
    """The slot of the block (12 s each on mainnet)."""
    proposer_index: int
    """The validator that proposed it."""
    parent_root: bytes
    """The root of the parent beacon block."""
    state_root: bytes
    """The root of the beacon state after the block: finality and committees are proven in it."""
    body_root: bytes
    """The root of the block body: the execution payload header is proven in it."""

    def root(self) -> bytes:
        """The block root (what a checkpoint and a signature name)."""
        return merkleize(
            [
                uint_chunk(self.slot, 8),
                uint_chunk(self.proposer_index, 8),
                self.parent_root,
                self.state_root,
                self.body_root,
            ]
        )


@dataclass(frozen=True, slots=True)
class ExecutionHeader:
    """An execution payload header: the execution block a beacon block carries.

    ``blob_gas_used`` and ``excess_blob_gas`` are ``None`` in a Capella container; a Deneb or
    later container carries them (zero for a header of a Capella slot).
    """

    parent_hash: bytes
    """The execution parent block's hash."""
    fee_recipient: bytes
    """The 20-byte coinbase."""
    state_root: bytes
    """The execution state root."""
    receipts_root: bytes
    """The execution receipts root."""
    logs_bloom: bytes
    """The 256-byte bloom filter of the block's logs."""
    prev_randao: bytes
    """The beacon randomness mixed into the block."""
    block_number: int
    """The execution block number."""
    gas_limit: int
    """The block's gas limit."""
    gas_used: int
    """The gas the block used."""
    timestamp: int
    """The block's timestamp (seconds)."""
    extra_data: bytes
    """Up to 32 bytes the builder chose."""
    base_fee_per_gas: int
    """EIP-1559 base fee (a uint256)."""
    block_hash: bytes
    """The execution block's hash: what a receipt's header chain links to."""
    transactions_root: bytes
    """The root of the payload's transactions (SSZ, not the header's MPT root)."""
    withdrawals_root: bytes
    """The root of the payload's withdrawals."""
    blob_gas_used: int | None
    """EIP-4844 blob gas used (Deneb containers on)."""
    excess_blob_gas: int | None
    """EIP-4844 excess blob gas (Deneb containers on)."""

    def root(self, *, with_blobs: bool) -> bytes:
        """The header's root in the layout of Deneb on (``with_blobs``) or of Capella."""
        fields = [
            self.parent_hash,
            bytes_root(self.fee_recipient),
            self.state_root,
            self.receipts_root,
            bytes_root(self.logs_bloom),
            self.prev_randao,
            uint_chunk(self.block_number, 8),
            uint_chunk(self.gas_limit, 8),
            uint_chunk(self.gas_used, 8),
            uint_chunk(self.timestamp, 8),
            byte_list_root(self.extra_data, 32),
            uint_chunk(self.base_fee_per_gas, 32),
            self.block_hash,
            self.transactions_root,
            self.withdrawals_root,
        ]
        if with_blobs:
            fields += [
                uint_chunk(self.blob_gas_used or 0, 8),
                uint_chunk(self.excess_blob_gas or 0, 8),
            ]
        return merkleize(fields)


@dataclass(frozen=True, slots=True)
class LightClientHeader:
    """A beacon header with its execution payload header and the branch tying the two."""

    beacon: BeaconBlockHeader
    """The beacon block header."""
    execution: ExecutionHeader
    """The execution payload header of that block."""
    execution_branch: tuple[bytes, ...]
    """Siblings from the execution header's root up to ``beacon.body_root``."""


@dataclass(frozen=True, slots=True)
class SyncCommittee:
    """The validators that sign headers for one sync-committee period (~27 h on mainnet)."""

    pubkeys: tuple[bytes, ...]
    """The members' 48-byte compressed BLS public keys, in committee order."""
    aggregate_pubkey: bytes
    """The sum of every member's key, as the beacon state holds it."""

    def root(self) -> bytes:
        """The committee's root in the beacon state."""
        keys_root = merkleize([bytes_root(key) for key in self.pubkeys])
        return merkleize([keys_root, bytes_root(self.aggregate_pubkey)])


@dataclass(frozen=True, slots=True)
class SyncAggregate:
    """Which committee members signed, and their aggregate BLS signature."""

    bits: tuple[bool, ...]
    """One flag per committee member, in committee order."""
    signature: bytes
    """The 96-byte aggregate signature over the attested header's signing root."""


@dataclass(frozen=True, slots=True)
class LightClientBootstrap:
    """A trusted header and the sync committee of its period."""

    header: LightClientHeader
    """The header whose root is the checkpoint."""
    current_sync_committee: SyncCommittee
    """The committee of the header's period."""
    current_sync_committee_branch: tuple[bytes, ...]
    """Siblings from the committee's root up to ``header.beacon.state_root``."""


@dataclass(frozen=True, slots=True)
class LightClientUpdate:
    """A signed header with, optionally, the next committee and a finalized header.

    A finality update is an update without ``next_sync_committee``; an update that does not
    prove finality has an all-zero ``finality_branch`` (and hands over a committee only).
    """

    attested_header: LightClientHeader
    """The header the committee signed."""
    next_sync_committee: SyncCommittee | None
    """The committee of the period after the attested header's (None in a finality update)."""
    next_sync_committee_branch: tuple[bytes, ...]
    """Siblings from that committee's root up to the attested state root."""
    finalized_header: LightClientHeader
    """The header the attested state names as finalized."""
    finality_branch: tuple[bytes, ...]
    """Siblings from the finalized header's root up to the attested state root."""
    sync_aggregate: SyncAggregate
    """The committee's signature over the attested header."""
    signature_slot: int
    """The slot in which the signature was included (its period picks the committee)."""

    @property
    def proves_finality(self) -> bool:
        """Whether the update carries a finality branch (not all zero chunks)."""
        return any(node != ZERO_CHUNK for node in self.finality_branch)

    @property
    def hands_over_committee(self) -> bool:
        """Whether the update carries the next committee with a branch."""
        return self.next_sync_committee is not None and any(
            node != ZERO_CHUNK for node in self.next_sync_committee_branch
        )


def signing_root(object_root: bytes, domain: bytes) -> bytes:
    """The message a BLS signature covers: the root of ``SigningData(object_root, domain)``."""
    return sha256(object_root + domain)
