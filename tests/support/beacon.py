"""A test beacon chain: sync committees with known BLS keys signing light-client data.

Anvil has no consensus layer, so tests build one. ``BeaconSigner`` plays the beacon chain of
the minimal preset (committees of 32, 64-slot periods, every fork from genesis: Electra
layouts and generalized indices) over execution blocks the test hands it, usually anvil's
headers: it builds each beacon block's body (the execution payload header at gindex 25) and
state (finalized checkpoint at 169, committees at 86 and 87) as sparse Merkle trees, so every
branch is real, and signs attested headers with the period's committee (secret keys
``1000 * period + 1 … + 32``). What it serves is what a Beacon API serves as JSON
(``{"version": "electra", "data": …}``); guard.consensus verifies it as it would mainnet's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from guard.consensus import MINIMAL, Network
from guard.consensus.bls import POP_DST
from guard.consensus.containers import (
    BeaconBlockHeader,
    ExecutionHeader,
    SyncCommittee,
    signing_root,
)
from guard.consensus.networks import EXECUTION_PAYLOAD_GINDEX, FROM_ELECTRA
from guard.consensus.ssz import ZERO_HASHES, sha256

SLOTS_PER_PERIOD = MINIMAL.slots_per_epoch * MINIMAL.epochs_per_period


class SparseTree:
    """A Merkle tree holding ``leaves`` at their generalized indices, zero elsewhere."""

    def __init__(self, leaves: Mapping[int, bytes]) -> None:
        self.leaves = dict(leaves)
        self.depth = max(g.bit_length() - 1 for g in self.leaves)
        self._memo: dict[int, bytes] = {}

    def node(self, gindex: int) -> bytes:
        """The root of the subtree at ``gindex``."""
        if gindex in self.leaves:
            return self.leaves[gindex]
        if gindex not in self._memo:
            level = gindex.bit_length() - 1
            if not any(self._under(gindex, leaf) for leaf in self.leaves):
                self._memo[gindex] = ZERO_HASHES[self.depth - level]
            else:
                self._memo[gindex] = sha256(self.node(2 * gindex) + self.node(2 * gindex + 1))
        return self._memo[gindex]

    @staticmethod
    def _under(gindex: int, leaf: int) -> bool:
        shift = leaf.bit_length() - gindex.bit_length()
        return shift >= 0 and leaf >> shift == gindex

    def root(self) -> bytes:
        return self.node(1)

    def branch(self, gindex: int) -> list[bytes]:
        """Siblings from ``gindex`` up to the root, bottom first."""
        out = []
        while gindex > 1:
            out.append(self.node(gindex ^ 1))
            gindex >>= 1
        return out


def _hex(raw: bytes) -> str:
    return "0x" + raw.hex()


def _int(header: Mapping[str, Any], key: str) -> int:
    value = header.get(key)
    return int(value, 16) if isinstance(value, str) else 0


def execution_of(header: Mapping[str, Any]) -> ExecutionHeader:
    """An execution payload header carrying an execution block's JSON header (as
    ``eth_getBlockByNumber`` answers it): its number and hash are what consensus proves."""
    zero = "0x" + "00" * 32
    return ExecutionHeader(
        parent_hash=bytes.fromhex(header["parentHash"][2:]),
        fee_recipient=bytes.fromhex(header["miner"][2:]),
        state_root=bytes.fromhex(header["stateRoot"][2:]),
        receipts_root=bytes.fromhex(header["receiptsRoot"][2:]),
        logs_bloom=bytes.fromhex(header["logsBloom"][2:]),
        prev_randao=bytes.fromhex(header.get("mixHash", zero)[2:]),
        block_number=_int(header, "number"),
        gas_limit=_int(header, "gasLimit"),
        gas_used=_int(header, "gasUsed"),
        timestamp=_int(header, "timestamp"),
        extra_data=bytes.fromhex(header.get("extraData", "0x")[2:]),
        base_fee_per_gas=_int(header, "baseFeePerGas"),
        block_hash=bytes.fromhex(header["hash"][2:]),
        transactions_root=bytes.fromhex(header["transactionsRoot"][2:]),
        withdrawals_root=bytes.fromhex(header.get("withdrawalsRoot", zero)[2:]),
        blob_gas_used=_int(header, "blobGasUsed"),
        excess_blob_gas=_int(header, "excessBlobGas"),
    )


def execution_json(e: ExecutionHeader) -> dict[str, str]:
    return {
        "parent_hash": _hex(e.parent_hash),
        "fee_recipient": _hex(e.fee_recipient),
        "state_root": _hex(e.state_root),
        "receipts_root": _hex(e.receipts_root),
        "logs_bloom": _hex(e.logs_bloom),
        "prev_randao": _hex(e.prev_randao),
        "block_number": str(e.block_number),
        "gas_limit": str(e.gas_limit),
        "gas_used": str(e.gas_used),
        "timestamp": str(e.timestamp),
        "extra_data": _hex(e.extra_data),
        "base_fee_per_gas": str(e.base_fee_per_gas),
        "block_hash": _hex(e.block_hash),
        "transactions_root": _hex(e.transactions_root),
        "withdrawals_root": _hex(e.withdrawals_root),
        "blob_gas_used": str(e.blob_gas_used or 0),
        "excess_blob_gas": str(e.excess_blob_gas or 0),
    }


@dataclass(frozen=True)
class Block:
    """A beacon block the test chain made: its header JSON, root and state tree."""

    slot: int
    root: bytes
    header_json: dict[str, Any]
    state: SparseTree


def _committee_json(committee: SyncCommittee) -> dict[str, Any]:
    return {
        "pubkeys": [_hex(key) for key in committee.pubkeys],
        "aggregate_pubkey": _hex(committee.aggregate_pubkey),
    }


@dataclass
class BeaconSigner:
    """A minimal-preset beacon chain signing over the execution headers it is given."""

    network: Network = MINIMAL
    size: int = 32
    _committees: dict[int, tuple[list[int], SyncCommittee]] = field(default_factory=dict)

    def secrets(self, period: int) -> list[int]:
        """The secret keys of ``period``'s committee."""
        return [1000 * period + i + 1 for i in range(self.size)]

    def committee(self, period: int) -> SyncCommittee:
        if period not in self._committees:
            secrets = self.secrets(period)
            keys = tuple((G1Point() * Scalar(s)).to_compressed_bytes() for s in secrets)
            aggregate = (G1Point() * Scalar(sum(secrets))).to_compressed_bytes()
            self._committees[period] = (secrets, SyncCommittee(keys, aggregate))
        return self._committees[period][1]

    def block(self, slot: int, execution: ExecutionHeader, finalized: Block | None = None) -> Block:
        """A beacon block at ``slot`` carrying ``execution``, whose state names ``finalized``
        (when given) and holds this period's and the next period's committees."""
        period = self.network.period_at_slot(slot)
        body = SparseTree({EXECUTION_PAYLOAD_GINDEX: execution.root(with_blobs=True)})
        leaves = {
            FROM_ELECTRA.current_sync_committee: self.committee(period).root(),
            FROM_ELECTRA.next_sync_committee: self.committee(period + 1).root(),
        }
        if finalized is not None:
            leaves[FROM_ELECTRA.finalized_root] = finalized.root
        state = SparseTree(leaves)
        beacon = BeaconBlockHeader(slot, 7, bytes(32), state.root(), body.root())
        header = {
            "beacon": {
                "slot": str(slot),
                "proposer_index": "7",
                "parent_root": _hex(beacon.parent_root),
                "state_root": _hex(beacon.state_root),
                "body_root": _hex(beacon.body_root),
            },
            "execution": execution_json(execution),
            "execution_branch": [_hex(n) for n in body.branch(EXECUTION_PAYLOAD_GINDEX)],
        }
        return Block(slot, beacon.root(), header, state)

    def bootstrap(self, slot: int, execution: ExecutionHeader) -> tuple[dict[str, Any], str]:
        """(the bootstrap answer at ``slot``, its checkpoint root)."""
        block = self.block(slot, execution)
        period = self.network.period_at_slot(slot)
        data = {
            "header": block.header_json,
            "current_sync_committee": _committee_json(self.committee(period)),
            "current_sync_committee_branch": [
                _hex(n) for n in block.state.branch(FROM_ELECTRA.current_sync_committee)
            ],
        }
        return {"version": "electra", "data": data}, _hex(block.root)

    def update(
        self,
        period: int,
        finalized_execution: ExecutionHeader,
        *,
        with_committee: bool = True,
        signing_period: int | None = None,
        signers: int | None = None,
    ) -> dict[str, Any]:
        """An update signed in ``period`` (by ``signing_period``'s committee if given: a wrong
        committee) whose attested state finalizes a block carrying ``finalized_execution``;
        with the next committee (``/updates``) or without it (``/finality_update``)."""
        base = period * SLOTS_PER_PERIOD
        finalized = self.block(base + 24, finalized_execution)
        attested = self.block(base + 40, finalized_execution, finalized=finalized)
        signature_slot = attested.slot + 1
        data: dict[str, Any] = {"attested_header": attested.header_json}
        if with_committee:
            data["next_sync_committee"] = _committee_json(self.committee(period + 1))
            data["next_sync_committee_branch"] = [
                _hex(n) for n in attested.state.branch(FROM_ELECTRA.next_sync_committee)
            ]
        data["finalized_header"] = finalized.header_json
        data["finality_branch"] = [
            _hex(n) for n in attested.state.branch(FROM_ELECTRA.finalized_root)
        ]
        data["sync_aggregate"] = self._sign(
            attested.root,
            signature_slot,
            signing_period if signing_period is not None else period,
            signers,
        )
        data["signature_slot"] = str(signature_slot)
        return {"version": "electra", "data": data}

    def _sign(
        self, root: bytes, signature_slot: int, period: int, signers: int | None
    ) -> dict[str, str]:
        self.committee(period)
        secrets = self._committees[period][0]
        count = self.size if signers is None else signers
        fork = self.network.fork_at_slot(signature_slot - 1)
        message = signing_root(root, self.network.domain(fork))
        scalar = Scalar(sum(secrets[:count]))
        signature = G2Point.hash_to_curve(message, POP_DST) * scalar
        bits = sum(1 << i for i in range(count)).to_bytes(self.size // 8, "little")
        return {
            "sync_committee_bits": _hex(bits),
            "sync_committee_signature": _hex(signature.to_compressed_bytes()),
        }

    def chain(
        self, execution: ExecutionHeader, periods: Sequence[int], final_period: int
    ) -> dict[str, Any]:
        """A receipt's ``consensus`` section material: a bootstrap in ``periods[0]``, an
        update per period handing over the next committee, and a finality update signed in
        ``final_period`` finalizing ``execution``."""
        bootstrap, checkpoint = self.bootstrap(periods[0] * SLOTS_PER_PERIOD + 8, execution)
        return {
            "network": self.network.name,
            "checkpoint": checkpoint,
            "bootstrap": bootstrap,
            "updates": [self.update(p, execution) for p in periods[:-1]],
            "finality_update": self.update(final_period, execution, with_committee=False),
        }
