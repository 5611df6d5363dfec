"""The registry of known chains and the defaults the watcher uses for them.

A configuration names a chain by its EIP-155 chain id; most of what is needed to watch it
safely (what "final" means there and how the watcher learns it, whether the node answers the
``finalized`` and ``safe`` block tags, how often a new block appears, whether a receipt can
carry a header chain a third party re-hashes) is a property of the chain, not of the
deployment. This registry holds those properties so a config file can say only
``chain_id = 1`` and get safe values, and so an explicit value can be checked against what
the chain supports. docs/finality.md has the same facts as one table, chain by chain.

The defaults lean towards safety over speed. The default rule is the chain's own finality
(``finalized``): on Ethereum that is Casper FFG, and during a loss of finality nothing is
confirmed (depth 64 would go on confirming); on a rollup (OP Stack, Arbitrum, Linea, Scroll)
the node's ``finalized`` block is the last one whose batch is in a finalized L1 block, so the
sequencer's word alone never confirms. An entry of an L2 family cannot default to a rule
that confirms before that (:data:`chains.finality_modes.L1_FINAL_MODES`, checked when the
entry is built). ``default_confirmations`` is the N used where depth is used (``depth``,
``depth_or_finalized``, ``depth_and_finalized``, and the receipt's header chain): at least
as deep as the chain's reorgs, roughly its time to finality.

Headers: a receipt proves depth with a chain of headers that the verifier re-hashes as
keccak(rlp(fields)) in Ethereum's field order. Where a chain's nodes return headers that do
not hash that way (``headers_rehash`` False, with the reason in ``headers_note``), its
receipts are signed attestations without a header chain, and say so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from chains.finality_modes import (
    FINALITY_MODES,
    L1_FINAL_MODES,
    NEEDS_FINALIZED,
    NEEDS_SAFE,
)
from guard.types import ChainId

__all__ = [
    "FINALITY_MODES",
    "FAMILIES",
    "KNOWN_CHAINS",
    "L2_FAMILIES",
    "KnownChain",
    "known_chain",
]

FAMILIES: tuple[str, ...] = (
    "dev",
    "ethereum",
    "op_stack",
    "arbitrum",
    "linea",
    "scroll",
    "polygon_pos",
    "gnosis",
    "bsc",
    "avalanche",
)
"""How a chain reaches finality (its consensus, or its rollup design)."""

L2_FAMILIES = frozenset({"op_stack", "arbitrum", "linea", "scroll"})
"""Rollups: a sequencer orders blocks, finality comes from L1."""


@dataclass(frozen=True)
class KnownChain:
    """One chain the watcher knows, with the defaults used when a config omits a key."""

    name: str
    """Short lower-case name, the key in :data:`KNOWN_CHAINS` (e.g. ``"ethereum"``)."""
    chain_id: ChainId
    """EIP-155 chain id, as answered by ``eth_chainId``."""
    default_confirmations: int
    """Depth N (head - block + 1) used wherever the rule uses depth."""
    default_finality: str
    """Finality rule used when the config gives none: one of :data:`FINALITY_MODES`."""
    supports_finalized: bool
    """The chain's nodes answer the ``finalized`` block tag with a meaningful block."""
    supports_safe: bool
    """The chain's nodes answer the ``safe`` block tag with a meaningful block."""
    block_time_s: float
    """Typical seconds between blocks; the default poll interval."""
    family: str = "ethereum"
    """One of :data:`FAMILIES`: how the chain reaches finality."""
    time_to_final_s: float = 900.0
    """Typical seconds from inclusion to final under the default rule (documentation)."""
    headers_rehash: bool = True
    """Headers from JSON-RPC hash as keccak(rlp(fields)) in Ethereum's field order, so a
    receipt can carry a header chain the verifier re-hashes."""
    headers_note: str = ""
    """Why headers do not re-hash (when ``headers_rehash`` is False), or a caveat."""
    finality_note: str = ""
    """What "final" means on this chain under the default rule, and why N."""

    @property
    def is_l2(self) -> bool:
        """A rollup whose finality comes from L1 (:data:`L2_FAMILIES`)."""
        return self.family in L2_FAMILIES

    def __post_init__(self) -> None:
        """Refuse a registry entry whose defaults could not be used as written, or that
        would confirm an L2 block on the sequencer's word alone."""
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
        if self.default_finality in NEEDS_FINALIZED and not self.supports_finalized:
            raise ValueError(
                f"{self.name}: default_finality {self.default_finality!r} needs the "
                "'finalized' tag, which this chain does not support"
            )
        if self.default_finality in NEEDS_SAFE and not self.supports_safe:
            raise ValueError(
                f"{self.name}: default_finality 'safe' needs the 'safe' tag, which this "
                "chain does not support"
            )
        if self.family not in FAMILIES:
            raise ValueError(f"{self.name}: family must be one of {FAMILIES} (got {self.family!r})")
        if self.is_l2 and self.default_finality not in L1_FINAL_MODES:
            raise ValueError(
                f"{self.name}: an L2 ({self.family}) must default to a rule that waits for "
                f"L1 finality ({sorted(L1_FINAL_MODES)}), not {self.default_finality!r}"
            )
        if not self.headers_rehash and not self.headers_note:
            raise ValueError(f"{self.name}: say in headers_note why headers do not re-hash")
        if not self.block_time_s > 0:
            raise ValueError(f"{self.name}: block_time_s must be > 0 (got {self.block_time_s})")


def _op_stack(name: str, chain_id: int) -> KnownChain:
    return KnownChain(
        name=name,
        chain_id=ChainId(chain_id),
        default_confirmations=600,
        default_finality="finalized",
        supports_finalized=True,
        supports_safe=True,
        block_time_s=2.0,
        family="op_stack",
        time_to_final_s=1200.0,
        finality_note=(
            "finalized: the L2 block's batch is in a finalized L1 block (op-node derivation); "
            "safe: the batch is on L1, not yet finalized; N=600 (~20 min at 2 s) only where "
            "depth is asked for"
        ),
    )


def _arbitrum(name: str, chain_id: int) -> KnownChain:
    return KnownChain(
        name=name,
        chain_id=ChainId(chain_id),
        default_confirmations=4800,
        default_finality="finalized",
        supports_finalized=True,
        supports_safe=True,
        block_time_s=0.25,
        family="arbitrum",
        time_to_final_s=1200.0,
        finality_note=(
            "finalized: Nitro maps the tag to the last block whose batch is in a finalized L1 "
            "block (safe: in L1's safe block); N=4800 (~20 min at the 0.25 s minimum block "
            "time) only where depth is asked for"
        ),
    )


def _beacon(name: str, chain_id: int) -> KnownChain:
    return KnownChain(
        name=name,
        chain_id=ChainId(chain_id),
        default_confirmations=64,
        default_finality="finalized",
        supports_finalized=True,
        supports_safe=True,
        block_time_s=12.0,
        family="ethereum",
        time_to_final_s=900.0,
        finality_note=(
            "finalized: Casper FFG, two epochs (~12.8-15 min); during a loss of finality the "
            "tag stops and nothing is confirmed (depth would go on); N=64 = two epochs"
        ),
    )


_CHAINS: tuple[KnownChain, ...] = (
    KnownChain(
        name="local",
        chain_id=ChainId(31337),
        default_confirmations=3,
        default_finality="depth",
        supports_finalized=True,
        supports_safe=True,
        block_time_s=1.0,
        family="dev",
        time_to_final_s=3.0,
        finality_note="anvil, a dev node: depth 3 exercises the depth rule without slowing tests",
    ),
    _beacon("ethereum", 1),
    _beacon("sepolia", 11155111),
    _op_stack("optimism", 10),
    _op_stack("op-sepolia", 11155420),
    _op_stack("base", 8453),
    _op_stack("base-sepolia", 84532),
    _arbitrum("arbitrum", 42161),
    _arbitrum("arbitrum-nova", 42170),
    _arbitrum("arbitrum-sepolia", 421614),
    KnownChain(
        name="linea",
        chain_id=ChainId(59144),
        default_confirmations=1800,
        default_finality="finalized",
        supports_finalized=True,
        supports_safe=False,
        block_time_s=2.0,
        family="linea",
        time_to_final_s=6 * 3600.0,
        finality_note=(
            "finalized: the block's validity proof is verified in a finalized L1 block "
            "(hours: proofs are aggregated); Linea does not serve safe; N=1800 (~1 h) only where depth is asked for, "
            "which trusts the sequencer"
        ),
    ),
    KnownChain(
        name="scroll",
        chain_id=ChainId(534352),
        default_confirmations=1200,
        default_finality="finalized",
        supports_finalized=True,
        supports_safe=False,
        block_time_s=3.0,
        family="scroll",
        time_to_final_s=3600.0,
        finality_note=(
            "finalized: the batch's proof is verified (finalizeBatch) in a finalized L1 "
            "block (~1 h); the safe tag is not relied on; N=1200 (~1 h) only where depth is "
            "asked for, which trusts the sequencer"
        ),
    ),
    KnownChain(
        name="polygon",
        chain_id=ChainId(137),
        default_confirmations=256,
        default_finality="finalized",
        supports_finalized=True,
        supports_safe=False,
        block_time_s=2.0,
        family="polygon_pos",
        time_to_final_s=60.0,
        finality_note=(
            "finalized: the latest Heimdall milestone (PIP-11, deterministic, usually within "
            "a minute); N=256 (~8.5 min) is past the deepest observed reorg (157 blocks, "
            "Feb 2023); Bor has no meaningful safe tag"
        ),
    ),
    KnownChain(
        name="gnosis",
        chain_id=ChainId(100),
        default_confirmations=32,
        default_finality="finalized",
        supports_finalized=True,
        supports_safe=True,
        block_time_s=5.0,
        family="gnosis",
        time_to_final_s=180.0,
        headers_note=(
            "post-merge headers are Ethereum's; blocks before the merge (AuRa, below "
            "25,349,536) carry step and signature seal fields instead and do not re-hash"
        ),
        finality_note=(
            "finalized: Gnosis beacon chain, Casper FFG with 5 s slots and 16-slot epochs "
            "(two epochs ~2.7 min); N=32 = two epochs"
        ),
    ),
    KnownChain(
        name="bsc",
        chain_id=ChainId(56),
        default_confirmations=240,
        default_finality="finalized",
        supports_finalized=True,
        supports_safe=True,
        block_time_s=0.75,
        family="bsc",
        time_to_final_s=3.0,
        finality_note=(
            "finalized: BEP-126 fast finality, a block is finalized when its child is "
            "justified by 2/3 of validators' votes (usually by block n+2); safe: the "
            "justified block; N=240 (15 validators x 16 blocks each in turn) only where "
            "depth is asked for"
        ),
    ),
    KnownChain(
        name="avalanche",
        chain_id=ChainId(43114),
        default_confirmations=1,
        default_finality="finalized",
        supports_finalized=True,
        supports_safe=True,
        block_time_s=2.0,
        family="avalanche",
        time_to_final_s=2.0,
        headers_rehash=False,
        headers_note=(
            "coreth headers add extDataHash between nonce and baseFeePerGas (and "
            "extDataGasUsed, blockGasCost after it): keccak(rlp) in Ethereum's field order "
            "does not give the block hash, so receipts are attestations without headers"
        ),
        finality_note=(
            "finalized: Snowman consensus accepted the block (final once accepted, ~1-2 s); "
            "coreth answers latest, safe and finalized with the last accepted block"
        ),
    ),
)

KNOWN_CHAINS: Mapping[str, KnownChain] = MappingProxyType({c.name: c for c in _CHAINS})
"""Every known chain by name (read-only)."""

_BY_ID: Mapping[int, KnownChain] = MappingProxyType({c.chain_id: c for c in _CHAINS})


def known_chain(chain_id: int) -> KnownChain | None:
    """Return the registry entry for ``chain_id``, or ``None`` if the chain is not known."""
    return _BY_ID.get(chain_id)
