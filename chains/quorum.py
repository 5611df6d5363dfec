"""Whether enough independent endpoints agree before a finality (or failure) is declared.

The engine asks the gate, before each block's transaction, about the settlements whose
depth (or the ``finalized`` tag) has just been reached. Only approved ones may become
``FINALITY_CONFIRMED`` or ``SETTLEMENT_FAILED``; the others keep waiting, with the reason.

:class:`SingleNodeGate` is the ``k = 1`` trade-off: it approves what the one node says and
costs no call. A quorum gate (``k`` of ``n``) checks the inclusion block hash and the head
on other endpoints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from chains.models import BlockHeader


@dataclass(frozen=True)
class Anchor:
    """A settlement about to become terminal: the block its evidence rests on."""

    settlement_id: str
    """Which settlement."""
    block_number: int
    """Inclusion block (or the replacing tx's block)."""
    block_hash: str
    """Its hash, as our node saw it."""
    confirm_height: int
    """Head height the decision needs (block + N - 1)."""


@dataclass(frozen=True)
class GateResult:
    """The gate's answer for one block."""

    approved: frozenset[str]
    """Settlement ids that may become terminal."""
    waiting: Mapping[str, str] = field(default_factory=dict)
    """Settlement id → why it must wait (shown in the decision's evidence)."""
    endpoints: tuple[str, ...] = ()
    """Endpoints whose answers agreed (recorded as ``observed_by``)."""


class FinalityGate(Protocol):
    """Decides which anchors enough endpoints agree on."""

    trivial: bool
    """True when every anchor is approved without a call (the engine then skips asking)."""

    def approve(self, anchors: Sequence[Anchor], head: BlockHeader) -> GateResult:
        """Check ``anchors`` at our ``head``; never raises for a disagreeing endpoint."""
        ...


class SingleNodeGate:
    """``k = 1``: the node we follow is trusted alone (documented trade-off)."""

    trivial = True

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    def approve(self, anchors: Sequence[Anchor], head: BlockHeader) -> GateResult:
        return GateResult(
            approved=frozenset(a.settlement_id for a in anchors), endpoints=(self.endpoint,)
        )
