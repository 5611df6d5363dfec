"""The networks' fork digests against digests others computed: what an SSZ chunk of the
Beacon API is prefixed with, so a wrong one refuses good data as an unknown fork.

Mainnet's Deneb and Electra digests are the ones mainnet's beacon nodes put before colibri's
``/updates`` chunks (tests/vectors/consensus/); Sepolia's, Fulu's blob-parameter digests
included, are those a Go consensus client's test pins (``TestSepoliaForkDigests``, from
eth-clients/sepolia's config.yaml and the Fulu ``compute_fork_digest``).
"""

from __future__ import annotations

import pytest

from guard.consensus import MAINNET, NETWORKS
from guard.consensus.decode import updates_of
from tests.support.consensus_data import colibri


def digests(network: str) -> dict[str, str]:
    return {d.hex(): fork.name for d, fork in NETWORKS[network].fork_digests().items()}


@pytest.mark.parametrize(
    ("part", "fork"),
    [("period_1401", "deneb"), ("period_1421", "deneb"), ("period_1422", "electra")],
)
def test_mainnet_digests_are_those_mainnet_served(part: str, fork: str) -> None:
    served = colibri(part)[8:12].hex()
    assert digests("mainnet")[served] == fork
    update = updates_of([colibri(part)], MAINNET)[0]  # and the fork of its attested slot
    assert MAINNET.fork_at_slot(update.attested_header.beacon.slot).name == fork


def test_sepolia_digests_fulu_and_its_blob_forks_included() -> None:
    known = digests("sepolia")
    assert known["14045b5a"] == "electra"
    assert known["7e0d3447"] == "fulu"  # Fulu with Electra's 9 blobs
    assert known["fd32b622"] == "fulu"  # BPO1: 15 blobs
    assert known["74d01459"] == "fulu"  # BPO2: 21 blobs
