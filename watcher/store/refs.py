"""What the engine's writes and decisions need of a settlement's record, as protocols: a
whole :class:`~watcher.store.records.SettlementRecord` has it all, and a narrow read (a
block's ripe deposits, :class:`watcher.store.deposits_ripe.RipeDeposit`) has just this."""

from __future__ import annotations

from typing import Protocol


class SettlementRef(Protocol):
    """What writing a settlement's new decision names of it: a whole
    :class:`SettlementRecord`, or a narrower read of it
    (:class:`watcher.store.deposits_ripe.RipeDeposit`)."""

    @property
    def settlement_id(self) -> str: ...

    @property
    def commit_url(self) -> str | None: ...

    @property
    def terminal_at(self) -> int | None: ...


class DepositRef(SettlementRef, Protocol):
    """What deciding a deposit that may become final reads of its record: a whole
    :class:`SettlementRecord`, or the narrow
    :class:`watcher.store.deposits_ripe.RipeDeposit`."""

    @property
    def seq(self) -> int: ...

    @property
    def chain(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def verdict(self) -> str: ...

    @property
    def finality_mode(self) -> str: ...

    @property
    def required_confirmations(self) -> int: ...

    @property
    def initiated_at(self) -> int: ...

    @property
    def timeout_ms(self) -> int: ...

    @property
    def deadline(self) -> int: ...
