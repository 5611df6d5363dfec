"""Beacon networks: what a light client must know of a chain before it trusts a signature.

A sync committee signs a header under a *domain* mixing the fork version in force and the
chain's ``genesis_validators_root``, so a signature of one network or fork never verifies on
another. The fork version is the one of the epoch of ``signature_slot - 1`` (the slot before
the signature's block, which is how the spec places a signature made at a fork's first slot).
Where in the beacon state finality and committees sit (their generalized indices) changed with
Electra, chosen by the fork of the attested header's slot.

Constants are the published network configurations (consensus-specs ``configs/mainnet.yaml``,
eth-clients' ``sepolia/config.yaml``, ``presets/{mainnet,minimal}``); "minimal" is the spec's test preset (committees of 32,
8-slot epochs) with every fork from genesis, as the spec's light-client vectors use it.
"""

from __future__ import annotations

from dataclasses import dataclass

from guard.consensus.ssz import merkleize, sha256

SUPPORTED_FORKS = ("capella", "deneb", "electra", "fulu")
"""Forks whose light-client headers carry an execution payload header (what we prove)."""

DOMAIN_SYNC_COMMITTEE = bytes.fromhex("07000000")
"""The domain type of sync-committee signatures."""

EXECUTION_PAYLOAD_GINDEX = 25
"""The execution payload header in a beacon block body (Capella on)."""


@dataclass(frozen=True, slots=True)
class Fork:
    """One fork of a network: its name, first epoch and version."""

    name: str
    """Lower-case fork name (``capella``, ``electra``…)."""
    epoch: int
    """The first epoch it is in force."""
    version: bytes
    """The 4-byte fork version signatures are domain-separated by."""


@dataclass(frozen=True, slots=True)
class Network:
    """A beacon network's constants, as a light client needs them."""

    name: str
    """What receipts and configs call it (``mainnet``)."""
    genesis_validators_root: bytes
    """The root of the genesis validator set (separates networks' signatures)."""
    forks: tuple[Fork, ...]
    """The fork schedule, by ascending epoch."""
    slots_per_epoch: int = 32
    """Slots in an epoch."""
    epochs_per_period: int = 256
    """Epochs a sync committee serves."""
    committee_size: int = 512
    """Members of a sync committee."""
    blob_schedule: tuple[tuple[int, int], ...] = ()
    """(epoch, max blobs) changes from Fulu on: they enter Fulu's fork digests."""
    execution_chain_id: int | None = None
    """The EIP-155 chain id of the execution chain it finalizes (None: a test network, any)."""

    def fork_at_slot(self, slot: int) -> Fork:
        """The fork in force at ``slot``."""
        epoch = slot // self.slots_per_epoch
        current = self.forks[0]
        for fork in self.forks:
            if fork.epoch <= epoch:
                current = fork
        return current

    def period_at_slot(self, slot: int) -> int:
        """The sync-committee period of ``slot``."""
        return slot // (self.slots_per_epoch * self.epochs_per_period)

    def domain(self, fork: Fork) -> bytes:
        """The sync-committee signing domain under ``fork``."""
        return DOMAIN_SYNC_COMMITTEE + self._fork_data_root(fork)[:28]

    def fork_digests(self) -> dict[bytes, Fork]:
        """Every 4-byte fork digest of the network (what the Beacon API puts before an SSZ
        chunk), with its fork; from Fulu on one per blob-schedule entry."""
        digests = {self._fork_data_root(fork)[:4]: fork for fork in self.forks}
        fulu = next((fork for fork in self.forks if fork.name == "fulu"), None)
        if fulu is not None:
            base = self._fork_data_root(fulu)
            for epoch, max_blobs in self.blob_schedule:
                mask = sha256(epoch.to_bytes(8, "little") + max_blobs.to_bytes(8, "little"))
                digests[bytes(a ^ b for a, b in zip(base[:4], mask[:4], strict=True))] = fulu
        return digests

    def _fork_data_root(self, fork: Fork) -> bytes:
        return merkleize([fork.version + bytes(28), self.genesis_validators_root])


def _forks(versions: dict[str, tuple[int, str]]) -> tuple[Fork, ...]:
    return tuple(
        Fork(name, epoch, bytes.fromhex(version)) for name, (epoch, version) in versions.items()
    )


MAINNET = Network(
    name="mainnet",
    genesis_validators_root=bytes.fromhex(
        "4b363db94e286120d76eb905340fdd4e54bfe9f06bf33ff6cf5ad27f511bfe95"
    ),
    forks=_forks(
        {
            "phase0": (0, "00000000"),
            "altair": (74240, "01000000"),
            "bellatrix": (144896, "02000000"),
            "capella": (194048, "03000000"),
            "deneb": (269568, "04000000"),
            "electra": (364032, "05000000"),
            "fulu": (411392, "06000000"),
        }
    ),
    # Electra's limit until the first blob-parameter-only fork, then the two BPO forks.
    blob_schedule=((364032, 9), (412672, 15), (419072, 21)),
    execution_chain_id=1,
)

SEPOLIA = Network(
    name="sepolia",
    genesis_validators_root=bytes.fromhex(
        "d8ea171f3c94aea21ebc42a1ed61052acf3f9209c00e4efbaaddac09ed9b8078"
    ),
    forks=_forks(
        {
            "phase0": (0, "90000069"),
            "altair": (50, "90000070"),
            "bellatrix": (100, "90000071"),
            "capella": (56832, "90000072"),
            "deneb": (132608, "90000073"),
            "electra": (222464, "90000074"),
            "fulu": (272640, "90000075"),
        }
    ),
    blob_schedule=((222464, 9), (274176, 15), (275712, 21)),
    execution_chain_id=11155111,
)

MINIMAL = Network(
    name="minimal",
    # The genesis of the spec's Electra light-client vectors (minimal preset).
    genesis_validators_root=bytes.fromhex(
        "0a08c27fe4ece2483f9e581f78c66379a06f96e9c24cd1390594ff939b26f95b"
    ),
    forks=_forks(
        {
            "phase0": (0, "00000001"),
            "altair": (0, "01000001"),
            "bellatrix": (0, "02000001"),
            "capella": (0, "03000001"),
            "deneb": (0, "04000001"),
            "electra": (0, "05000001"),
        }
    ),
    slots_per_epoch=8,
    epochs_per_period=8,
    committee_size=32,
)

NETWORKS = {network.name: network for network in (MAINNET, SEPOLIA, MINIMAL)}
"""The networks known by name."""


@dataclass(frozen=True, slots=True)
class Gindices:
    """Where a fork's beacon state keeps what a light client proves."""

    finalized_root: int
    """The finalized checkpoint's root."""
    current_sync_committee: int
    """The current sync committee."""
    next_sync_committee: int
    """The next sync committee."""


BEFORE_ELECTRA = Gindices(finalized_root=105, current_sync_committee=54, next_sync_committee=55)
FROM_ELECTRA = Gindices(finalized_root=169, current_sync_committee=86, next_sync_committee=87)


def gindices(fork: Fork) -> Gindices:
    """The generalized indices of a state of ``fork`` (Electra grew the state's field count
    past 32, adding a level to every branch)."""
    return BEFORE_ELECTRA if fork.name in ("capella", "deneb") else FROM_ELECTRA
