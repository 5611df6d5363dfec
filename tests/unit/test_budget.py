"""The call budget and the rate limiter on a scripted clock (chains.budget is pure-ish: no
network, the clock injected), including the guarantee the daemon relies on: no window of
``window_s`` ever holds more than ``limit`` calls, whatever the pattern of spending."""

from __future__ import annotations

import random
import threading

import pytest

from chains.budget import BudgetExhausted, CallBudget, RateLimiter


class Clock:
    """Monotonic seconds that move only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_budget_refuses_past_the_limit_and_frees_as_the_window_slides() -> None:
    clock = Clock()
    budget = CallBudget(10, window_s=5.0, clock=clock)
    budget.spend(4)
    clock.now += 1
    budget.spend(6)
    assert budget.remaining == 0
    with pytest.raises(BudgetExhausted, match=r"RPC budget: 10 of 10 calls used in the last 5 s"):
        budget.spend(1, "eth_blockNumber")
    assert budget.spent_total == 10 and budget.refused_total == 1
    assert budget.wait_s(1) == pytest.approx(4.0)  # the first 4 calls leave the window at +5 s
    clock.now += 4.0
    assert budget.remaining == 4
    budget.spend(4)
    with pytest.raises(BudgetExhausted):
        budget.spend(1)
    clock.now += 1.0  # the 6 calls made at +1 s leave the window
    assert budget.remaining == 6


def test_budget_default_window_says_this_minute() -> None:
    budget = CallBudget(30, clock=Clock())
    budget.spend(7)
    assert budget.reason() == "RPC budget: 7 of 30 calls used this minute"
    assert budget.snapshot()["calls_per_minute"] == 30


def test_no_window_ever_exceeds_the_limit_under_random_spending() -> None:
    clock = Clock()
    budget = CallBudget(25, window_s=3.0, clock=clock)
    rng = random.Random(7)
    sent: list[tuple[float, int]] = []
    for _ in range(1200):
        clock.now += rng.choice([0.0, 0.001, 0.05, 0.3, 1.0])
        k = rng.choice([1, 1, 1, 2, 5, 12])
        try:
            budget.spend(k)
        except BudgetExhausted:
            continue
        sent.append((clock.now, k))
    assert sum(k for _, k in sent) == budget.spent_total > 25 * 5
    for start, _ in sent:  # every window that starts at a send
        in_window = sum(k for at, k in sent if start <= at < start + 3.0)
        assert in_window <= 25


def test_budget_is_safe_across_threads() -> None:
    budget = CallBudget(500, window_s=60.0)
    refused = [0]
    lock = threading.Lock()

    def spend() -> None:
        for _ in range(200):
            try:
                budget.spend(1)
            except BudgetExhausted:
                with lock:
                    refused[0] += 1

    threads = [threading.Thread(target=spend) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert budget.spent_total == 500
    assert refused[0] == 8 * 200 - 500


def test_planning_skips_a_poll_that_does_not_fit_and_stretches_the_interval() -> None:
    clock = Clock()
    budget = CallBudget(30, clock=clock)
    assert budget.interval_s(0.1) == 2.0  # 30 calls/min cannot pay 600 one-call polls
    assert budget.interval_s(5.0) == 5.0
    assert budget.refusal() is None
    for _ in range(10):
        budget.note_poll_cost(4)
    assert round(budget.poll_cost) == 4
    budget.spend(27)
    refusal = budget.refusal()
    assert refusal is not None and "RPC budget: 27 of 30 calls used this minute" in refusal
    clock.now += 60.0
    assert budget.refusal() is None


def test_budget_rejects_nonsense_limits() -> None:
    with pytest.raises(ValueError, match="at least 1 call"):
        CallBudget(0)
    with pytest.raises(ValueError, match="window"):
        CallBudget(5, window_s=0)
    with pytest.raises(ValueError, match="rate limit"):
        RateLimiter(0)


def test_rate_limiter_holds_the_rate_and_lets_big_batches_go_into_debt() -> None:
    clock = Clock()
    limiter = RateLimiter(2.0, clock=clock)
    assert limiter.try_acquire() and limiter.try_acquire()
    assert not limiter.try_acquire()
    assert limiter.wait_s() == pytest.approx(0.5)
    granted = 0
    for _ in range(1000):  # 10 s in steps of 10 ms
        clock.now += 0.01
        if limiter.try_acquire():
            granted += 1
    assert 19 <= granted <= 21  # 2 calls/s
    # A batch bigger than the burst goes when the bucket is full, then later calls wait it out.
    clock.now += 5
    assert limiter.try_acquire(10)
    assert limiter.wait_s() == pytest.approx(4.5)
    clock.now += 4.5
    assert limiter.try_acquire()
