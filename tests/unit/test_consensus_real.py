"""guard.consensus on data nobody here wrote: mainnet's own signatures and the spec's vectors.

Each file of tests/vectors/consensus/ is verified: helios' Capella chain (a checkpoint, six
committee hand-overs, a finality update: mainnet block 17,923,026), colibri's SSZ across the
Deneb -> Electra fork (block 22,432,991), and every ``process_update`` step of the spec's
light-client vectors, whose ``steps.yaml`` says which header a conforming client holds as
finalized after it.
"""

from __future__ import annotations

import pytest

from guard.consensus import MAINNET, ConsensusProofError, verify_finality
from guard.consensus.decode import bootstrap_of, updates_of
from guard.consensus.light_client import apply_update
from tests.support.consensus_data import (
    COLIBRI_46,
    COLIBRI_46_CHECKPOINT,
    COLIBRI_1421_CHECKPOINT,
    COLIBRI_1422_CHECKPOINT,
    COLIBRI_BLOCK,
    HELIOS_BLOCK,
    HELIOS_CHECKPOINT,
    SpecVector,
    colibri,
    helios,
    spec_vectors,
)


def test_helios_capella_chain_proves_block_17923026() -> None:
    proven = verify_finality(
        network="mainnet",
        checkpoint=HELIOS_CHECKPOINT,
        bootstrap=helios("bootstrap"),
        updates=helios("updates"),
        finality_update=helios("finality"),
    )
    assert (proven.execution_block_number, proven.execution_block_hash) == HELIOS_BLOCK
    assert proven.finalized_slot == 7_109_344
    assert (proven.participation, proven.committee_size) == (512, 512)
    assert proven.periods == tuple(range(862, 869))  # the checkpoint's and six hand-overs


def test_helios_answers_without_their_envelope_verify_the_same() -> None:
    """``data`` alone (no ``version``) is a Beacon API answer too."""
    proven = verify_finality(
        checkpoint=HELIOS_CHECKPOINT,
        bootstrap=helios("bootstrap")["data"],
        updates=[item["data"] for item in helios("updates")],
        finality_update=helios("finality")["data"],
    )
    assert proven.execution_block_number == HELIOS_BLOCK[0]


def test_helios_last_update_stands_for_the_finality_update_when_none_is_given() -> None:
    updates = helios("updates")
    proven = verify_finality(
        checkpoint=HELIOS_CHECKPOINT, bootstrap=helios("bootstrap"), updates=updates
    )
    last = updates[-1]["data"]["finalized_header"]
    assert proven.finalized_slot == int(last["beacon"]["slot"])
    assert proven.execution_block_number == int(last["execution"]["block_number"])


def test_helios_optimistic_update_proves_no_finality() -> None:
    with pytest.raises(ConsensusProofError) as error:
        verify_finality(
            checkpoint=HELIOS_CHECKPOINT,
            bootstrap=helios("bootstrap"),
            updates=helios("updates"),
            finality_update=helios("optimistic"),
        )
    assert error.value.check == "no finality"


def test_colibri_deneb_to_electra_proves_block_22432991() -> None:
    """A Deneb bootstrap, a Deneb update signed under 0x04000000 handing over period 1422's
    committee, and an Electra update (longer branches, new gindices) proving finality."""
    proven = verify_finality(
        checkpoint=COLIBRI_1421_CHECKPOINT,
        bootstrap=colibri("bootstrap_0xd9717e"),
        updates=[colibri("period_1421"), colibri("period_1422")],
    )
    assert (proven.execution_block_number, proven.execution_block_hash) == COLIBRI_BLOCK
    assert proven.finalized_slot == 11_651_008
    assert proven.participation == 508
    assert proven.periods == (1421, 1422, 1423)


def test_colibri_handover_equals_the_independent_electra_bootstrap() -> None:
    handed = updates_of([colibri("period_1421")], MAINNET)[0].next_sync_committee
    bootstrap = bootstrap_of(colibri("bootstrap_0xb8758d"), MAINNET)
    assert handed == bootstrap.current_sync_committee
    assert "0x" + bootstrap.header.beacon.root().hex() == COLIBRI_1422_CHECKPOINT
    proven = verify_finality(
        checkpoint=COLIBRI_1422_CHECKPOINT,
        bootstrap=colibri("bootstrap_0xb8758d"),
        updates=[],
        finality_update=colibri("period_1422"),
    )
    assert (proven.execution_block_number, proven.execution_block_hash) == COLIBRI_BLOCK


def test_colibri_periods_1401_1402_hand_over_and_need_their_own_committee() -> None:
    """Period 1401's update hands over the committee that signed period 1402's; from the
    1421 checkpoint neither can be checked (no committee of theirs is known)."""
    first, second = updates_of([colibri("period_1401"), colibri("period_1402")], MAINNET)
    assert MAINNET.period_at_slot(first.attested_header.beacon.slot) == 1401
    committees = {1402: first.next_sync_committee}
    assert committees[1402] is not None
    apply_update(MAINNET, committees, second, "update 1402")  # type: ignore[arg-type]
    assert set(committees) == {1402, 1403}
    with pytest.raises(ConsensusProofError) as error:
        verify_finality(
            checkpoint=COLIBRI_1421_CHECKPOINT,
            bootstrap=colibri("bootstrap_0xd9717e"),
            updates=[colibri("period_1401")],
        )
    assert error.value.check == "missing committee"
    assert "period 1401" in str(error.value)


SPEC = spec_vectors()


@pytest.mark.parametrize("vector", SPEC, ids=[vector.name for vector in SPEC])
def test_spec_vectors_every_finality_step(vector: SpecVector) -> None:
    """For each step whose update proves finality, the proven header is the spec store's
    finalized header (root and execution root), or an older one where the store moved on
    without a proof (a ``force_update``, or a store already past it)."""
    handovers: list[bytes] = []
    matched = 0
    for step in vector.steps:
        if step.update is None:
            continue
        update = updates_of([step.update], vector.network)[0]
        if not update.proves_finality:
            with pytest.raises(ConsensusProofError) as error:
                verify_finality(
                    network=vector.network,
                    checkpoint=vector.checkpoint,
                    bootstrap=vector.bootstrap,
                    updates=handovers,
                    finality_update=step.update,
                )
            assert error.value.check == "no finality"
        else:
            proven = verify_finality(
                network=vector.network,
                checkpoint=vector.checkpoint,
                bootstrap=vector.bootstrap,
                updates=handovers,
                finality_update=step.update,
            )
            if proven.finalized_root == step.finalized_root:
                execution = update.finalized_header.execution
                assert proven.finalized_slot == step.finalized_slot
                assert "0x" + execution.root(with_blobs=True).hex() == step.finalized_execution_root
                matched += 1
            else:
                assert proven.finalized_slot < step.finalized_slot, step.name
                assert step.after_force_update or vector.name.endswith("from_past_update")
        if update.hands_over_committee:
            handovers.append(step.update)
    if not vector.name.endswith("from_past_update"):
        assert matched >= 2


def test_one_updates_answer_of_two_chunks_is_read_as_two_updates() -> None:
    """``/updates?start_period=1421&count=2`` answers both response chunks in one body."""
    answer = colibri("period_1421") + colibri("period_1422")
    proven = verify_finality(
        checkpoint=COLIBRI_1421_CHECKPOINT,
        bootstrap=colibri("bootstrap_0xd9717e"),
        updates=[answer],
    )
    assert (proven.execution_block_number, proven.execution_block_hash) == COLIBRI_BLOCK
    assert len(updates_of([answer], MAINNET)) == 2


def test_colibri_46_hand_overs_in_one_updates_answer() -> None:
    """Mainnet, Deneb: a checkpoint of period 1347 and one ``/updates`` answer of 46 response
    chunks, each committee handing over the next, up to period 1393's."""
    answer = colibri("period_1347_count_46", COLIBRI_46)
    proven = verify_finality(
        checkpoint=COLIBRI_46_CHECKPOINT,
        bootstrap=colibri("bootstrap_0x2e5220", COLIBRI_46),
        updates=[answer],
    )
    assert proven.periods == tuple(range(1347, 1394))
    assert proven.execution_block_number == 22_186_786
    assert proven.execution_block_hash == (
        "0xdcc536449ee23f57f5a69b92b8f3504f9d5ff39a8384c70b2dc893d73672b266"
    )
    # One chunk left out of the middle: the chain of committees breaks there.
    at = 0
    for _ in range(20):
        at += 8 + int.from_bytes(answer[at : at + 8], "little")
    end = at + 8 + int.from_bytes(answer[at : at + 8], "little")
    with pytest.raises(ConsensusProofError) as error:
        verify_finality(
            checkpoint=COLIBRI_46_CHECKPOINT,
            bootstrap=colibri("bootstrap_0x2e5220", COLIBRI_46),
            updates=[answer[:at] + answer[end:]],
        )
    assert error.value.check == "missing committee"
