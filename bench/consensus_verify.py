"""Verify time of Ethereum consensus finality, as a receipt's reader pays it.

``.venv/bin/python -m bench.consensus_verify [--runs 20] [--baseline]``

Each figure is the median wall time of ``guard.consensus.verify_finality`` over real mainnet
data (tests/vectors/consensus/), every run from scratch: nothing is cached between runs (no
decompressed key, no verified committee), which is what a verifier meeting a receipt cold
pays. Cases:

- **one period**: colibri's Electra bootstrap (period 1422) and the update finalizing block
  22,432,991, one 512-member signature (508 signers): a receipt whose checkpoint is in the
  signing period;
- **six hand-overs**: helios' Capella chain, bootstrap at period 862, six updates and the
  finality update (seven signatures): a checkpoint ~6 periods (~6.5 days) old;
- **46 hand-overs**: colibri's Deneb bootstrap at period 1347 and one ``/updates`` answer of
  46 SSZ chunks (47 signatures): a checkpoint ~7 weeks old;
- the JSON size a receipt's ``consensus`` section has for the first two.

``--baseline`` also times py_ecc (the consensus specs' BLS) on the one-period signature.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

from guard.consensus import MAINNET, verify_finality
from guard.consensus.containers import signing_root
from guard.consensus.decode import bootstrap_of, updates_of
from tests.support.consensus_data import (
    COLIBRI_46,
    COLIBRI_46_CHECKPOINT,
    COLIBRI_1422_CHECKPOINT,
    HELIOS_CHECKPOINT,
    colibri,
    helios,
)


def median_ms(run: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def one_period() -> object:
    return verify_finality(
        checkpoint=COLIBRI_1422_CHECKPOINT,
        bootstrap=colibri("bootstrap_0xb8758d"),
        finality_update=colibri("period_1422"),
    )


def six_handovers() -> object:
    return verify_finality(
        checkpoint=HELIOS_CHECKPOINT,
        bootstrap=helios("bootstrap"),
        updates=helios("updates"),
        finality_update=helios("finality"),
    )


def forty_six_handovers() -> object:
    return verify_finality(
        checkpoint=COLIBRI_46_CHECKPOINT,
        bootstrap=colibri("bootstrap_0x2e5220", COLIBRI_46),
        updates=[colibri("period_1347_count_46", COLIBRI_46)],
    )


def section_kb(*answers: object) -> float:
    return len(json.dumps(answers, separators=(",", ":"))) / 1024


def py_ecc_ms() -> float:
    from eth_typing import BLSPubkey, BLSSignature
    from py_ecc.bls.ciphersuites import G2ProofOfPossession

    committee = bootstrap_of(colibri("bootstrap_0xb8758d"), MAINNET).current_sync_committee
    update = updates_of([colibri("period_1422")], MAINNET)[0]
    fork = MAINNET.fork_at_slot(update.signature_slot - 1)
    message = signing_root(update.attested_header.beacon.root(), MAINNET.domain(fork))
    keys = [
        BLSPubkey(k)
        for k, bit in zip(committee.pubkeys, update.sync_aggregate.bits, strict=True)
        if bit
    ]
    start = time.perf_counter()
    assert G2ProofOfPossession.FastAggregateVerify(
        keys, message, BLSSignature(update.sync_aggregate.signature)
    )
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--baseline", action="store_true", help="also time py_ecc (slow)")
    args = parser.parse_args()
    # The JSON form of the colibri SSZ is not stored; its size is that of the helios JSON's
    # bootstrap and one update, the same containers.
    one_kb = section_kb(helios("bootstrap"), helios("finality"))
    six_kb = section_kb(helios("bootstrap"), helios("updates"), helios("finality"))
    print(
        f"one period (Electra, 508/512 signed):   {median_ms(one_period, args.runs):7.1f} ms"
        f"  (target <= 100 ms; section ~{one_kb:.0f} KB of JSON)"
    )
    print(
        f"six hand-overs (Capella, 7 signatures): {median_ms(six_handovers, args.runs):7.1f} ms"
        f"  (section ~{six_kb:.0f} KB of JSON)"
    )
    print(
        f"46 hand-overs (Deneb, 47 signatures):    {median_ms(forty_six_handovers, max(3, args.runs // 4)):7.1f} ms"
    )
    if args.baseline:
        print(f"baseline, py_ecc, the one-period signature alone: {py_ecc_ms():9.1f} ms")


if __name__ == "__main__":
    main()
