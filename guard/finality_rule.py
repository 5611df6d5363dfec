"""The finality rules, as a pure decision: which basis (if any) makes a block final.

A rule (the chain's ``finality`` mode) names whose word makes a block final: its depth under
the head, the node's ``finalized`` tag, its ``safe`` tag, or depth *and* ``finalized``. The
*basis* is the fact that held when the watcher confirmed; evidence, receipts and the offline
verifier all name it, so a reader of a receipt knows what it rests on:

``depth``
    ``head - block + 1 >= N``: the receipt's header chain proves it.
``finalized``
    the node's ``finalized`` block is at or above the block: the node's claim.
``safe``
    the node's ``safe`` block is at or above the block: the node's claim (weaker than
    ``finalized``: on Ethereum one epoch's votes, on a rollup a batch on L1 not yet final).
``depth_and_finalized``
    both depth N and the ``finalized`` tag: headers prove the depth, the tag is a claim.

The names live here (``guard/`` imports nothing from ``chains/``); :mod:`chains.finality_modes`
re-exports them with what each rule trusts.
"""

from __future__ import annotations

FINALITY_MODES: tuple[str, ...] = (
    "depth",
    "finalized",
    "depth_or_finalized",
    "safe",
    "depth_and_finalized",
)
"""Every finality rule; the first three are the original public contract."""

BASES: tuple[str, ...] = ("depth", "finalized", "safe", "depth_and_finalized")
"""Every basis a confirmation (or a failure at finality) can rest on."""

TAG_OF_BASIS = {"finalized": "finalized", "safe": "safe", "depth_and_finalized": "finalized"}
"""The block tag a basis relies on (``depth`` relies on none)."""

BASES_OF_MODE: dict[str, tuple[str, ...]] = {
    "depth": ("depth",),
    "finalized": ("finalized",),
    "depth_or_finalized": ("depth", "finalized"),
    "safe": ("safe",),
    "depth_and_finalized": ("depth_and_finalized",),
}
"""The bases each rule can confirm on (what :func:`finality_basis` may answer for it)."""


def finality_basis(
    mode: str,
    block_number: int,
    depth: int,
    required: int,
    finalized_number: int | None,
    safe_number: int | None = None,
) -> str | None:
    """The basis on which ``block_number`` is final under ``mode``, or None (not final yet).

    ``depth`` is head - block + 1; ``finalized_number`` / ``safe_number`` are the node's tags
    (None when not fetched). Raises ValueError for an unknown mode: a typo must never fall
    back to some rule silently."""
    deep = depth >= required
    finalized = finalized_number is not None and block_number <= finalized_number
    if mode == "depth":
        return "depth" if deep else None
    if mode == "finalized":
        return "finalized" if finalized else None
    if mode == "depth_or_finalized":
        return "depth" if deep else "finalized" if finalized else None
    if mode == "safe":
        return "safe" if safe_number is not None and block_number <= safe_number else None
    if mode == "depth_and_finalized":
        return "depth_and_finalized" if deep and finalized else None
    raise ValueError(f"finality mode {mode!r} is not one of {FINALITY_MODES}")
