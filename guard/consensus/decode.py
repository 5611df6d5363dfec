"""Beacon API answers to containers: parsed JSON or raw ``application/octet-stream`` bytes.

A light-client endpoint answers JSON (``{"version": "deneb", "data": {…}}``; ``/updates``
answers a list of those) or SSZ. The SSZ of ``/updates`` is a sequence of *response chunks*:
an 8-byte little-endian length (of what follows: the fork digest and the SSZ), the 4-byte
fork digest, the SSZ; the other endpoints answer one bare SSZ container.

The layout of a container differs between forks (Deneb added two blob fields to the
execution header, Electra lengthened two branches); the bytes say which by themselves (a
container's first offset is the size of its fixed part, an execution header's ``extra_data``
offset the size of its own), so a bare answer needs no version header. A digest or version
that names no fork of the network is refused as an unknown fork. Containers decoded before
(a committee chain kept in a store) pass through as they are.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from guard.consensus.containers import (
    BeaconBlockHeader,
    ExecutionHeader,
    LightClientBootstrap,
    LightClientHeader,
    LightClientUpdate,
    SyncAggregate,
    SyncCommittee,
)
from guard.consensus.errors import ConsensusProofError
from guard.consensus.networks import SUPPORTED_FORKS, Network

BEACON_HEADER_SIZE = 112
EXECUTION_BRANCH_DEPTH = 4
PUBKEY_SIZE = 48
SIGNATURE_SIZE = 96
CAPELLA_EXECUTION_FIXED = 568
DENEB_EXECUTION_FIXED = 584
KNOWN_VERSIONS = frozenset(SUPPORTED_FORKS) | {"phase0", "altair", "bellatrix"}

T = TypeVar("T")


def malformed(what: str) -> ConsensusProofError:
    """The error of an answer that is not a light-client container."""
    return ConsensusProofError("malformed", what)


# ---------------------------------------------------------------- entry points


def bootstrap_of(answer: object, network: Network) -> LightClientBootstrap:
    """The bootstrap in one Beacon API answer."""
    items = list(_answers(answer, network))
    if len(items) != 1:
        raise malformed(f"bootstrap: expected one container, got {len(items)}")
    return _one(items[0], LightClientBootstrap, _bootstrap_json, _bootstrap_ssz, "bootstrap")


def updates_of(answers: Sequence[object], network: Network) -> list[LightClientUpdate]:
    """Every update in a list of answers (each may hold several: a JSON list, SSZ chunks)."""
    out: list[LightClientUpdate] = []
    for answer in answers:
        for item in _answers(answer, network):
            out.append(_one(item, LightClientUpdate, _update_json, _update_ssz, "update"))
    return out


def finality_update_of(answer: object, network: Network) -> LightClientUpdate:
    """The finality update (or full update) in one Beacon API answer."""
    items = list(_answers(answer, network))
    if len(items) != 1:
        raise malformed(f"finality update: expected one container, got {len(items)}")
    return _one(items[0], LightClientUpdate, _update_json, _update_ssz, "finality update")


def _one(
    item: object,
    kind: type[T],
    from_json: Callable[[Mapping[str, Any]], T],
    from_ssz: Callable[[bytes], T],
    what: str,
) -> T:
    if isinstance(item, kind):
        return item  # decoded before; verified all the same
    try:
        if isinstance(item, bytes):
            return from_ssz(item)
        if isinstance(item, Mapping):
            return from_json(item)
    except ConsensusProofError:
        raise
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise malformed(f"{what}: {type(exc).__name__}: {exc}") from exc
    raise malformed(f"{what}: {type(item).__name__} is neither JSON nor SSZ bytes")


def _answers(answer: object, network: Network) -> Iterator[object]:
    """The containers of one answer: JSON objects (envelopes opened) or SSZ byte strings."""
    if isinstance(answer, LightClientBootstrap | LightClientUpdate):
        yield answer
    elif isinstance(answer, bytes | bytearray | memoryview):
        yield from _ssz_answers(bytes(answer), network)
    elif isinstance(answer, list | tuple):
        for item in answer:
            yield from _answers(item, network)
    elif isinstance(answer, Mapping):
        if "data" in answer:
            version = answer.get("version")
            if version is not None and str(version).lower() not in KNOWN_VERSIONS:
                raise ConsensusProofError("unknown fork", f"version {version!r}")
            yield from _answers(answer["data"], network)
        else:
            yield answer
    else:
        raise malformed(f"{type(answer).__name__} is not a Beacon API answer")


def _ssz_answers(data: bytes, network: Network) -> Iterator[bytes]:
    """Bare SSZ, or response chunks (recognized by a length that spans the whole answer)."""
    if not _is_chunked(data):
        yield data
        return
    digests = network.fork_digests()
    at = 0
    while at < len(data):
        length = int.from_bytes(data[at : at + 8], "little")
        digest = data[at + 8 : at + 12]
        if digests.get(digest) is None:
            raise ConsensusProofError(
                "unknown fork", f"fork digest 0x{digest.hex()} is not one of {network.name}'s"
            )
        yield data[at + 12 : at + 8 + length]
        at += 8 + length


def _is_chunked(data: bytes) -> bool:
    at = 0
    while at + 12 <= len(data):
        length = int.from_bytes(data[at : at + 8], "little")
        if length < 4:
            return False
        at += 8 + length
    return at == len(data) and len(data) > 0


# ---------------------------------------------------------------- JSON


def _hex(value: object, size: int | None = None) -> bytes:
    if not isinstance(value, str) or not value.startswith("0x"):
        raise ValueError(f"{value!r} is not 0x-prefixed hex")
    raw = bytes.fromhex(value[2:])
    if size is not None and len(raw) != size:
        raise ValueError(f"{value!r} is not {size} bytes")
    return raw


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"{value!r} is not a decimal integer")
    number = int(value)
    if number < 0:
        raise ValueError(f"{value!r} is negative")
    return number


def _branch(values: object) -> tuple[bytes, ...]:
    if not isinstance(values, list):
        raise ValueError("a branch is a list of 32-byte hashes")
    return tuple(_hex(value, 32) for value in values)


def _beacon_json(obj: Mapping[str, Any]) -> BeaconBlockHeader:
    return BeaconBlockHeader(
        slot=_int(obj["slot"]),
        proposer_index=_int(obj["proposer_index"]),
        parent_root=_hex(obj["parent_root"], 32),
        state_root=_hex(obj["state_root"], 32),
        body_root=_hex(obj["body_root"], 32),
    )


def _execution_json(obj: Mapping[str, Any]) -> ExecutionHeader:
    extra = _hex(obj["extra_data"])
    if len(extra) > 32:
        raise ValueError("extra_data is longer than 32 bytes")
    blobs = "blob_gas_used" in obj
    return ExecutionHeader(
        parent_hash=_hex(obj["parent_hash"], 32),
        fee_recipient=_hex(obj["fee_recipient"], 20),
        state_root=_hex(obj["state_root"], 32),
        receipts_root=_hex(obj["receipts_root"], 32),
        logs_bloom=_hex(obj["logs_bloom"], 256),
        prev_randao=_hex(obj["prev_randao"], 32),
        block_number=_int(obj["block_number"]),
        gas_limit=_int(obj["gas_limit"]),
        gas_used=_int(obj["gas_used"]),
        timestamp=_int(obj["timestamp"]),
        extra_data=extra,
        base_fee_per_gas=_int(obj["base_fee_per_gas"]),
        block_hash=_hex(obj["block_hash"], 32),
        transactions_root=_hex(obj["transactions_root"], 32),
        withdrawals_root=_hex(obj["withdrawals_root"], 32),
        blob_gas_used=_int(obj["blob_gas_used"]) if blobs else None,
        excess_blob_gas=_int(obj["excess_blob_gas"]) if blobs else None,
    )


def _header_json(obj: Mapping[str, Any]) -> LightClientHeader:
    if "execution" not in obj:
        raise ConsensusProofError("unknown fork", "a header without an execution payload header")
    return LightClientHeader(
        beacon=_beacon_json(obj["beacon"]),
        execution=_execution_json(obj["execution"]),
        execution_branch=_branch(obj["execution_branch"]),
    )


def _committee_json(obj: Mapping[str, Any]) -> SyncCommittee:
    return SyncCommittee(
        pubkeys=tuple(_hex(key, PUBKEY_SIZE) for key in obj["pubkeys"]),
        aggregate_pubkey=_hex(obj["aggregate_pubkey"], PUBKEY_SIZE),
    )


def _bits(raw: bytes) -> tuple[bool, ...]:
    return tuple(bool(raw[i // 8] >> (i % 8) & 1) for i in range(len(raw) * 8))


def _bootstrap_json(obj: Mapping[str, Any]) -> LightClientBootstrap:
    return LightClientBootstrap(
        header=_header_json(obj["header"]),
        current_sync_committee=_committee_json(obj["current_sync_committee"]),
        current_sync_committee_branch=_branch(obj["current_sync_committee_branch"]),
    )


def _update_json(obj: Mapping[str, Any]) -> LightClientUpdate:
    if "finalized_header" not in obj:
        raise ConsensusProofError("no finality", "an optimistic update proves no finality")
    aggregate = obj["sync_aggregate"]
    has_next = "next_sync_committee" in obj
    return LightClientUpdate(
        attested_header=_header_json(obj["attested_header"]),
        next_sync_committee=_committee_json(obj["next_sync_committee"]) if has_next else None,
        next_sync_committee_branch=_branch(obj["next_sync_committee_branch"]) if has_next else (),
        finalized_header=_header_json(obj["finalized_header"]),
        finality_branch=_branch(obj["finality_branch"]),
        sync_aggregate=SyncAggregate(
            bits=_bits(_hex(aggregate["sync_committee_bits"])),
            signature=_hex(aggregate["sync_committee_signature"], SIGNATURE_SIZE),
        ),
        signature_slot=_int(obj["signature_slot"]),
    )


# ---------------------------------------------------------------- SSZ


class _Reader:
    """Sequential reads of an SSZ container's fixed part."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, size: int) -> bytes:
        if self.at + size > len(self.data):
            raise ValueError(f"SSZ ends at byte {len(self.data)}, needed {self.at + size}")
        out = self.data[self.at : self.at + size]
        self.at += size
        return out

    def uint(self, size: int) -> int:
        return int.from_bytes(self.take(size), "little")

    def branch(self, depth: int) -> tuple[bytes, ...]:
        return tuple(self.take(32) for _ in range(depth))


def _variable(data: bytes, offsets: Sequence[int], fixed_size: int) -> list[bytes]:
    """The variable-size parts at ``offsets`` (which must start at the fixed part's end)."""
    if not offsets or offsets[0] != fixed_size:
        raise ValueError(f"first offset {offsets[:1]} is not the fixed size {fixed_size}")
    bounds = [*offsets, len(data)]
    if any(a > b for a, b in itertools.pairwise(bounds)):
        raise ValueError("SSZ offsets out of order")
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def _beacon_ssz(raw: bytes) -> BeaconBlockHeader:
    r = _Reader(raw)
    return BeaconBlockHeader(r.uint(8), r.uint(8), r.take(32), r.take(32), r.take(32))


def _execution_ssz(data: bytes) -> ExecutionHeader:
    r = _Reader(data)
    parent_hash, fee_recipient, state_root, receipts_root = (
        r.take(32),
        r.take(20),
        r.take(32),
        r.take(32),
    )
    logs_bloom, prev_randao = r.take(256), r.take(32)
    block_number, gas_limit, gas_used, timestamp = r.uint(8), r.uint(8), r.uint(8), r.uint(8)
    extra_offset = r.uint(4)
    if extra_offset not in (CAPELLA_EXECUTION_FIXED, DENEB_EXECUTION_FIXED):
        raise ValueError(f"execution header: extra_data offset {extra_offset}")
    base_fee, block_hash = r.uint(32), r.take(32)
    transactions_root, withdrawals_root = r.take(32), r.take(32)
    blobs = extra_offset == DENEB_EXECUTION_FIXED
    blob_gas_used = r.uint(8) if blobs else None
    excess_blob_gas = r.uint(8) if blobs else None
    (extra,) = _variable(data, [extra_offset], r.at)
    if len(extra) > 32:
        raise ValueError("extra_data is longer than 32 bytes")
    return ExecutionHeader(
        parent_hash, fee_recipient, state_root, receipts_root, logs_bloom, prev_randao,
        block_number, gas_limit, gas_used, timestamp, extra, base_fee, block_hash,
        transactions_root, withdrawals_root, blob_gas_used, excess_blob_gas,
    )  # fmt: skip


def _header_ssz(data: bytes) -> LightClientHeader:
    r = _Reader(data)
    beacon = _beacon_ssz(r.take(BEACON_HEADER_SIZE))
    offset = r.uint(4)
    branch = r.branch(EXECUTION_BRANCH_DEPTH)
    (execution,) = _variable(data, [offset], r.at)
    return LightClientHeader(beacon, _execution_ssz(execution), branch)


def _committee_ssz(r: _Reader, size: int) -> SyncCommittee:
    pubkeys = tuple(r.take(PUBKEY_SIZE) for _ in range(size))
    return SyncCommittee(pubkeys, r.take(PUBKEY_SIZE))


COMMITTEE_SIZES = (512, 32)
"""Committee sizes of the mainnet and minimal presets: the fixed parts' sizes tell which."""


def _bootstrap_ssz(data: bytes) -> LightClientBootstrap:
    offset = int.from_bytes(data[:4], "little")
    for size in COMMITTEE_SIZES:
        for depth in (5, 6):
            if offset == 4 + (size + 1) * PUBKEY_SIZE + 32 * depth:
                r = _Reader(data)
                r.uint(4)
                committee = _committee_ssz(r, size)
                branch = r.branch(depth)
                (header,) = _variable(data, [offset], r.at)
                return LightClientBootstrap(_header_ssz(header), committee, branch)
    raise malformed(f"bootstrap: first offset {offset} fits no known layout")


def _update_ssz(data: bytes) -> LightClientUpdate:
    offset = int.from_bytes(data[:4], "little")
    aggregate_fixed = SIGNATURE_SIZE + 8  # signature and signature_slot
    for size in COMMITTEE_SIZES:
        bits = size // 8
        for next_depth, finality_depth in ((5, 6), (6, 7)):
            full = 4 + (size + 1) * PUBKEY_SIZE + 32 * next_depth + 4 + 32 * finality_depth
            if offset == full + bits + aggregate_fixed:
                return _update_fields(data, size, next_depth, finality_depth)
            if offset == 8 + 32 * finality_depth + bits + aggregate_fixed:
                return _update_fields(data, size, None, finality_depth)
    raise malformed(f"update: first offset {offset} fits no known layout")


def _update_fields(
    data: bytes, size: int, next_depth: int | None, finality_depth: int
) -> LightClientUpdate:
    r = _Reader(data)
    attested_offset = r.uint(4)
    committee = _committee_ssz(r, size) if next_depth is not None else None
    next_branch = r.branch(next_depth) if next_depth is not None else ()
    finalized_offset = r.uint(4)
    finality_branch = r.branch(finality_depth)
    aggregate = SyncAggregate(_bits(r.take(size // 8)), r.take(SIGNATURE_SIZE))
    signature_slot = r.uint(8)
    attested, finalized = _variable(data, [attested_offset, finalized_offset], r.at)
    return LightClientUpdate(
        attested_header=_header_ssz(attested),
        next_sync_committee=committee,
        next_sync_committee_branch=next_branch,
        finalized_header=_header_ssz(finalized),
        finality_branch=finality_branch,
        sync_aggregate=aggregate,
        signature_slot=signature_slot,
    )
