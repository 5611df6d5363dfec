"""guard.consensus.bls against py_ecc, the consensus specs' own (slow, pure Python) BLS.

Real signatures: a spec vector's sync aggregate (minimal preset, 32 keys) is verified by both;
a mainnet committee's aggregate key minus its non-signers is the sum of its signers' keys;
and a signature made with arkworks' arithmetic (as the test beacon signs) is py_ecc's.
"""

from __future__ import annotations

from eth_typing import BLSPubkey, BLSSignature
from py_arkworks_bls12381 import G1Point, G2Point, Scalar
from py_ecc.bls.ciphersuites import G2ProofOfPossession

from guard.consensus import MAINNET
from guard.consensus.bls import POP_DST, fast_aggregate_verify
from guard.consensus.containers import signing_root
from guard.consensus.decode import bootstrap_of, updates_of
from tests.support.consensus_data import colibri, spec_vectors


def test_spec_sync_aggregate_verifies_here_and_in_py_ecc() -> None:
    vector = next(v for v in spec_vectors() if v.name == "electra/light_client_sync")
    committee = bootstrap_of(vector.bootstrap, vector.network).current_sync_committee
    step = vector.steps[0]
    assert step.update is not None
    update = updates_of([step.update], vector.network)[0]
    fork = vector.network.fork_at_slot(update.signature_slot - 1)
    message = signing_root(update.attested_header.beacon.root(), vector.network.domain(fork))
    bits = update.sync_aggregate.bits
    signers = [BLSPubkey(key) for key, bit in zip(committee.pubkeys, bits, strict=True) if bit]
    signature = update.sync_aggregate.signature
    assert G2ProofOfPossession.FastAggregateVerify(signers, message, BLSSignature(signature))
    assert fast_aggregate_verify(
        committee.aggregate_pubkey, committee.pubkeys, bits, message, signature
    )
    assert not fast_aggregate_verify(
        committee.aggregate_pubkey, committee.pubkeys, bits, bytes(32), signature
    )


def test_aggregate_key_minus_non_signers_is_the_sum_of_signers() -> None:
    committee = bootstrap_of(colibri("bootstrap_0xb8758d"), MAINNET).current_sync_committee
    bits = updates_of([colibri("period_1422")], MAINNET)[0].sync_aggregate.bits
    assert 0 < bits.count(False) < 10  # 508 of 512 signed
    total = G1Point.identity()
    for key in committee.pubkeys:
        total = total + G1Point.from_compressed_bytes(key)
    assert total.to_compressed_bytes() == committee.aggregate_pubkey
    signers = G1Point.identity()
    missing = G1Point.from_compressed_bytes(committee.aggregate_pubkey)
    for key, bit in zip(committee.pubkeys, bits, strict=True):
        if bit:
            signers = signers + G1Point.from_compressed_bytes(key)
        else:
            missing = missing - G1Point.from_compressed_bytes(key)
    assert signers == missing


def test_a_signature_made_with_arkworks_is_py_ecc_s() -> None:
    secret, message = 0x1234_5678_9ABC, b"\x42" * 32
    ours = (G2Point.hash_to_curve(message, POP_DST) * Scalar(secret)).to_compressed_bytes()
    assert ours == G2ProofOfPossession.Sign(secret, message)
    assert (G1Point() * Scalar(secret)).to_compressed_bytes() == G2ProofOfPossession.SkToPk(secret)
