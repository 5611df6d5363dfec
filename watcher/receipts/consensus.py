"""The ``consensus`` section of finality receipts: light-client data kept once per chain.

For a chain with ``beacon_api`` the daemon follows Ethereum consensus as a light client
from the operator's ``consensus_checkpoint``: the bootstrap is fetched once, each period's
committee hand-over once, and the latest finality update at most once per poll interval,
and only while a receipt waits for a newer one. Every finality update is verified (guard.consensus)
before it is used: a Beacon API node is believed in nothing it cannot prove.

A finality receipt of block B then carries the section (guard/verify_consensus.py) once a
verified finality update's execution block F is at or above B, with the headers linking
the receipt's last header up to F (fetched from the chain's RPC: they are checked to link
and F to be the consensus' hash). Until then the receipt waits (:class:`ConsensusPending`,
postponed like a receipt whose node lags) and says why; a Beacon API failure only delays
receipts, never the chain's verdicts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from chains.beacon import BeaconClient
from chains.errors import ChainError
from chains.proofs import fetch_headers
from chains.rpc import RpcClient
from guard.consensus import NETWORKS, ConsensusProofError, ProvenFinality, verify_finality
from guard.verify_chain import proof_headers
from watcher.config.chains import ChainConfig
from watcher.store.consensus_store import ConsensusStore

log = logging.getLogger("finality.consensus")


class ConsensusPending(ValueError):
    """No verified finality update covers the receipt's block yet: the receipt waits."""


@dataclass(frozen=True)
class Finality:
    """A verified finality update and the data that proves it from the checkpoint."""

    bootstrap: Any
    """The bootstrap at the checkpoint, as served."""
    updates: tuple[Any, ...]
    """The hand-overs from the checkpoint's period to the update's signing period."""
    answer: Any
    """The finality update, as served."""
    proven: ProvenFinality
    """What it proves."""


class ConsensusSection:
    """One chain's light client and the sections it gives its finality receipts."""

    def __init__(
        self,
        network: str,
        checkpoint: str,
        beacon: BeaconClient,
        client: RpcClient,
        *,
        store: tuple[ConsensusStore, str] | None = None,
        refresh_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.network = NETWORKS[network]
        self.checkpoint = checkpoint.lower()
        self.beacon = beacon
        self.client = client
        self.store = store
        """Where the verified committee chain is kept, and the chain's name there."""
        self._saved: int | None = None
        """Hand-overs known to be stored (None: the store not read yet)."""
        self._bootstrap: Any = None
        self._updates: list[Any] = []
        """Hand-overs fetched so far, by period from the checkpoint's."""
        self._final: Finality | None = None
        self.refresh_s = refresh_s
        """Least time between two requests for the finality update (one per poll)."""
        self.clock = clock
        self._asked_at: float | None = None
        self._lock = threading.Lock()
        self._waiting: dict[str, str] = {}
        """Settlements whose receipt waits for a finality update, and why."""

    def waiting_for(self, settlement_id: str) -> str | None:
        """Why the settlement's finality receipt waits for consensus, if it does."""
        return self._waiting.get(settlement_id)

    def section(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The ``consensus`` section for a finality receipt ``body``; ConsensusPending while
        no verified finality update covers its block; ChainError when a node failed."""
        headers = proof_headers(body["proof"])
        block, (top, top_hash) = headers[0][0], headers[-1][:2]
        with self._lock:
            final = self._final
            if final is None or final.proven.execution_block_number < block:
                final = self._refresh()
        sid = str(body["settlement_id"])
        if final is None or final.proven.execution_block_number < block:
            have = "none yet" if final is None else str(final.proven.execution_block_number)
            why = (
                f"waiting for Ethereum consensus to finalize block {block} "
                f"(finalized execution block: {have})"
            )
            self._waiting[sid] = why
            raise ConsensusPending(why)
        self._waiting.pop(sid, None)
        number, block_hash = final.proven.execution_block_number, final.proven.execution_block_hash
        link: list[dict[str, str]] = []
        if number > top:
            _, above = fetch_headers(
                self.client, top, number - top + 1, top_hash, (number, block_hash)
            )
            link = above[1:]
        return {
            "network": self.network.name,
            "checkpoint": self.checkpoint,
            "bootstrap": final.bootstrap,
            "updates": list(final.updates),
            "finality_update": final.answer,
            "link": {"kind": "headers", "headers": link},
        }

    def _refresh(self) -> Finality | None:
        """Ask for the latest finality update (once per poll interval), the bootstrap and
        missing hand-overs (once each), and keep the update if it verifies."""
        now = self.clock()
        if self._asked_at is not None and now - self._asked_at < self.refresh_s:
            return self._final
        self._asked_at = now
        self._load()
        try:
            if self._bootstrap is None:
                self._bootstrap = self.beacon.bootstrap(self.checkpoint)
            answer = self.beacon.finality_update()
            start = self._start_period()
            needed = self.network.period_at_slot(_signature_slot(answer)) - start
            if needed > len(self._updates):
                got = self.beacon.updates(start + len(self._updates), needed - len(self._updates))
                self._updates += got
            updates = tuple(self._updates[: max(needed, 0)])
            proven = verify_finality(
                network=self.network,
                checkpoint=self.checkpoint,
                bootstrap=self._bootstrap,
                updates=updates,
                finality_update=answer,
            )
        except ConsensusProofError as exc:
            log.warning("consensus: the Beacon API's data does not verify: %s", exc)
            self._bootstrap, self._updates = None, []  # nothing unproven is kept
            return self._final
        except (ChainError, KeyError, TypeError, ValueError) as exc:
            log.warning("consensus: no finality update: %s", exc)
            return self._final
        self._save(updates)
        if self._final is None or _height(proven) > _height(self._final.proven):
            self._final = Finality(self._bootstrap, updates, answer, proven)
        return self._final

    def _load(self) -> None:
        """The committee chain a previous run verified and stored (read once)."""
        if self.store is None or self._saved is not None:
            return
        store, chain = self.store
        self._bootstrap, self._updates = store.load(chain, self.checkpoint)
        self._saved = len(self._updates) if self._bootstrap is not None else -1

    def _save(self, updates: tuple[Any, ...]) -> None:
        """Keep the verified bootstrap and hand-overs, when they grew."""
        if self.store is None or (self._saved is not None and len(updates) <= self._saved):
            return
        store, chain = self.store
        store.save(chain, self.checkpoint, self._start_period(), self._bootstrap, updates)
        self._saved = len(updates)

    def _start_period(self) -> int:
        data = self._bootstrap.get("data", self._bootstrap)
        return self.network.period_at_slot(int(data["header"]["beacon"]["slot"]))


def consensus_section(
    chain: ChainConfig, client: RpcClient, store: ConsensusStore | None = None
) -> ConsensusSection | None:
    """The light client of a chain with ``beacon_api`` (None without), asking for a finality
    update at most once per poll interval, ``client`` for the link headers, keeping its
    committee chain in ``store``."""
    if not chain.beacon_api:
        return None
    return ConsensusSection(
        chain.consensus_network,
        str(chain.consensus_checkpoint),
        BeaconClient(chain.beacon_api),
        client,
        store=None if store is None else (store, chain.name),
        refresh_s=chain.resolved_poll_interval_s,
    )


def beacon_clients(builders: Mapping[str, object]) -> dict[str, BeaconClient]:
    """The Beacon API client of each chain whose receipts carry a consensus section."""
    return {
        name: section.beacon
        for name, builder in builders.items()
        if isinstance(section := getattr(builder, "consensus", None), ConsensusSection)
    }


def _height(proven: ProvenFinality) -> tuple[int, int]:
    """How far a finality reaches: a later one replaces the kept one, never an older one."""
    return proven.finalized_slot, proven.execution_block_number


def _signature_slot(answer: Any) -> int:
    data = answer.get("data", answer) if isinstance(answer, Mapping) else None
    if not isinstance(data, Mapping):
        raise ValueError("a finality update is a JSON object")
    return int(data["signature_slot"])
