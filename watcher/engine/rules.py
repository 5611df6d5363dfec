"""What every transaction of one chain decides with, and the tally of what it decided.

:class:`ChainRules` is the chain's fixed part (policy, late-finality watch, outbox plan,
whether a quorum gate holds terminal verdicts); :meth:`ChainRules.deciding` adds what one
transaction knows (the gate's answer, a reorg's reversal) and gives the guard's
:class:`~watcher.engine.settle.Rules`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from chains.quorum import GateResult
from guard.settlement import Reversal, SettlementPolicy
from watcher.config.chains import ChainConfig
from watcher.delivery.plan import OutboxPlan
from watcher.engine.settle import Decided, Rules


@dataclass(frozen=True)
class ChainRules:
    """The rules one chain's block transactions are applied with."""

    config: ChainConfig
    """The chain's configuration (name, header window, late watch, deposit rules)."""
    policy: SettlementPolicy
    """The guard's policy (max wait)."""
    plan: OutboxPlan
    """Which outbox rows a change produces."""
    gated: bool
    """Whether a non-trivial finality gate must approve terminal verdicts."""

    @property
    def chain(self) -> str:
        """The chain's name."""
        return self.config.name

    @property
    def late_watch_ms(self) -> int:
        """How long a timed-out settlement is still watched for late finality."""
        return int(self.config.late_watch_s * 1000)

    def deciding(self, approval: GateResult | None, reversal: Reversal | None = None) -> Rules:
        """The rules of one transaction's decisions."""
        return Rules(
            chain=self.chain,
            policy=self.policy,
            late_watch_ms=self.late_watch_ms,
            plan=self.plan,
            gated=self.gated,
            approval=approval,
            reversal=reversal,
        )


@dataclass
class Tally:
    """What one transaction's decisions changed (a local of the transaction, returned in
    its outcome; never kept between transactions)."""

    decisions: int = 0
    """Decisions that changed something."""
    confirmed: list[int] = field(default_factory=list)
    """Inclusion blocks of settlements that just became FINALITY_CONFIRMED."""

    def count(self, decided: Decided) -> None:
        """Count one decision."""
        if decided.confirmed_block is not None:
            self.confirmed.append(decided.confirmed_block)
        if decided.changed:
            self.decisions += 1
