"""What ``finality watch`` prints while a chain settlement moves: one line per thing that
happened, as it happens.

Each new view of the settlement (read at each of its events and, through the event
stream's head frames, at each new head) is compared with the one before, and the lines say
what changed: the tx was included (in which block), it went deeper (each new depth, or
how far the chain's ``finalized`` block still is), a reorg was seen (and whether the tx is
still in a block), the tx reverted. A reorg that drops the tx is never hidden behind a
repeated "waiting for inclusion".
"""

from __future__ import annotations

from typing import Any

from watcher.cli.common import progress

View = dict[str, Any]


def changes(before: View | None, after: View) -> list[str]:
    """The lines that tell what happened between ``before`` (None: nothing shown yet) and
    ``after``: what happened (a reorg, a revert, a replacement), then where the settlement
    stands (:func:`~watcher.cli.common.progress`) when that changed; an empty list when
    nothing a reader would notice changed."""
    now = progress(after)
    if before is None:
        return [now]
    lines: list[str] = []
    reorgs = (after.get("reorg_count") or 0) - (before.get("reorg_count") or 0)
    block, was = after.get("block_number"), before.get("block_number")
    if reorgs > 0:
        lines.append(_reorg(after, reorgs))
    elif block is None and was is not None:
        lines.append("no longer in a block: waiting for inclusion again")
    if after.get("status") == 0 and before.get("status") != 0:
        lines.append(f"reverted in block {block} (receipt status 0): it will not settle")
    if after.get("replaced_by") and not before.get("replaced_by"):
        lines.append(f"replaced by {after['replaced_by']} (same sender and nonce)")
    if now != progress(before):
        lines.append(now)
    return lines


def _reorg(view: View, count: int) -> str:
    seen = "a reorg" if count == 1 else f"{count} reorgs"
    if view.get("block_number") is None:
        return f"{seen} removed the tx from its block: waiting for inclusion again"
    return f"{seen} on the chain (reorg_count {view.get('reorg_count')})"
