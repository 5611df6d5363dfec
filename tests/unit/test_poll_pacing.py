"""Poll pacing (watcher/app/pacing.py): polls move to just after the node has the next block.

What a user notices: with a block every interval and a poll every interval, the time from a
block to the poll that sees it (and so from the depth-N block to the verdict) is whatever
phase the daemon started with, up to a whole interval, for as long as it runs. Paced, it
falls to at most one step (an eighth of the interval) within a few polls, for about one
extra call in ten; a chain that is idle or polled at another rate than its blocks costs no
extra call, one mining on demand about one poll in a hundred, and is left on its interval.

The chain here is simulated (block times given, time injected); the scheduler is APScheduler
3's interval trigger (next run = the run that fired + the interval, unless moved).
"""

from __future__ import annotations

import bisect
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from apscheduler.schedulers.background import BackgroundScheduler

from watcher.app.pacing import (
    PROBE_EVERY,
    REGULAR,
    RETRY_BURST,
    RETRY_SHARE,
    SEARCH_STEPS,
    WS_FALLBACK_INTERVALS,
    PollPacer,
    PollPacing,
    poll_job_id,
)
from watcher.config.loading import parse_config

INTERVAL = 500


@dataclass
class Run:
    polls: list[tuple[int, int]]
    """(time, new blocks found) of every poll."""
    lags: list[int]
    """Per block, ms from its arrival to the first poll at or after it."""

    @property
    def polls_per_block(self) -> float:
        return len(self.polls) / max(1, len(self.lags))


def simulate(
    arrivals: Sequence[int],
    pacer: PollPacer | None,
    start: int = 0,
    until: int | None = None,
    late: Mapping[int, int] | None = None,
) -> Run:
    """Polls from ``start`` on an interval trigger, moved by ``pacer`` (None: not paced);
    ``late``: poll number -> ms the scheduler starts it late (the trigger then counts the
    next interval from the late start, as it does after a moved run)."""
    end = until if until is not None else arrivals[-1] + 2 * INTERVAL
    polls: list[tuple[int, int]] = []
    seen, at = 0, start
    while at <= end:
        at += (late or {}).get(len(polls), 0)
        arrived = bisect.bisect_right(arrivals, at)
        polls.append((at, arrived - seen))
        scheduled = at + INTERVAL  # what the trigger gives the next run, at submission
        moved = None if pacer is None else pacer.after_poll(at, arrived - seen, scheduled)
        seen = arrived
        at = moved if moved is not None else scheduled
    times = [t for t, _ in polls]
    lags = [times[bisect.bisect_left(times, a)] - a for a in arrivals if a <= times[-1]]
    return Run(polls, lags)


def regular(phase: int, count: int, period: int = INTERVAL) -> list[int]:
    return [phase + k * period for k in range(1, count + 1)]


def test_the_worst_phase_falls_within_a_step_in_a_few_polls_for_one_call_in_ten() -> None:
    arrivals = regular(phase=1, count=400)  # every poll comes 1 ms before its block: lag ~P
    fixed = simulate(arrivals, None)
    paced_pacer = PollPacer(INTERVAL)
    paced = simulate(arrivals, paced_pacer)
    assert min(fixed.lags[10:]) == INTERVAL - 1  # unpaced: a whole interval, for good
    step = paced_pacer.step_ms
    assert step == INTERVAL // 8
    converged = REGULAR + 8 // SEARCH_STEPS + 2  # regular, then across the interval
    assert max(paced.lags[converged:]) < step, paced.lags[: converged + 5]
    assert statistics.median(paced.lags) < step
    # the price: one retry per probe that finds nothing, about one poll in PROBE_EVERY + 2
    assert paced.polls_per_block <= 1 + 1 / PROBE_EVERY
    assert fixed.polls_per_block <= 1.01


def test_a_lucky_phase_stays_put_and_costs_about_a_retry_per_probe() -> None:
    arrivals = regular(phase=-10, count=400)  # polls 10 ms after each block already
    pacer = PollPacer(INTERVAL)
    run = simulate(arrivals, pacer)
    assert max(run.lags[REGULAR + 2 :]) <= 10
    assert run.polls_per_block <= 1 + 1 / PROBE_EVERY


def test_a_missed_slot_costs_at_most_two_extra_polls_and_keeps_the_phase() -> None:
    arrivals = regular(phase=200, count=400)
    missed = set(range(100, 400, 37))  # an empty slot now and then (a proposer offline)
    with_gaps = [a for k, a in enumerate(arrivals) if k not in missed]
    pacer = PollPacer(INTERVAL)
    run = simulate(with_gaps, pacer)
    whole = simulate(arrivals, PollPacer(INTERVAL))
    assert len(run.polls) - len(whole.polls) <= 2 * len(missed)  # never a spin
    late = sorted(run.lags[40:])
    assert late[int(0.95 * len(late))] < pacer.step_ms  # the gaps do not undo the phase


def test_an_idle_chain_is_polled_on_its_interval_alone() -> None:
    pacer = PollPacer(INTERVAL)
    run = simulate([10**9], pacer, until=200 * INTERVAL)
    assert [t for t, _ in run.polls] == [k * INTERVAL for k in range(201)]
    assert pacer.moves == 0


def test_blocks_mined_on_demand_cost_almost_no_extra_poll() -> None:
    rng = random.Random(7)
    arrivals = sorted(rng.randrange(0, 3_000 * INTERVAL) for _ in range(1_000))
    pacer = PollPacer(INTERVAL)
    run = simulate(arrivals, pacer, until=3_000 * INTERVAL)
    fixed = simulate(arrivals, None, until=3_000 * INTERVAL)
    assert len(run.polls) - len(fixed.polls) <= 0.01 * len(fixed.polls), pacer.moves


def test_a_poll_interval_of_half_or_twice_the_block_time_is_left_alone() -> None:
    for period in (INTERVAL // 2, 2 * INTERVAL):
        pacer = PollPacer(INTERVAL)
        run = simulate(regular(phase=50, count=300, period=period), pacer)
        assert pacer.moves == 0, period
        assert all(t % INTERVAL == 0 for t, _ in run.polls)


def test_jittered_blocks_are_followed_at_a_bounded_cost() -> None:
    rng = random.Random(11)
    arrivals = [a + rng.randrange(0, 60) for a in regular(phase=300, count=600)]
    pacer = PollPacer(INTERVAL)
    run = simulate(arrivals, pacer)
    fixed = simulate(arrivals, None)
    assert statistics.median(run.lags[40:]) < pacer.step_ms + 60
    assert statistics.median(run.lags[40:]) < statistics.median(fixed.lags[40:]) / 2
    assert run.polls_per_block <= 1.35


def test_a_block_time_a_little_off_the_interval_is_followed() -> None:
    for period in (INTERVAL - 4, INTERVAL + 4):  # 0.8 % faster or slower than the polls
        pacer = PollPacer(INTERVAL)
        run = simulate(regular(phase=250, count=800, period=period), pacer)
        late = sorted(run.lags[60:])
        assert late[int(0.9 * len(late))] < 2 * pacer.step_ms, period
        assert run.polls_per_block <= 1.3, period


def test_a_search_that_went_past_the_block_comes_back_to_the_phase_that_found_it() -> None:
    pacer = PollPacer(INTERVAL)
    step = pacer.step_ms
    at = 0
    for _ in range(REGULAR):  # each poll finds its block 10 ms after it came
        moved = pacer.after_poll(at, 1, at + INTERVAL)
        at = moved if moved is not None else at + INTERVAL
    assert at == REGULAR * INTERVAL - SEARCH_STEPS * step  # searching: two steps earlier
    # The block comes 10 ms before the phase that found the last one: this poll is early,
    # and so is the retry a step later; the next retry is at that phase, and finds it.
    assert pacer.after_poll(at, 0, at + INTERVAL) == at + step
    assert pacer.after_poll(at + step, 0, at + step + INTERVAL) == REGULAR * INTERVAL
    assert pacer.after_poll(REGULAR * INTERVAL, 1, (REGULAR + 1) * INTERVAL) is None
    assert pacer.settled and pacer.retries == 2


def test_a_poll_that_did_not_run_starts_the_search_over() -> None:
    pacer = PollPacer(INTERVAL)
    for k in range(REGULAR):
        pacer.after_poll(k * INTERVAL, 1, (k + 1) * INTERVAL)
    assert pacer.streak == REGULAR
    assert pacer.after_poll(REGULAR * INTERVAL, None, (REGULAR + 1) * INTERVAL) is None
    assert pacer.streak == 0
    # not regular any more: an empty poll is not retried
    assert pacer.after_poll((REGULAR + 1) * INTERVAL, 0, (REGULAR + 2) * INTERVAL) is None


def test_the_step_is_an_eighth_of_the_interval_within_bounds() -> None:
    assert PollPacer(250).step_ms == 31  # Arbitrum's 0.25 s
    assert PollPacer(2_000).step_ms == 250  # OP Stack's 2 s
    assert PollPacer(12_000).step_ms == 1_000  # Ethereum's 12 s: capped
    assert PollPacer(100).step_ms == 20  # floored


def test_only_chains_polled_on_their_own_interval_are_paced() -> None:
    def chain(name: str, chain_id: int, extra: str) -> str:
        return (
            f'[[chains]]\nname = "{name}"\nchain_id = {chain_id}\nconfirmations = 2\n'
            f'rpc = ["http://127.0.0.1:9", "ws://127.0.0.1:9"]\n{extra}\n'
        )

    text = "".join(
        [
            '[store]\nurl = "sqlite:///:memory:"\n',
            chain("plain", 900_001, ""),
            chain("strict", 900_002, "poll_pacing = false"),
            chain("pushed", 900_003, 'heads = "ws"'),
            chain("budgeted", 900_004, "calls_per_minute = 100"),
        ]
    )
    pacing = PollPacing(parse_config(text, "<test>").chains, jobs=NoJobs(), clock=lambda: 0)
    assert set(pacing.pacers) == {"plain"}
    assert pacing.report("strict") is None
    assert pacing.report("plain") == {
        "step_ms": 125,  # a chain the registry does not know: the 1 s default interval
        "regular": False,
        "settled": False,
        "moves": 0,
        "extra_polls": 0,
    }


class NoJobs:
    def get_job(self, job_id: str) -> None:
        return None


def test_settled_on_a_steady_chain_pacing_costs_at_most_one_call_in_twenty() -> None:
    """Once settled, each probe that finds the phase at the block's edge already doubles the
    gap to the next: the steady state costs a poll per block plus a few probes' retries."""
    rng = random.Random(5)
    arrivals = [a + rng.randrange(0, 8) for a in regular(phase=321, count=2_000)]
    pacer = PollPacer(INTERVAL)
    run = simulate(arrivals, pacer)
    settle_ms = arrivals[100]
    steady = [t for t, _ in run.polls if t >= settle_ms]
    blocks = sum(1 for a in arrivals if a >= settle_ms)
    assert len(steady) / blocks <= 1.05, (len(steady), blocks, pacer.retries)
    assert statistics.median(run.lags[100:]) < pacer.step_ms  # and still within a step


def test_one_late_poll_keeps_the_phase_and_two_in_a_row_start_over() -> None:
    pacer = PollPacer(INTERVAL)
    arrivals = regular(phase=321, count=60)
    run = simulate(arrivals, pacer, until=arrivals[-1] + pacer.step_ms)
    assert pacer.settled and run.polls[-1][1] == 1
    at = run.polls[-1][0]
    moves = pacer.moves
    # A run the scheduler started late found two blocks: the phase is kept, nothing moves.
    assert pacer.after_poll(at + INTERVAL + 200, 2, at + 2 * INTERVAL) is None
    assert pacer.settled and pacer.moves == moves
    assert pacer.after_poll(at + 2 * INTERVAL, 1, at + 3 * INTERVAL) is None
    # Two in a row: the blocks come faster than the polls, the search starts over.
    assert pacer.after_poll(at + 3 * INTERVAL, 2, at + 4 * INTERVAL) is None
    assert pacer.after_poll(at + 4 * INTERVAL, 2, at + 5 * INTERVAL) is None
    assert not pacer.settled and pacer.streak == 0


def test_polls_the_scheduler_started_late_leave_the_phase_where_it_was() -> None:
    """A busy machine starts a poll late (or the poll before it overran, so its move came
    late): it still finds its block, and the next polls come back to the phase that found
    the blocks before, not an interval after the late start (a settled daemon's retry run
    133 ms late used to pin the phase there: every verdict 0.16 s later, for good)."""
    arrivals = regular(phase=321, count=120)
    pacer = PollPacer(INTERVAL)
    settled = simulate(arrivals, pacer, until=arrivals[59])
    assert pacer.settled and max(settled.lags[-10:]) <= pacer.step_ms
    pacer = PollPacer(INTERVAL)
    late = {n: 133 for n in range(60, 120, 7)}  # every seventh poll, from the 60th
    run = simulate(arrivals, pacer, late=late)
    after = run.lags[60:]
    assert len([lag for lag in after if lag > pacer.step_ms]) <= len(late)  # those polls only
    assert statistics.median(after) <= pacer.step_ms
    assert pacer.retries <= len(run.polls) // RETRY_SHARE + RETRY_BURST


def test_late_blocks_cost_at_most_the_documented_retry_budget() -> None:
    """However the blocks are late (here one in twenty by 200 ms, the rest by up to 40 ms),
    pacing pays at most one retry in RETRY_SHARE polls plus RETRY_BURST, and the phase
    still settles well ahead of the interval's worst case."""
    rng = random.Random(7)
    arrivals = [
        a + rng.randrange(0, 40) + (200 if rng.random() < 0.05 else 0)
        for a in regular(phase=321, count=3_000)
    ]
    pacer = PollPacer(INTERVAL)
    run = simulate(arrivals, pacer)
    assert pacer.retries <= RETRY_BURST + len(run.polls) / RETRY_SHARE
    assert len(run.polls) <= len(arrivals) + pacer.retries + 4  # else one a block (and ends)
    assert run.polls_per_block <= 1.04
    assert statistics.median(run.lags[100:]) < INTERVAL / 2


def test_jitter_pulls_probes_apart_so_the_steady_state_stays_under_one_call_in_twenty() -> None:
    """Blocks late by up to 40 ms: each late block doubles the gap to the next probe, so the
    probes do not pull the phase back into the jitter at a retry each."""
    rng = random.Random(3)
    arrivals = [a + rng.randrange(0, 40) for a in regular(phase=123, count=3_000)]
    pacer = PollPacer(INTERVAL)
    run = simulate(arrivals, pacer)
    settle_ms = arrivals[100]
    steady = [t for t, _ in run.polls if t >= settle_ms]
    assert len(steady) / sum(1 for a in arrivals if a >= settle_ms) <= 1.05
    assert statistics.median(run.lags[100:]) < pacer.step_ms + 40


def ws_chain_pacing(scheduler: BackgroundScheduler) -> PollPacing:
    text = (
        '[store]\nurl = "sqlite:///:memory:"\n[[chains]]\nname = "pushed"\n'
        'chain_id = 900003\nconfirmations = 2\npoll_interval_s = 0.5\nheads = "ws"\n'
        'rpc = ["http://127.0.0.1:9", "ws://127.0.0.1:9"]\n'
    )
    return PollPacing(parse_config(text, "<test>").chains, jobs=scheduler, clock=lambda: 0)


def test_a_poll_woken_by_a_head_holds_the_interval_poll_back() -> None:
    """heads = "ws": a head wakes a poll every block, so the interval job (the fallback)
    would find nothing and pay a call each block; each woken poll moves it to
    WS_FALLBACK_INTERVALS intervals later, and never earlier than it was due."""
    from datetime import UTC, datetime

    scheduler = BackgroundScheduler(timezone="UTC")
    start = datetime.fromtimestamp(1_000, UTC)
    job = scheduler.add_job(
        print, "interval", seconds=0.5, id=poll_job_id("pushed"), next_run_time=start
    )
    pacing = ws_chain_pacing(scheduler)
    assert pacing.pacers == {}  # not paced: the heads say when
    pacing.after_wake("pushed", 1_000_000)
    wait_ms = WS_FALLBACK_INTERVALS * 500
    assert job.next_run_time.timestamp() * 1000 == 1_000_000 + wait_ms
    pacing.after_wake("pushed", 1_000_000 - wait_ms)  # an older wake moves nothing back
    assert job.next_run_time.timestamp() * 1000 == 1_000_000 + wait_ms
    pacing.after_wake("unknown", 2_000_000)  # a chain that polls: nothing
    pacing.close()
    pacing.after_wake("pushed", 1_500_000)  # closed (shutting down): nothing moves
    assert job.next_run_time.timestamp() * 1000 == 1_000_000 + wait_ms
