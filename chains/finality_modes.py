"""The finality rules a chain can be watched under, and what each one trusts.

A rule says when a block is final for the watcher. They differ in *whose word* makes it
final, which matters most on a rollup: a block deep in the sequencer's chain is final only
once the batch holding it is in a finalized L1 block, and the sequencer may hold the batch
back for hours. So the rules are grouped by what they can confirm before:

- :data:`NEEDS_FINALIZED`: read the node's ``finalized`` block tag (one call per poll);
- :data:`NEEDS_SAFE`: read the node's ``safe`` tag instead;
- :data:`CONFIRMS_ON_DEPTH_ALONE`: depth N of blocks is enough, whatever the tag says: on an
  L2 this trusts the sequencer alone, and on an L1 it confirms during a loss of finality;
- :data:`L1_FINAL_MODES`: never confirm before the chain's own ``finalized`` tag (for a
  rollup, L1 finality of the batch): the only rules a registry default on an L2 may use.

The names and the rule itself are :mod:`guard.finality_rule` (pure, shared with the offline
verifier); this module says what each rule trusts, for the registry and the config.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from guard.finality_rule import FINALITY_MODES

__all__ = [
    "CONFIRMS_ON_DEPTH_ALONE",
    "FINALITY_MODES",
    "L1_FINAL_MODES",
    "L2_RISK",
    "NEEDS_FINALIZED",
    "NEEDS_SAFE",
    "is_mode",
]

NEEDS_FINALIZED = frozenset({"finalized", "depth_or_finalized", "depth_and_finalized"})
"""Rules that read the ``finalized`` tag."""

NEEDS_SAFE = frozenset({"safe"})
"""Rules that read the ``safe`` tag."""

CONFIRMS_ON_DEPTH_ALONE = frozenset({"depth", "depth_or_finalized"})
"""Rules under which depth N alone confirms, before (or without) any finality tag."""

L1_FINAL_MODES = frozenset({"finalized", "depth_and_finalized"})
"""Rules that never confirm before the ``finalized`` tag covers the block."""

L2_RISK: Mapping[str, str] = MappingProxyType(
    {
        "depth": (
            "depth alone trusts the sequencer: a block this deep may still be in no batch "
            "on L1 (the sequencer can delay or drop it for hours), so a confirmation can be "
            "undone"
        ),
        "depth_or_finalized": (
            "depth confirms before the finalized tag does: a block this deep may still be in "
            "no batch on L1 (the sequencer can delay or drop it for hours), so a confirmation "
            "can be undone"
        ),
        "safe": (
            "the safe tag means the batch is on L1, not that L1 finalized it: an L1 reorg can "
            "still undo a confirmation"
        ),
    }
)
"""Why a rule written explicitly for an L2 chain is risky (the start-up warning's text);
the rules not listed wait for L1 finality."""


def is_mode(value: str) -> bool:
    """Whether ``value`` names a finality rule."""
    return value in FINALITY_MODES
