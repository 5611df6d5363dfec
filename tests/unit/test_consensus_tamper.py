"""Tampered light-client data is refused, each time for its own reason.

Every case starts from real mainnet data that verifies (colibri's Electra bootstrap of period
1422 and the update finalizing block 22,432,991; helios' Capella chain; the Deneb -> Electra
crossing) and changes one thing; ``ConsensusProofError.check`` must name the check that a
careful reader would expect to catch it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from guard.consensus import MAINNET, ConsensusProofError, Network, verify_finality
from guard.consensus.containers import LightClientBootstrap, LightClientHeader, LightClientUpdate
from guard.consensus.decode import bootstrap_of, updates_of
from tests.support.consensus_data import (
    COLIBRI_1421_CHECKPOINT,
    COLIBRI_1422_CHECKPOINT,
    HELIOS_CHECKPOINT,
    colibri,
    helios,
)

BOOTSTRAP = bootstrap_of(colibri("bootstrap_0xb8758d"), MAINNET)
UPDATE = updates_of([colibri("period_1422")], MAINNET)[0]
FLIP = bytes([1]) + bytes(31)


def flip(node: bytes) -> bytes:
    """A 32-byte node with its first bit changed."""
    return bytes(a ^ b for a, b in zip(node, FLIP, strict=True))


def with_beacon(header: LightClientHeader, **fields: Any) -> LightClientHeader:
    return replace(header, beacon=replace(header.beacon, **fields))


def with_execution(header: LightClientHeader, **fields: Any) -> LightClientHeader:
    return replace(header, execution=replace(header.execution, **fields))


def verify_electra(
    bootstrap: LightClientBootstrap = BOOTSTRAP,
    update: LightClientUpdate = UPDATE,
    checkpoint: str = COLIBRI_1422_CHECKPOINT,
    network: Network = MAINNET,
) -> None:
    verify_finality(
        network=network, checkpoint=checkpoint, bootstrap=bootstrap, finality_update=update
    )


def test_untampered_electra_pair_verifies() -> None:
    verify_electra()  # the baseline every case below changes one thing of


def set_bit(update: LightClientUpdate, value: bool) -> LightClientUpdate:
    """The update with the first bit whose value is not ``value`` turned to it."""
    bits = list(update.sync_aggregate.bits)
    bits[bits.index(not value)] = value
    return replace(update, sync_aggregate=replace(update.sync_aggregate, bits=tuple(bits)))


def below_two_thirds(update: LightClientUpdate) -> LightClientUpdate:
    size = len(update.sync_aggregate.bits)
    bits = tuple(i < size * 2 // 3 - 1 for i in range(size))
    return replace(update, sync_aggregate=replace(update.sync_aggregate, bits=bits))


committee = BOOTSTRAP.current_sync_committee
swapped = (committee.pubkeys[1], committee.pubkeys[0], *committee.pubkeys[2:])
late_electra = Network(
    name="mainnet",
    genesis_validators_root=MAINNET.genesis_validators_root,
    forks=tuple(
        replace(fork, epoch=fork.epoch + 100_000) if fork.name in ("electra", "fulu") else fork
        for fork in MAINNET.forks
    ),
)
other_chain = replace(MAINNET, genesis_validators_root=bytes(32))

ELECTRA_CASES: dict[str, tuple[str, Callable[[], None]]] = {
    "checkpoint of another block": (
        "checkpoint mismatch",
        lambda: verify_electra(checkpoint=COLIBRI_1421_CHECKPOINT),
    ),
    "bootstrap header slot moved": (
        "checkpoint mismatch",
        lambda: verify_electra(
            bootstrap=replace(
                BOOTSTRAP,
                header=with_beacon(BOOTSTRAP.header, slot=BOOTSTRAP.header.beacon.slot + 1),
            )
        ),
    ),
    "bootstrap committee members swapped": (
        "committee branch",
        lambda: verify_electra(
            bootstrap=replace(BOOTSTRAP, current_sync_committee=replace(committee, pubkeys=swapped))
        ),
    ),
    "bootstrap aggregate key of another committee": (
        "committee branch",
        lambda: verify_electra(
            bootstrap=replace(
                BOOTSTRAP,
                current_sync_committee=replace(committee, aggregate_pubkey=committee.pubkeys[0]),
            )
        ),
    ),
    "bootstrap committee branch node flipped": (
        "committee branch",
        lambda: verify_electra(
            bootstrap=replace(
                BOOTSTRAP,
                current_sync_committee_branch=(
                    flip(BOOTSTRAP.current_sync_committee_branch[0]),
                    *BOOTSTRAP.current_sync_committee_branch[1:],
                ),
            )
        ),
    ),
    "bootstrap execution header of another block": (
        "execution branch",
        lambda: verify_electra(
            bootstrap=replace(BOOTSTRAP, header=with_execution(BOOTSTRAP.header, block_number=1))
        ),
    ),
    "a non-signer claimed as signer": (
        "signature",
        lambda: verify_electra(update=set_bit(UPDATE, True)),
    ),
    "a signer claimed as non-signer": (
        "signature",
        lambda: verify_electra(update=set_bit(UPDATE, False)),
    ),
    "signature of another update": (
        "signature",
        lambda: verify_electra(
            update=replace(
                UPDATE,
                sync_aggregate=replace(
                    UPDATE.sync_aggregate,
                    signature=updates_of([colibri("period_1421")], MAINNET)[
                        0
                    ].sync_aggregate.signature,
                ),
            )
        ),
    ),
    "signature bytes not a curve point": (
        "signature",
        lambda: verify_electra(
            update=replace(
                UPDATE, sync_aggregate=replace(UPDATE.sync_aggregate, signature=bytes(96))
            )
        ),
    ),
    "signature 0xff..., read by arkworks as infinity": (
        "signature",
        lambda: verify_electra(
            update=replace(
                UPDATE, sync_aggregate=replace(UPDATE.sync_aggregate, signature=b"\xff" * 96)
            )
        ),
    ),
    "attested header state root changed": (
        "signature",
        lambda: verify_electra(
            update=replace(
                UPDATE,
                attested_header=with_beacon(
                    UPDATE.attested_header,
                    state_root=flip(UPDATE.attested_header.beacon.state_root),
                ),
            )
        ),
    ),
    "signature slot before the attested slot": (
        "signature",
        lambda: verify_electra(
            update=replace(UPDATE, signature_slot=UPDATE.attested_header.beacon.slot)
        ),
    ),
    "signed under another chain's domain": (
        "signature",
        lambda: verify_electra(network=other_chain),
    ),
    "signature slot in a later period": (
        "missing committee",
        lambda: verify_electra(update=replace(UPDATE, signature_slot=UPDATE.signature_slot + 8192)),
    ),
    "participation below two thirds": (
        "participation",
        lambda: verify_electra(update=below_two_thirds(UPDATE)),
    ),
    "finalized header slot changed": (
        "finality branch",
        lambda: verify_electra(
            update=replace(
                UPDATE,
                finalized_header=with_beacon(
                    UPDATE.finalized_header, slot=UPDATE.finalized_header.beacon.slot + 32
                ),
            )
        ),
    ),
    "finality branch node flipped": (
        "finality branch",
        lambda: verify_electra(
            update=replace(
                UPDATE,
                finality_branch=(*UPDATE.finality_branch[:-1], flip(UPDATE.finality_branch[-1])),
            )
        ),
    ),
    "finality branch's Electra padding not zero": (
        "finality branch",
        lambda: verify_electra(
            update=replace(UPDATE, finality_branch=(flip(bytes(32)), *UPDATE.finality_branch[1:]))
        ),
    ),
    "finalized execution block hash changed": (
        "execution branch",
        lambda: verify_electra(
            update=replace(
                UPDATE,
                finalized_header=with_execution(UPDATE.finalized_header, block_hash=bytes(32)),
            )
        ),
    ),
    "finalized execution block number changed": (
        "execution branch",
        lambda: verify_electra(
            update=replace(
                UPDATE,
                finalized_header=with_execution(
                    UPDATE.finalized_header,
                    block_number=UPDATE.finalized_header.execution.block_number + 1,
                ),
            )
        ),
    ),
    "finalized execution branch node flipped": (
        "execution branch",
        lambda: verify_electra(
            update=replace(
                UPDATE,
                finalized_header=replace(
                    UPDATE.finalized_header,
                    execution_branch=(
                        flip(UPDATE.finalized_header.execution_branch[0]),
                        *UPDATE.finalized_header.execution_branch[1:],
                    ),
                ),
            )
        ),
    ),
    "attested execution header changed": (
        "execution branch",
        lambda: verify_electra(
            update=replace(
                UPDATE, attested_header=with_execution(UPDATE.attested_header, gas_used=0)
            )
        ),
    ),
    "Electra data read with pre-Electra indices": (
        "committee branch",
        lambda: verify_electra(network=late_electra),
    ),
    "update with no finality": (
        "no finality",
        lambda: verify_electra(
            update=replace(UPDATE, finality_branch=(bytes(32),) * len(UPDATE.finality_branch))
        ),
    ),
}


@pytest.mark.parametrize("case", ELECTRA_CASES, ids=list(ELECTRA_CASES))
def test_tampered_electra_data_is_refused_for_its_reason(case: str) -> None:
    check, run = ELECTRA_CASES[case]
    with pytest.raises(ConsensusProofError) as error:
        run()
    assert error.value.check == check, str(error.value)


# ---------------------------------------------------------------- the answers as served


def test_unknown_fork_digest_of_an_ssz_chunk() -> None:
    chunk = bytearray(colibri("period_1422"))
    chunk[8:12] = b"\xde\xad\xbe\xef"
    with pytest.raises(ConsensusProofError) as error:
        verify_finality(
            checkpoint=COLIBRI_1422_CHECKPOINT, bootstrap=BOOTSTRAP, finality_update=bytes(chunk)
        )
    assert error.value.check == "unknown fork"
    assert "0xdeadbeef" in str(error.value)


def test_an_unknown_network_is_named() -> None:
    with pytest.raises(ConsensusProofError) as error:
        verify_finality(network="kiln", checkpoint=COLIBRI_1422_CHECKPOINT, bootstrap=BOOTSTRAP)
    assert error.value.check == "unknown network"


def test_truncated_ssz_is_malformed() -> None:
    with pytest.raises(ConsensusProofError) as error:
        verify_finality(
            checkpoint=COLIBRI_1422_CHECKPOINT, bootstrap=colibri("bootstrap_0xb8758d")[:-40]
        )
    assert error.value.check == "malformed"


def test_a_flipped_signature_byte_in_the_served_bytes() -> None:
    raw = bytearray(colibri("period_1422"))
    # The chunk's SSZ starts at 12; its signature is 96 bytes before the final 8-byte slot of the
    # fixed part, which ends where the first offset points.
    fixed_end = 12 + int.from_bytes(raw[12:16], "little")
    raw[fixed_end - 8 - 50] ^= 0x01
    with pytest.raises(ConsensusProofError) as error:
        verify_finality(
            checkpoint=COLIBRI_1422_CHECKPOINT, bootstrap=BOOTSTRAP, finality_update=bytes(raw)
        )
    assert error.value.check == "signature"


def helios_chain(**changes: Callable[[Any], None]) -> None:
    answers = {name: copy.deepcopy(helios(name)) for name in ("bootstrap", "updates", "finality")}
    for name, change in changes.items():
        change(answers[name])
    verify_finality(
        checkpoint=HELIOS_CHECKPOINT,
        bootstrap=answers["bootstrap"],
        updates=answers["updates"],
        finality_update=answers["finality"],
    )


def _set(path: list[str | int], value: object) -> Callable[[Any], None]:
    def change(answer: Any) -> None:
        node = answer
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return change


HELIOS_CASES: dict[str, tuple[str, dict[str, Callable[[Any], None]]]] = {
    "an update left out of the chain": (
        "missing committee",
        {"updates": lambda updates: updates.pop(3)},
    ),
    "a handed-over committee member replaced": (
        "committee branch",
        {
            "updates": _set(
                [2, "data", "next_sync_committee", "pubkeys", 7],
                helios("bootstrap")["data"]["current_sync_committee"]["pubkeys"][8],
            )
        },
    ),
    "a version naming no fork": ("unknown fork", {"finality": _set(["version"], "gloamsterdam")}),
    "a hex field of the wrong size": (
        "malformed",
        {"finality": _set(["data", "signature_slot"], "0x12")},
    ),
}


@pytest.mark.parametrize("case", HELIOS_CASES, ids=list(HELIOS_CASES))
def test_tampered_capella_chain_is_refused_for_its_reason(case: str) -> None:
    check, changes = HELIOS_CASES[case]
    with pytest.raises(ConsensusProofError) as error:
        helios_chain(**changes)
    assert error.value.check == check, str(error.value)
