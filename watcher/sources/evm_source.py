"""The EVM chain behind the source protocol: one transaction, asked about on its own.

The daemon follows chains with :class:`watcher.engine.chain_watcher.ChainWatcher` (a head tracker that sees
every block once, detects reorgs and replacements): that stays the way registered EVM
settlements are decided. This adapter is the same judgement for a single reference, built
on the live view of an unregistered hash (:func:`watcher.engine.live.live_view`: one batched
request), so that code written against :class:`guard.source.SettlementSource` (a script, a
plugin's tests, a comparison between kinds) can treat a transaction like any other
settlement:

=================================================  =========================================
chain                                              status
=================================================  =========================================
the node does not know the hash                    ``unknown``
pending (known, not in a block)                    ``initiated``
included, depth below N (and not ``finalized``)    ``accepted``
depth >= N, or covered by ``finalized``            ``final``
included with status 0 at finality                 ``failed``
=================================================  =========================================

A replacement (same sender and nonce) cannot be seen from one hash alone: only the engine,
which saw the transaction while pending, proves it. A single-ref view has no memory of
past blocks either, so it never reports ``reversed``: that is the engine's reorg detection.
"""

from __future__ import annotations

from typing import Any

from chains.errors import ChainError
from chains.rpc import RpcClient
from guard.errors import InvalidHash
from guard.finality_rule import BASES
from guard.hexes import parse_tx_hash
from guard.settlement import Evidence, Verdict, evidence_from_json
from guard.source import (
    InvalidRef,
    Snapshot,
    SourceObservation,
    SourceStatus,
    SourceUnavailable,
)
from guard.types import UnixMillis
from watcher.config.chains import ChainConfig
from watcher.engine.live import live_view

KIND = "evm_tx"
"""The settlement kind this module serves."""

_FINAL = frozenset(BASES)  # every basis a finality rule confirms on (guard.finality_rule)
_FAILED = frozenset({"reverted", "replaced"})


class EvmSource:
    """One configured chain as a :class:`~guard.source.SettlementSource` of transactions."""

    kind = KIND
    reversible = False
    """A reorg can undo a final tx, but only the engine (which keeps the headers) sees one."""

    def __init__(
        self, chain: ChainConfig, client: RpcClient, confirmations: int | None = None
    ) -> None:
        self.name = chain.name
        self.chain = chain
        self.client = client
        self.confirmations = confirmations
        """Depth N; None uses the chain's default."""

    def check_ref(self, ref: str) -> str:
        """A transaction hash, 0x + 64 hex digits, lower-cased."""
        try:
            return str(parse_tx_hash(ref))
        except InvalidHash as exc:
            raise InvalidRef(ref, "is not a 0x-prefixed 32-byte hex transaction hash") from exc

    def fetch(self, ref: str, now: UnixMillis) -> Snapshot:
        """The live view of ``ref`` (tx, receipt, head and, if used, ``finalized``)."""
        try:
            view = live_view(self.client, self.chain, ref, self.confirmations, now)
        except ChainError as exc:
            raise SourceUnavailable(self.name, str(exc)) from exc
        return Snapshot(ref, now, {"view": view})

    def observe(
        self, ref: str, snapshot: Snapshot | None, previous: Evidence | None, now: UnixMillis
    ) -> SourceObservation:
        """Translate the live view's decision into the source vocabulary."""
        view: Any = None if snapshot is None else snapshot.objects.get("view")
        if not isinstance(view, dict) or view.get("verdict") == Verdict.NO_SETTLEMENT:
            return SourceObservation(ref, SourceStatus.UNKNOWN)
        base = {
            "source": self.name,
            "source_kind": KIND,
            "ref": ref,
            "head_number": view.get("head_number"),
        }
        evidence = evidence_from_json(view.get("evidence"))
        if evidence is None:  # known to the node, not in a block yet
            return SourceObservation(
                ref, SourceStatus.INITIATED, Evidence.of("pending", now, **base)
            )
        facts = {**base, **dict(evidence.facts)}
        restated = Evidence.of(evidence.kind, now, **facts)
        if evidence.kind in _FAILED:
            return SourceObservation(ref, SourceStatus.FAILED, restated)
        if evidence.kind in _FINAL:
            return SourceObservation(ref, SourceStatus.FINAL, restated)
        return SourceObservation(ref, SourceStatus.ACCEPTED, restated)

    def close(self) -> None:
        """The RPC client belongs to the caller: nothing to release here."""
