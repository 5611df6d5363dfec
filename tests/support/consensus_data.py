"""The real light-client data of tests/vectors/consensus/, loaded as the Beacon API served it.

Mainnet JSON (helios, Capella), mainnet SSZ (colibri, Deneb -> Electra) and the consensus
spec's minimal-preset vectors (snappy-compressed SSZ with their ``steps.yaml``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import cramjam
import yaml

from guard.consensus import MINIMAL, Network

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "consensus"
HELIOS = VECTORS / "helios-mainnet-capella"
COLIBRI = VECTORS / "colibri-mainnet-deneb-electra"
COLIBRI_46 = VECTORS / "colibri-mainnet-deneb-46-periods"
SPEC = VECTORS / "spec-tests-minimal"

HELIOS_CHECKPOINT = "0x5afc212a7924789b2bc86acad3ab3a6ffb1f6e97253ea50bee7f4f51422c9275"
"""The root of helios' bootstrap header: the trusted constant of helios' own tests."""
HELIOS_BLOCK = (17_923_026, "0xbc8499537876e5406c7a65e25f99063f1cd85a17014a3aa5ade38271b1fbf64f")
"""The execution block helios' finality update finalizes (mainnet)."""
COLIBRI_1421_CHECKPOINT = "0xd9717ecc253684291f828688f311ba74d05af74c31654f6e14077669fca62f6a"
"""The root of colibri's Deneb bootstrap (slot 11640864), as its file name and request say."""
COLIBRI_1422_CHECKPOINT = "0xb8758d4bd976e1b33e62937ed31a709dba0a855869641581bef3d2a48b527690"
"""The root of colibri's Electra bootstrap (slot 11649056)."""
COLIBRI_46_CHECKPOINT = "0x2e522016a5ac7d8d57d758b633a25491a43d12750db8f417fd6cf264b7ec5650"
"""The root of colibri's period-1347 bootstrap (its file name, the request, starts with it)."""
COLIBRI_BLOCK = (22_432_991, "0xd4c1a04e15667a6a012075daee220cf04a052a3491632572bfb0e5d90736b4cb")
"""The execution block colibri's period-1422 update finalizes (mainnet)."""

SPEC_DENEB = replace(MINIMAL, name="minimal-deneb", forks=MINIMAL.forks[:-1])
"""The Deneb vectors' network: the minimal preset without Electra (their config has none)."""


def helios(name: str) -> Any:
    """One of helios' JSON answers (``bootstrap``, ``updates``, ``finality``, ``optimistic``)."""
    return json.loads((HELIOS / f"{name}.json").read_text())


def colibri(part: str, folder: Path = COLIBRI) -> bytes:
    """The one colibri file whose name holds ``part`` (``bootstrap_0xd9717e``, ``period_1422``)."""
    (path,) = folder.glob(f"*{part}*")
    return path.read_bytes()


@dataclass(frozen=True)
class SpecStep:
    """One ``process_update`` step of a spec vector: the update and the store it leads to."""

    update: bytes | None
    """The update's SSZ (None when the vendored copy left the file out)."""
    name: str
    """The update's file name (its suffix: s = hands over a committee, f = proves finality)."""
    finalized_slot: int
    """The slot of the store's finalized header after the step."""
    finalized_root: str
    """The root of that header."""
    finalized_execution_root: str
    """The root of that header's execution payload header."""
    after_force_update: bool
    """Whether a ``force_update`` step (a store timeout, not a proof) came before it."""


@dataclass(frozen=True)
class SpecVector:
    """One spec light-client test: its network, checkpoint, bootstrap and steps."""

    name: str
    """``fork/test``."""
    network: Network
    """The network of its config."""
    checkpoint: str
    """Its ``trusted_block_root``."""
    bootstrap: bytes
    """The bootstrap's SSZ."""
    steps: tuple[SpecStep, ...]
    """Its ``process_update`` steps in order."""


def _snappy(path: Path) -> bytes:
    return bytes(cramjam.snappy.decompress_raw(path.read_bytes()))


def spec_vectors() -> list[SpecVector]:
    """Every spec light-client test vendored under ``spec-tests-minimal/``."""
    out = []
    for folder in sorted(SPEC.glob("*/*")):
        fork = folder.parent.name
        meta = yaml.safe_load((folder / "meta.yaml").read_text())
        steps: list[SpecStep] = []
        forced = False
        for step in yaml.safe_load((folder / "steps.yaml").read_text()):
            if "force_update" in step:
                forced = True
                continue
            if "process_update" not in step:
                continue
            body = step["process_update"]
            path = folder / f"{body['update']}.ssz_snappy"
            finalized = body["checks"]["finalized_header"]
            steps.append(
                SpecStep(
                    update=_snappy(path) if path.exists() else None,
                    name=body["update"],
                    finalized_slot=int(finalized["slot"]),
                    finalized_root=finalized["beacon_root"],
                    finalized_execution_root=finalized["execution_root"],
                    after_force_update=forced,
                )
            )
        out.append(
            SpecVector(
                name=f"{fork}/{folder.name}",
                network=SPEC_DENEB if fork == "deneb" else MINIMAL,
                checkpoint=meta["trusted_block_root"],
                bootstrap=_snappy(folder / "bootstrap.ssz_snappy"),
                steps=tuple(steps),
            )
        )
    return out
