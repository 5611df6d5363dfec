"""The record of a takeover: the handoff guard applied to the committed state.

At every takeover the successor applies the handoff guard (``guard.handoff``) and stores a
record with the four recorded elements:

- ``transaction_state_checkpoint_receipt``: the committed state (each block is one store
  transaction, so the committed state *is* the checkpoint): head, header window, verdicts,
  outbox position;
- ``in_flight_operation_registry_receipt``: outbox rows not yet acknowledged (the outbox is
  written in the same transaction as the verdict, so it is the registry), and the block
  processing the predecessor may have begun after its last committed head;
- ``handoff_lock_signature``: previous and new owner and fencing token;
- ``transaction_recovery_predicate_receipt``: per in-flight operation, the check the successor
  runs and what it found (the stored head against the node; a delivery is re-sent with the
  same Idempotency-Key once its row lease ends, which the receiver deduplicates).

Each element carries the ``sha256:`` digest of its canonical body and, with a signer (the
daemon's receipt key), a signed receipt (:mod:`guard.handoff_receipts`) that ``finality
verify`` checks offline. Records written before elements were signed have only the digest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from chains.errors import ChainError
from guard.canonical import digest
from guard.handoff import HandoffDecision, HandoffState, RecoveryOutcome, evaluate_handoff
from guard.handoff_receipts import HANDOFF_KINDS, Takeover, handoff_body
from guard.receipts import OFFCHAIN_CHAIN_ID
from guard.verify import verify_receipt
from watcher.store import lease_store as ls
from watcher.store.handoff_store import HandoffStore
from watcher.store.store import Store


class HeaderReader(Protocol):
    """What a takeover asks a chain's node: the header at a height (None: not there)."""

    def header(self, number: int) -> Any: ...


class Sealer(Protocol):
    """The daemon's receipt key: its address and the sealing of a receipt body."""

    @property
    def address(self) -> str: ...

    def sign(self, body: dict[str, Any]) -> dict[str, Any]: ...


class TakeoverRecorder:
    """Builds and stores the record of each takeover made by instance ``instance_id``."""

    def __init__(
        self,
        store: Store,
        leases: HandoffStore,
        instance_id: str,
        clock: Callable[[], int],
        nodes: Mapping[str, HeaderReader],
        signer: Sealer | None = None,
    ) -> None:
        self.store = store
        self.leases = leases
        self.instance_id = instance_id
        self.clock = clock
        self.nodes = nodes
        """The node of each chain (a name not in it is an off-chain source)."""
        self.signer = signer

    def record(self, name: str, acquired: ls.Acquired) -> dict[str, Any]:
        """Apply the handoff guard to ``name``'s stored state and store the record."""
        now = self.clock()
        checkpoint, total, done = self._checkpoint(name)
        in_flight = self._in_flight(checkpoint)
        recovery = self._recover(name, checkpoint, in_flight)
        lock_body = self._lock_body(name, acquired)
        decision = evaluate_handoff(
            self._state(name, acquired, checkpoint, total, done, in_flight, recovery)
        )
        bodies: dict[str, dict[str, Any]] = dict(
            zip(
                HANDOFF_KINDS,
                (
                    checkpoint,
                    {"name": name, "operations": in_flight},
                    lock_body,
                    {"name": name, "checks": recovery},
                ),
                strict=True,
            )
        )
        takeover = self._takeover(name, acquired, decision, now)
        elements: dict[str, Any] = {
            **{kind: self._element(kind, body, takeover) for kind, body in bodies.items()},
            "decision": {
                "verdict": decision.verdict.value,
                "directive": decision.directive,
                "exception_applied": decision.exception_applied,
                "digest": decision.digest,
            },
        }
        values = {
            "name": name,
            "from_owner": lock_body["from_owner"],
            "from_token": lock_body["from_token"],
            "to_owner": self.instance_id,
            "to_token": acquired.lease.token,
            "reason": acquired.reason,
            "verdict": decision.verdict.value,
            "elements": elements,
            "recovery": recovery,
            "at": now,
        }
        values["id"] = self.leases.add_handoff(values)
        return values

    def _lock_body(self, name: str, acquired: ls.Acquired) -> dict[str, Any]:
        prev = acquired.previous
        return {
            "name": name,
            "from_owner": prev.owner if prev else None,
            "from_token": prev.token if prev else None,
            "from_expires_at": prev.expires_at if prev else None,
            "to_owner": self.instance_id,
            "to_token": acquired.lease.token,
            "acquired_at": acquired.lease.acquired_at,
            "expires_at": acquired.lease.expires_at,
            "reason": acquired.reason,
        }

    @staticmethod
    def _state(
        name: str,
        acquired: ls.Acquired,
        checkpoint: dict[str, Any],
        total: int,
        done: int,
        in_flight: list[dict[str, Any]],
        recovery: list[dict[str, Any]],
    ) -> HandoffState:
        """What the handoff guard decides on."""
        prev = acquired.previous
        ops = frozenset(op["id"] for op in in_flight)
        has_checkpoint = checkpoint["head_hash"] is not None or checkpoint["kind"] == "source"
        return HandoffState(
            transaction_id=name,
            steps_total=total,
            steps_completed=done,
            in_flight_observed=ops,
            checkpoint_digest=digest(checkpoint) if has_checkpoint else None,
            in_flight_registry=ops,
            lock_held=acquired.lease.token > (prev.token if prev else 0),
            remaining_idempotent=True,
            recovery=tuple(
                RecoveryOutcome(r["operation"], r["predicate"], r["outcome"], r["material"])
                for r in recovery
            ),
        )

    def _takeover(
        self, name: str, acquired: ls.Acquired, decision: HandoffDecision, now: int
    ) -> Takeover:
        """The takeover each signed element repeats."""
        prev = acquired.previous
        chain = self.store.chain(name) if name in self.nodes else None
        return Takeover(
            name=name,
            chain_id=chain.chain_id if chain is not None else OFFCHAIN_CHAIN_ID,
            from_owner=prev.owner if prev else None,
            from_token=prev.token if prev else None,
            to_owner=self.instance_id,
            to_token=acquired.lease.token,
            reason=acquired.reason,
            at=now,
            verdict=decision.verdict.value,
            decision_digest=decision.digest,
        )

    def _element(self, kind: str, body: dict[str, Any], takeover: Takeover) -> dict[str, Any]:
        """One recorded element: its body and digest (as before) and, with a signer, the
        signed receipt, checked by the offline verifier before it is stored."""
        element: dict[str, Any] = {"kind": kind, "body": body, "digest": digest(body)}
        if self.signer is not None:
            element["receipt"] = signed_element(self.signer, kind, body, takeover)
        return element

    def _checkpoint(self, name: str) -> tuple[dict[str, Any], int, int]:
        """The committed state of ``name``, and (steps total, steps done) for the guard."""
        counts = self.leases.committed_counts(name)
        chain = self.store.chain(name)
        is_chain = name in self.nodes
        headers = self.store.headers(name) if is_chain else []
        checkpoint: dict[str, Any] = {
            "name": name,
            "kind": "chain" if is_chain else "source",
            "head_number": chain.head_number if chain else None,
            "head_hash": chain.head_hash if chain else None,
            "finalized_number": chain.finalized_number if chain else None,
            "header_window": [[n, h] for n, h, _p, _ts in headers[-16:]],
            "header_window_size": len(headers),
            "verdicts": counts.verdicts,
            "watching": counts.watching,
            "outbox_position": counts.outbox_position,
        }
        total = sum(counts.verdicts.values())
        return checkpoint, total, total - counts.watching

    def _in_flight(self, checkpoint: dict[str, Any]) -> list[dict[str, Any]]:
        """Operations started and not known finished: outbox rows not acknowledged, and the
        block after the committed head (its processing may have begun, never committed)."""
        ops: list[dict[str, Any]] = [
            {
                "id": f"delivery:{r.id}",
                "kind": r.kind,
                "state": r.state,
                "idempotency_key": r.idempotency_key,
                "lease_ends_at": r.next_attempt_at if r.state == "sending" else None,
            }
            for r in self.leases.open_deliveries(checkpoint["name"])
        ]
        if checkpoint["kind"] == "chain" and checkpoint["head_number"] is not None:
            ops.append({"id": f"block:{checkpoint['head_number'] + 1}", "kind": "block_processing"})
        return ops

    def _recover(
        self, name: str, checkpoint: dict[str, Any], in_flight: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Run the recovery predicate of each in-flight operation; return what it found."""
        checks: list[dict[str, Any]] = []
        for op in in_flight:
            if op["kind"] == "block_processing":
                predicate = "reread_header_window_from_common_ancestor"
                outcome = self._check_head(name, checkpoint)
            else:
                state = op["state"]
                predicate = "resend_with_same_idempotency_key"
                outcome = (
                    f"{state}: sent again with Idempotency-Key {op['idempotency_key']}"
                    + (" once its row lease ends" if state == "sending" else "")
                    + "; the receiver applies it at most once"
                )
            checks.append(
                {
                    "operation": op["id"],
                    "predicate": predicate,
                    "outcome": outcome,
                    "material": False,
                }
            )
        return checks

    def _check_head(self, name: str, checkpoint: dict[str, Any]) -> str:
        """Compare the committed head with the node: same hash, or a reorg to re-read."""
        node = self.nodes.get(name)
        number, stored = checkpoint["head_number"], checkpoint["head_hash"]
        if node is None:
            return "not a chain"
        try:
            header = node.header(number)
        except ChainError as exc:
            return f"node not reachable ({exc}); the first poll re-reads from the stored head"
        if header is None:
            return f"block {number} not on the node: re-read from the common ancestor"
        if str(header.hash) == stored:
            return f"stored head {number} is canonical; nothing of block {number + 1} committed"
        return f"stored head {number} was reorged out: re-read from the common ancestor"


def signed_element(
    signer: Sealer, kind: str, body: dict[str, Any], takeover: Takeover
) -> dict[str, Any]:
    """The signed receipt of one recorded element of ``takeover``, checked by the offline
    verifier before anyone stores it (a receipt that would not verify is a bug, not data)."""
    receipt = signer.sign(handoff_body(kind, takeover, body, signer.address, takeover.at))
    verify_receipt(receipt, trusted_signers=[signer.address])
    return receipt
