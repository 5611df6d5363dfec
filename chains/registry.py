"""The registry of known chains and the defaults the watcher uses for them.

A configuration names a chain by its EIP-155 chain id; most of what is needed to watch it
safely (how deep a block must be before it is treated as final, whether the node answers the
``finalized`` and ``safe`` block tags, how often a new block appears) is a property of the
chain, not of the deployment. This registry holds those properties so a config file can say
only ``chain_id = 1`` and get conservative values, and so an explicit value can be checked
against what the chain supports.

The defaults lean towards safety over speed: a depth ``N`` is chosen so that the depth rule
does not declare a block final much earlier than the chain's own finality would, and at least
as deep as any reorg observed on that chain. A config file may always ask for more (or less).

Why each depth N:

- ``local`` (31337, N=3): anvil is a dev node; 3 exercises the depth rule without slowing tests.
- ``ethereum`` (1, N=64): two epochs (~12.8 min), about when Casper FFG finalizes a block, so
  depth and ``finalized`` agree; no post-Merge reorg has come anywhere near this deep.
- ``sepolia`` (11155111, N=64): the same consensus and slot time as mainnet.
- ``base`` (8453, N=600): OP Stack, ~20 min at 2 s, about when the batch holding the block is
  in a finalized L1 block; a shallower depth trusts only the sequencer.
- ``optimism`` (10, N=600): OP Stack, the same reasoning and block time as Base.
- ``arbitrum`` (42161, N=4800): ~20 min at the 0.25 s minimum block time, about when the batch
  is L1-finalized; Nitro maps ``safe``/``finalized`` to L1's.
- ``polygon`` (137, N=256): ~8.5 min, well past the deepest observed reorg (157 blocks, Feb
  2023); milestones usually make ``finalized`` arrive far sooner. Bor has no ``safe`` tag.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from guard.types import ChainId

FINALITY_MODES: tuple[str, ...] = ("depth", "finalized", "depth_or_finalized")
"""The finality rules a chain can be watched under.

``depth``: final once ``head - block + 1 >= N``. ``finalized``: final once the node's
``finalized`` block is at or above the block. ``depth_or_finalized``: whichever comes first.
"""


@dataclass(frozen=True)
class KnownChain:
    """One chain the watcher knows, with the defaults used when a config omits a key."""

    name: str
    """Short lower-case name, the key in :data:`KNOWN_CHAINS` (e.g. ``"ethereum"``)."""
    chain_id: ChainId
    """EIP-155 chain id, as answered by ``eth_chainId``."""
    default_confirmations: int
    """Depth N (head - block + 1) at which a block counts as final under the depth rule."""
    default_finality: str
    """Finality rule used when the config gives none: one of :data:`FINALITY_MODES`."""
    supports_finalized: bool
    """The chain's nodes answer the ``finalized`` block tag with a meaningful block."""
    supports_safe: bool
    """The chain's nodes answer the ``safe`` block tag with a meaningful block."""
    block_time_s: float
    """Typical seconds between blocks; the default poll interval."""

    def __post_init__(self) -> None:
        """Refuse a registry entry whose defaults could not be used as written."""
        if not self.name or self.name != self.name.lower():
            raise ValueError(f"known chain name must be non-empty lower case: {self.name!r}")
        if self.chain_id <= 0:
            raise ValueError(f"{self.name}: chain_id must be > 0 (got {self.chain_id})")
        if self.default_confirmations < 1:
            raise ValueError(
                f"{self.name}: default_confirmations must be >= 1 "
                f"(got {self.default_confirmations})"
            )
        if self.default_finality not in FINALITY_MODES:
            raise ValueError(
                f"{self.name}: default_finality must be one of {FINALITY_MODES} "
                f"(got {self.default_finality!r})"
            )
        if self.default_finality != "depth" and not self.supports_finalized:
            raise ValueError(
                f"{self.name}: default_finality {self.default_finality!r} needs the "
                "'finalized' tag, which this chain does not support"
            )
        if not self.block_time_s > 0:
            raise ValueError(f"{self.name}: block_time_s must be > 0 (got {self.block_time_s})")


_CHAINS: tuple[KnownChain, ...] = (
    KnownChain(
        name="local",
        chain_id=ChainId(31337),
        default_confirmations=3,
        default_finality="depth",
        supports_finalized=True,
        supports_safe=True,
        block_time_s=1.0,
    ),
    KnownChain(
        name="ethereum",
        chain_id=ChainId(1),
        default_confirmations=64,
        default_finality="depth_or_finalized",
        supports_finalized=True,
        supports_safe=True,
        block_time_s=12.0,
    ),
    KnownChain(
        name="sepolia",
        chain_id=ChainId(11155111),
        default_confirmations=64,
        default_finality="depth_or_finalized",
        supports_finalized=True,
        supports_safe=True,
        block_time_s=12.0,
    ),
    KnownChain(
        name="base",
        chain_id=ChainId(8453),
        default_confirmations=600,
        default_finality="depth_or_finalized",
        supports_finalized=True,
        supports_safe=True,
        block_time_s=2.0,
    ),
    KnownChain(
        name="optimism",
        chain_id=ChainId(10),
        default_confirmations=600,
        default_finality="depth_or_finalized",
        supports_finalized=True,
        supports_safe=True,
        block_time_s=2.0,
    ),
    KnownChain(
        name="arbitrum",
        chain_id=ChainId(42161),
        default_confirmations=4800,
        default_finality="depth_or_finalized",
        supports_finalized=True,
        supports_safe=True,
        block_time_s=0.25,
    ),
    KnownChain(
        name="polygon",
        chain_id=ChainId(137),
        default_confirmations=256,
        default_finality="depth_or_finalized",
        supports_finalized=True,
        supports_safe=False,
        block_time_s=2.0,
    ),
)

KNOWN_CHAINS: Mapping[str, KnownChain] = MappingProxyType({c.name: c for c in _CHAINS})
"""Every known chain by name (read-only)."""

_BY_ID: Mapping[int, KnownChain] = MappingProxyType({c.chain_id: c for c in _CHAINS})


def known_chain(chain_id: int) -> KnownChain | None:
    """Return the registry entry for ``chain_id``, or ``None`` if the chain is not known."""
    return _BY_ID.get(chain_id)
