"""Registering a source settlement, and showing one: rows of the same ``settlements`` table.

A source settlement is stored like a chain's, without a schema change: ``chain`` holds the
source's configured name, ``tx_hash`` the reference (hence at most 66 characters), and
``finality_mode`` the source's kind. Its id is derived from the three, so the same
reference registered twice (or on another instance) gets the same id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from guard.settlement import (
    Verdict,
)
from guard.types import SettlementId
from watcher.config.sources import SourceConfig
from watcher.settlements import ANONYMOUS_OWNER, WaitLimits, first_row, settlement_view
from watcher.store import NewSettlement, SettlementRecord


def source_settlement_id(kind: str, source: str, ref: str, owner: str = ANONYMOUS_OWNER) -> str:
    """``stl_`` + the first 24 hex digits of sha256("{kind}:{source}:{ref}"), with
    ":{owner}" appended for an owner other than the anonymous one (whose ids predate owners):
    two callers' settlements of one reference never share an id."""
    key = f"{kind}:{source}:{ref}" + ("" if owner == ANONYMOUS_OWNER else f":{owner}")
    return "stl_" + hashlib.sha256(key.encode()).hexdigest()[:24]


def new_source_settlement(
    config: SourceConfig,
    ref: str,
    now: int,
    timeout_s: float | None = None,
    dependent_state: dict[str, Any] | None = None,
    commit_url: str | None = None,
    owner: str = ANONYMOUS_OWNER,
) -> NewSettlement:
    """The row registering ``ref`` with the source ``config`` at ``now`` (AWAITING_FINALITY).

    ``timeout_s`` defaults to the source's ``timeout_s``; the deadline is capped by its
    ``max_wait_s``, as for chains; the row is ``owner``'s (the API caller's name)."""
    sid = SettlementId(source_settlement_id(config.kind, config.name, ref, owner))
    return first_row(
        sid,
        config.name,
        ref,
        now,
        WaitLimits(config.timeout_s if timeout_s is None else timeout_s, config.max_wait_s),
        required_confirmations=0,
        finality_mode=config.kind,
        dependent_state=dependent_state,
        commit_url=commit_url,
        owner=owner,
    )


def source_settlement_view(
    rec: SettlementRecord,
    receipt: Mapping[str, Any] | None = None,
    binding: Mapping[str, Any] | None = None,
    *,
    now: int,
) -> dict[str, Any]:
    """The public view of a source settlement as of ``now``: the chain view's keys (so
    clients read one shape), with the chain-only ones null, plus ``kind``, ``source`` and
    ``ref``."""
    view = settlement_view(rec, None, receipt, binding, now=now)
    view.update(
        {
            "waiting_for": (
                f"{rec.chain} to report {rec.tx_hash} final"
                if rec.verdict == Verdict.AWAITING_FINALITY
                else None
            ),
            "kind": rec.finality_mode,
            "source": rec.chain,
            "ref": rec.tx_hash,
            "confirmations": None,
            "required_confirmations": None,
            "head_number": None,
        }
    )
    return view
