"""Whether enough independent endpoints agree before a finality (or failure) is declared.

The engine asks the gate, before each block's transaction, about the settlements whose
depth (or the ``finalized`` tag) has just been reached. Only approved ones may become
``FINALITY_CONFIRMED`` or ``SETTLEMENT_FAILED``; the others keep waiting, with the reason.

:class:`SingleNodeGate` is the ``k = 1`` trade-off: it approves what the one node says and
costs no call. A quorum gate (``k`` of ``n``) checks the inclusion block hash and the head
on other endpoints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from chains.budget import CallsDeferred
from chains.errors import ChainError, NodeDataInvalid
from chains.models import BlockHeader
from chains.rpc import RpcClient
from guard.event_kinds import EventKind


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

    def finalized_bound(self, head_number: int, own: int | None) -> int | None:
        """The ``finalized`` height the chain may use, given our node's tag ``own``: never
        above what enough endpoints say. None when nothing may be trusted yet."""
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

    def finalized_bound(self, head_number: int, own: int | None) -> int | None:
        return own


Alert = Callable[[str, str, dict[str, Any]], None]
"""``alert(kind, severity, payload)``: how the gate reports what it saw. chains/ stays free
of the store; the service passes a function that records the event (watcher.engine.disagreement)."""


def _no_alert(kind: str, severity: str, payload: dict[str, Any]) -> None:
    """Default sink: nothing is recorded (library use without a store)."""


class QuorumGate:
    """``k`` of ``n`` endpoints must agree before a settlement may become terminal.

    An endpoint agrees on an anchor when its block at the anchor's height has the anchor's
    hash and its head reaches the height the decision needs (``confirm_height``, or our head
    when that is lower, as with the ``finalized`` rule). The endpoint our head was read from
    (the failover transport's active one) counts as one: the head's hash commits to every
    anchor below it. The others are asked one by one, best first, until ``k`` agree.

    Cost: one call per other endpoint asked (its block at our head's height: the same hash
    proves agreement on every ancestor, so all anchors at once). Only when that does not
    match (a lagging node, a fork) does the gate ask for the anchor heights and the head.

    A different hash at an anchor's height is a disagreement: the settlement waits and an
    ``rpc_disagreement`` alert says what each endpoint said (once per height and answer). A
    node that simply lacks the block is lagging, not disagreeing. The gate also cross-checks
    each endpoint's ``finalized`` tag every few blocks: a finalized block whose hash changes, or a
    tag that goes backwards, is a ``finality_violation``; the tag trusted for the chain is the
    ``k``-th highest among endpoints (:attr:`trusted_finalized`), so one node running ahead is
    not believed.
    """

    trivial = False

    def __init__(
        self,
        members: Sequence[RpcClient],
        quorum: int,
        active: Callable[[], str] | None = None,
        alert: Alert = _no_alert,
        finalized_every_blocks: int = 16,
    ) -> None:
        if not 1 <= quorum <= len(members):
            raise ValueError(f"quorum {quorum} needs 1..{len(members)} endpoints")
        self.members = list(members)
        self.quorum = quorum
        self.active = active
        self.alert = alert
        self.finalized_every_blocks = finalized_every_blocks
        self.trusted_finalized: int | None = None
        """The ``k``-th highest ``finalized`` height among endpoints (None until known)."""
        self._alerted: set[tuple[int, str, str | None]] = set()
        self._finalized: dict[str, tuple[int, str]] = {}
        self._finalized_hashes: dict[int, tuple[str, str]] = {}
        self._finalized_checked_at: int | None = None

    def approve(self, anchors: Sequence[Anchor], head: BlockHeader) -> GateResult:
        agreed: dict[str, list[str]] = {a.settlement_id: [] for a in anchors}
        said: dict[int, dict[str, str | None]] = {}
        notes: dict[str, str] = {}
        primary = self.active() if self.active else None
        if primary is not None:
            for a in anchors:
                agreed[a.settlement_id].append(primary)
        for member in sorted(self.members, key=_preference):
            if member.endpoint == primary:
                continue
            if all(len(v) >= self.quorum for v in agreed.values()):
                break
            self._ask(member, anchors, head, agreed, said, notes)
        self._maybe_check_finalized(head.number)
        approved = frozenset(sid for sid, eps in agreed.items() if len(eps) >= self.quorum)
        waiting: dict[str, str] = {}
        for a in anchors:
            if a.settlement_id in approved:
                continue
            eps = agreed[a.settlement_id]
            parts = [f"{len(eps)} of {self.quorum} endpoints agree on block {a.block_number}"]
            dissent = {ep: h for ep, h in said.get(a.block_number, {}).items()}
            if dissent:
                parts.append(f"disagreeing: {dissent}")
            if notes:
                parts.append(f"not counted: {notes}")
            waiting[a.settlement_id] = "quorum not reached: " + "; ".join(parts)
        for number, answers in said.items():
            self._report(number, anchors, answers, agreed)
        common: list[str] | None = None
        for sid in approved:
            common = agreed[sid] if common is None else [e for e in common if e in agreed[sid]]
        return GateResult(approved=approved, waiting=waiting, endpoints=tuple(common or ()))

    def _ask(
        self,
        member: RpcClient,
        anchors: Sequence[Anchor],
        head: BlockHeader,
        agreed: dict[str, list[str]],
        said: dict[int, dict[str, str | None]],
        notes: dict[str, str],
    ) -> None:
        """Ask one endpoint; add it to ``agreed`` where it agrees, note why where not."""
        ep = member.endpoint
        wrong = _wrong_chain(member)
        if wrong is not None:
            notes[ep] = f"serves chain id {wrong}"
            return
        distrusted = _distrusted(member)
        if distrusted is not None:
            notes[ep] = f"inconsistent ({distrusted}): not counted"
            return
        try:
            same_head = member.header(head.number)
            if same_head is not None and same_head.hash == head.hash:
                for a in anchors:
                    agreed[a.settlement_id].append(ep)
                return
            heights = sorted({a.block_number for a in anchors})
            blocks = member.blocks([*heights, head.number], full=False)
            latest = member.header("latest")
        except CallsDeferred as exc:
            notes[ep] = f"not asked ({exc})"
            return
        except NodeDataInvalid as exc:
            notes[ep] = f"inconsistent ({exc.detail}): not counted"
            return
        except ChainError as exc:
            notes[ep] = f"unavailable ({type(exc).__name__})"
            return
        at = {
            n: b.header.hash if b is not None else None
            for n, b in zip(heights, blocks, strict=False)
        }
        their_head = latest.number if latest is not None else -1
        for a in anchors:
            theirs = at.get(a.block_number)
            if theirs is None:
                notes[ep] = f"lagging (head {their_head})"
            elif theirs != a.block_hash:
                said.setdefault(a.block_number, {})[ep] = theirs
            elif their_head >= min(a.confirm_height, head.number):
                agreed[a.settlement_id].append(ep)
            else:
                notes[ep] = f"not deep enough (head {their_head})"

    def _report(
        self,
        number: int,
        anchors: Sequence[Anchor],
        answers: Mapping[str, str | None],
        agreed: Mapping[str, list[str]],
    ) -> None:
        """One ``rpc_disagreement`` alert per height and distinct answer."""
        at_height = [a for a in anchors if a.block_number == number]
        ours = at_height[0].block_hash
        fresh = {ep: h for ep, h in answers.items() if (number, ep, h) not in self._alerted}
        if not fresh:
            return
        self._alerted.update((number, ep, h) for ep, h in fresh.items())
        said: dict[str, str | None] = {}
        for ep in agreed[at_height[0].settlement_id]:
            said[ep] = ours
        said.update(answers)
        self.alert(
            EventKind.RPC_DISAGREEMENT,
            "critical",
            {
                "block_number": number,
                "block_hash": ours,
                "said": said,
                "settlements": [a.settlement_id for a in at_height],
                "quorum": self.quorum,
            },
        )

    def finalized_bound(self, head_number: int, own: int | None) -> int | None:
        """``min(own, trusted_finalized)``: our node's tag is believed only as far as ``k``
        endpoints' tags reach. The cross-check is refreshed on its usual schedule, and on
        every new head while ``own`` is ahead of the trusted height (so a tag that moved on
        every honest node is followed at once, and a lone node running ahead costs one
        check per block, only while it runs ahead)."""
        trusted = self.trusted_finalized
        ahead = own is not None and (trusted is None or own > trusted)
        last = self._finalized_checked_at
        if ahead and last is not None and head_number > last:
            self._finalized_checked_at = head_number
            self.check_finalized()
        else:
            self._maybe_check_finalized(head_number)
        trusted = self.trusted_finalized
        if own is None or trusted is None:
            return None
        return min(own, trusted)

    def _maybe_check_finalized(self, head: int) -> None:
        """Cross-check ``finalized`` every ``finalized_every_blocks`` of head progress: the
        tag moves slowly (an epoch at a time), and a per-block cost would break the budget
        of calls per block on slow chains as much as a per-second one on fast chains."""
        last = self._finalized_checked_at
        if last is not None and 0 <= head - last < self.finalized_every_blocks:
            return
        self._finalized_checked_at = head
        self.check_finalized()

    def check_finalized(self) -> None:
        """Read every endpoint's ``finalized`` tag and cross-check it (see the class doc)."""
        heights: list[int] = []
        for member in self.members:
            if _wrong_chain(member) is not None:
                continue  # another chain's tag says nothing about ours
            try:
                header = member.header("finalized")
            except ChainError:
                continue
            if header is None:
                continue
            heights.append(header.number)
            ep = member.endpoint
            before = self._finalized.get(ep)
            problem: str | None = None
            if before is not None and header.number < before[0]:
                problem = f"finalized went backwards from {before[0]} to {header.number}"
            seen = self._finalized_hashes.get(header.number)
            if seen is not None and seen[0] != header.hash:
                problem = (
                    f"finalized block {header.number} is {header.hash} here, {seen[0]} at {seen[1]}"
                )
            if problem is not None:
                self.alert(
                    EventKind.FINALITY_VIOLATION,
                    "critical",
                    {
                        "endpoint": ep,
                        "reason": problem,
                        "finalized_number": header.number,
                        "finalized_hash": header.hash,
                    },
                )
            else:
                self._finalized_hashes.setdefault(header.number, (header.hash, ep))
            if before is None or header.number >= before[0]:
                self._finalized[ep] = (header.number, header.hash)
        if len(heights) >= self.quorum:
            self.trusted_finalized = sorted(heights, reverse=True)[self.quorum - 1]
        if len(self._finalized_hashes) > 256:
            for number in sorted(self._finalized_hashes)[:-128]:
                del self._finalized_hashes[number]


def _wrong_chain(member: RpcClient) -> int | None:
    """The chain id ``member`` answered when it is not ours (chains.health), else None."""
    health = getattr(member.transport, "health", None)
    wrong = getattr(health, "wrong_chain", None)
    return wrong if isinstance(wrong, int) else None


def _distrusted(member: RpcClient) -> str | None:
    """Why ``member``'s data is not believed now (it failed a check: chains.health), else
    None: an endpoint caught lying does not vote."""
    health = getattr(member.transport, "health", None)
    if health is None or not health.distrusted:
        return None
    return str(health.inconsistent)


def _preference(member: RpcClient) -> tuple[int, float]:
    """Healthy endpoints first, then by weight: a node behind an open circuit is asked last."""
    health = getattr(member.transport, "health", None)
    if health is None:
        return (0, 0.0)
    return (0 if health.usable else 1, -float(health.weight))
