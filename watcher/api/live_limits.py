"""Live look-ups' own limits: one caller cannot spend what the engine and others need.

A look-up of an unregistered hash (``GET /v1/chains/{chain}/txs/{hash}``) costs three or
four JSON-RPC calls. Made through the engine's client, a read-only caller flooding random
hashes spent the chain's ``calls_per_minute``: polls were skipped, verdicts came late, and
a tx mined seconds after registration timed out falsely. So look-ups

* never spend the engine's budget: a chain with ``calls_per_minute`` looks up through a
  client of its own (built beside the engine's, :mod:`watcher.app.build`);
* have their own budget per chain, ``[api] live_calls_per_minute`` (a sliding window, as
  the engine's: :class:`chains.budget.CallBudget`);
* are limited per caller, ``[api] live_lookups_per_caller_per_minute`` (the token's name;
  the client's address when the API has no tokens).

Past either limit the answer is 429 with ``Retry-After`` (when a look-up would fit again)
and nothing is sent to the node.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from starlette.requests import Request

from chains.budget import BudgetExhausted, CallBudget
from watcher.api.errors import ApiError
from watcher.config.chains import ChainConfig
from watcher.config.model import Config
from watcher.engine.live import lookup_cost

MAX_CALLERS = 10_000
"""Callers remembered at once; beyond it, those with nothing left in their window go."""


class LiveLimits:
    """The per-chain budgets and per-caller rates of live look-ups (module doc)."""

    def __init__(
        self,
        chains: Iterable[str],
        calls_per_minute: int,
        per_caller_per_minute: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.budgets = {name: CallBudget(calls_per_minute, clock=clock) for name in chains}
        """Each chain's live look-up budget (calls per minute)."""
        self.per_caller = per_caller_per_minute
        self.clock = clock
        self._callers: dict[str, CallBudget] = {}
        self._lock = threading.Lock()

    @classmethod
    def of(cls, config: Config) -> LiveLimits:
        """The limits ``[api]`` sets, for every configured chain."""
        return cls(
            [c.name for c in config.chains],
            config.api.live_calls_per_minute,
            config.api.live_lookups_per_caller_per_minute,
        )

    def admit(self, caller: str, chain_config: ChainConfig) -> None:
        """Count one look-up by ``caller`` on the chain (its calls: :func:`lookup_cost`), or
        raise a 429 :class:`ApiError` with its ``Retry-After`` (nothing counted on the
        chain)."""
        chain, calls = chain_config.name, lookup_cost(chain_config)
        mine = self._caller(caller)
        try:
            mine.spend(1, "live look-up")
        except BudgetExhausted:
            raise ApiError(
                429,
                f"rate: caller {caller!r} made {self.per_caller} live look-ups in the last "
                "minute ([api] live_lookups_per_caller_per_minute); retry later, or register "
                "the tx to have it watched",
                retry_after_s=mine.wait_s(1),
                fields=[],
            ) from None
        budget = self.budgets[chain]
        try:
            budget.spend(calls, "live look-up")
        except BudgetExhausted:
            raise ApiError(
                429,
                f"rate: live look-ups on chain {chain!r} used their {budget.limit} calls of "
                "the last minute ([api] live_calls_per_minute; the watcher's own polls are "
                "not affected); retry later, or register the tx to have it watched",
                retry_after_s=budget.wait_s(calls),
                fields=[],
            ) from None

    def _caller(self, caller: str) -> CallBudget:
        with self._lock:
            budget = self._callers.get(caller)
            if budget is None:
                if len(self._callers) >= MAX_CALLERS:
                    self._callers = {k: b for k, b in self._callers.items() if b.spent}
                budget = CallBudget(self.per_caller, clock=self.clock)
                self._callers[caller] = budget
            return budget


def caller_key(config: Config, caller: str, request: Request) -> str:
    """Who a live look-up counts against: the token's name (``caller``), or, when the API
    has no tokens and every caller is ``anonymous``, the client's address as well."""
    if config.api.tokens:
        return caller
    return f"{caller}@{request.client.host if request.client else 'unknown'}"
