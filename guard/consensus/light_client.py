"""From a trusted checkpoint to a finalized execution block, as a beacon light client.

The checks, in order (each failure raises ``ConsensusProofError`` naming it):

1. the bootstrap's header hashes to the checkpoint (*checkpoint mismatch*), and its sync
   committee is in that header's state (*committee branch*);
2. each update is signed by the committee of its signature period (*missing committee* when
   the chain of hand-overs does not reach it; *signature*; *participation* below 2/3 of the
   committee), and proves the next period's committee in the attested state (*committee
   branch*): committees hand themselves over period by period;
3. the finality update is signed likewise and proves its finalized header in the attested
   state (*finality branch*); every header proves its execution payload header in its body
   (*execution branch*).

The fork version of a signature is the one of ``signature_slot - 1``; the generalized
indices of a branch into a state follow the fork of that state's header's slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from guard.consensus.bls import fast_aggregate_verify
from guard.consensus.containers import (
    LightClientBootstrap,
    LightClientHeader,
    LightClientUpdate,
    SyncCommittee,
    signing_root,
)
from guard.consensus.decode import bootstrap_of, finality_update_of, updates_of
from guard.consensus.errors import ConsensusProofError
from guard.consensus.networks import (
    EXECUTION_PAYLOAD_GINDEX,
    NETWORKS,
    SUPPORTED_FORKS,
    Network,
    gindices,
)
from guard.consensus.ssz import is_valid_branch

SUPERMAJORITY = (2, 3)
"""Signers needed, as a fraction of the committee: what the beacon chain itself requires of
a sync aggregate before a light client applies its finality."""


@dataclass(frozen=True, slots=True)
class ProvenFinality:
    """What a verified chain of light-client data proves: an execution block is finalized."""

    execution_block_number: int
    """The finalized execution block's number."""
    execution_block_hash: str
    """The finalized execution block's hash, 0x-prefixed."""
    finalized_slot: int
    """The beacon slot of the finalized header."""
    finalized_root: str
    """The finalized beacon block's root, 0x-prefixed."""
    participation: int
    """How many committee members signed the finality update."""
    committee_size: int
    """How many members the committee has (512 on mainnet)."""
    signature_slot: int
    """The slot of the finality update's signature."""
    periods: tuple[int, ...]
    """The sync-committee periods whose committees were verified, from the checkpoint's."""


def resolve_network(network: str | Network) -> Network:
    """A network by name, or as given."""
    if isinstance(network, Network):
        return network
    known = NETWORKS.get(network)
    if known is None:
        raise ConsensusProofError(
            "unknown network", f"{network!r} is not one of {sorted(NETWORKS)}"
        )
    return known


def verify_finality(
    *,
    network: str | Network = "mainnet",
    checkpoint: str | bytes,
    bootstrap: object,
    updates: Sequence[object] = (),
    finality_update: object | None = None,
) -> ProvenFinality:
    """Verify light-client data from ``checkpoint`` (a trusted beacon block root) to a
    finalized execution block; each of ``bootstrap``, ``updates``' items and
    ``finality_update`` is a Beacon API answer (parsed JSON or raw SSZ bytes).
    ``finality_update=None`` takes the finality of the last update."""
    net = resolve_network(network)
    trusted = _root(checkpoint)
    boot = bootstrap_of(bootstrap, net)
    committees = _start(net, trusted, boot)
    handovers = updates_of(list(updates), net)
    for index, update in enumerate(handovers):
        apply_update(net, committees, update, f"update {index}")
    if finality_update is not None:
        final = finality_update_of(finality_update, net)
        what = "finality update"
    elif handovers:
        final, what = handovers[-1], f"update {len(handovers) - 1}"
    else:
        raise ConsensusProofError("no finality", "no finality update and no update")
    signers = _check_signed(net, committees, final, what)
    if not final.proves_finality:
        raise ConsensusProofError("no finality", f"{what} carries no finality branch")
    _check_finality(net, final, what)
    execution = final.finalized_header.execution
    return ProvenFinality(
        execution_block_number=execution.block_number,
        execution_block_hash="0x" + execution.block_hash.hex(),
        finalized_slot=final.finalized_header.beacon.slot,
        finalized_root="0x" + final.finalized_header.beacon.root().hex(),
        participation=signers,
        committee_size=net.committee_size,
        signature_slot=final.signature_slot,
        periods=tuple(sorted(committees)),
    )


def _root(checkpoint: str | bytes) -> bytes:
    if isinstance(checkpoint, bytes) and len(checkpoint) == 32:
        return checkpoint
    if isinstance(checkpoint, str) and checkpoint.startswith("0x") and len(checkpoint) == 66:
        try:
            return bytes.fromhex(checkpoint[2:])
        except ValueError:
            pass
    raise ConsensusProofError("checkpoint mismatch", f"{checkpoint!r} is not a 32-byte root")


def _start(net: Network, trusted: bytes, boot: LightClientBootstrap) -> dict[int, SyncCommittee]:
    """The committee of the checkpoint's period, once the bootstrap is shown to be its."""
    beacon = boot.header.beacon
    if beacon.root() != trusted:
        raise ConsensusProofError(
            "checkpoint mismatch",
            f"bootstrap header at slot {beacon.slot} has root 0x{beacon.root().hex()}, "
            f"not the checkpoint 0x{trusted.hex()}",
        )
    _check_header(net, boot.header, "bootstrap header")
    gindex = gindices(net.fork_at_slot(beacon.slot)).current_sync_committee
    if not is_valid_branch(
        boot.current_sync_committee.root(),
        boot.current_sync_committee_branch,
        gindex,
        beacon.state_root,
    ):
        raise ConsensusProofError(
            "committee branch",
            f"bootstrap: current committee not in the state of slot {beacon.slot}",
        )
    _check_size(net, boot.current_sync_committee, "bootstrap")
    return {net.period_at_slot(beacon.slot): boot.current_sync_committee}


def apply_update(
    net: Network, committees: dict[int, SyncCommittee], update: LightClientUpdate, what: str
) -> None:
    """Check one update against the ``committees`` known by period, and add the committee it
    hands over (a committee chain can so be kept and grown one update at a time)."""
    _check_signed(net, committees, update, what)
    if update.proves_finality:
        _check_finality(net, update, what)
    committee = update.next_sync_committee
    if committee is None or not update.hands_over_committee:
        return
    attested = update.attested_header.beacon
    gindex = gindices(net.fork_at_slot(attested.slot)).next_sync_committee
    if not is_valid_branch(
        committee.root(), update.next_sync_committee_branch, gindex, attested.state_root
    ):
        raise ConsensusProofError(
            "committee branch", f"{what}: next committee not in the state of slot {attested.slot}"
        )
    _check_size(net, committee, what)
    period = net.period_at_slot(attested.slot) + 1
    known = committees.get(period)
    if known is not None and known != committee:
        raise ConsensusProofError(
            "committee branch", f"{what}: a second, different committee for period {period}"
        )
    committees[period] = committee


def _check_signed(
    net: Network, committees: dict[int, SyncCommittee], update: LightClientUpdate, what: str
) -> int:
    """Check the update's headers and signature; the number of signers."""
    attested = update.attested_header.beacon
    if not update.signature_slot > attested.slot >= update.finalized_header.beacon.slot:
        raise ConsensusProofError(
            "signature",
            f"{what}: slots out of order (signature {update.signature_slot}, attested "
            f"{attested.slot}, finalized {update.finalized_header.beacon.slot})",
        )
    _check_header(net, update.attested_header, f"{what}: attested header")
    period = net.period_at_slot(update.signature_slot)
    committee = committees.get(period)
    if committee is None:
        raise ConsensusProofError(
            "missing committee",
            f"{what}: no committee for period {period} (known: {sorted(committees)})",
        )
    bits = update.sync_aggregate.bits
    if len(bits) != len(committee.pubkeys):
        raise ConsensusProofError(
            "malformed", f"{what}: {len(bits)} bits for {len(committee.pubkeys)} members"
        )
    signers = sum(bits)
    needed, of = SUPERMAJORITY
    if signers * of < len(bits) * needed:
        raise ConsensusProofError(
            "participation", f"{what}: {signers}/{len(bits)} signatures, below 2/3 of the committee"
        )
    fork = net.fork_at_slot(max(update.signature_slot, 1) - 1)
    if fork.name not in SUPPORTED_FORKS:
        raise ConsensusProofError("unknown fork", f"{what}: signed under {fork.name}")
    message = signing_root(attested.root(), net.domain(fork))
    if not fast_aggregate_verify(
        committee.aggregate_pubkey,
        committee.pubkeys,
        bits,
        message,
        update.sync_aggregate.signature,
    ):
        raise ConsensusProofError(
            "signature",
            f"{what}: not signed by period {period}'s committee under {fork.name} "
            f"(signature slot {update.signature_slot})",
        )
    return signers


def _check_finality(net: Network, update: LightClientUpdate, what: str) -> None:
    attested = update.attested_header.beacon
    finalized = update.finalized_header.beacon
    gindex = gindices(net.fork_at_slot(attested.slot)).finalized_root
    if not is_valid_branch(finalized.root(), update.finality_branch, gindex, attested.state_root):
        raise ConsensusProofError(
            "finality branch",
            f"{what}: header of slot {finalized.slot} is not finalized in the state of slot {attested.slot}",
        )
    _check_header(net, update.finalized_header, f"{what}: finalized header")


def _check_header(net: Network, header: LightClientHeader, what: str) -> None:
    """The header's execution payload header is the one in its block body."""
    fork = net.fork_at_slot(header.beacon.slot)
    if fork.name not in SUPPORTED_FORKS:
        raise ConsensusProofError(
            "unknown fork", f"{what}: slot {header.beacon.slot} is in {fork.name}, before Capella"
        )
    execution = header.execution
    with_blobs = fork.name != "capella"
    if with_blobs and execution.blob_gas_used is None:
        raise ConsensusProofError("malformed", f"{what}: a {fork.name} header without blob fields")
    if not with_blobs and (execution.blob_gas_used or execution.excess_blob_gas):
        raise ConsensusProofError("execution branch", f"{what}: blob gas in a Capella header")
    if not is_valid_branch(
        execution.root(with_blobs=with_blobs),
        header.execution_branch,
        EXECUTION_PAYLOAD_GINDEX,
        header.beacon.body_root,
    ):
        raise ConsensusProofError(
            "execution branch",
            f"{what}: execution block {execution.block_number} is not in the body of slot {header.beacon.slot}",
        )


def _check_size(net: Network, committee: SyncCommittee, what: str) -> None:
    if len(committee.pubkeys) != net.committee_size:
        raise ConsensusProofError(
            "malformed",
            f"{what}: {len(committee.pubkeys)} members, {net.name} has {net.committee_size}",
        )
