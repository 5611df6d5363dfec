"""The daemon paces its poll job to the chain's blocks (watcher/app/pacing.py), end to end.

Real anvil (mining only when told, so each poll finds exactly the blocks the test made),
the daemon's own engine, APScheduler's job store and the API on loopback; time is the
test's clock. The scheduler is started paused, so nothing runs on its own: the test plays
its part of each run (a run fires at the job's next run time, and at submission the
interval trigger sets the next one to the fire time plus the interval), then runs the
daemon's poll job and reads where the job's next run went.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from apscheduler.events import EVENT_JOB_SUBMITTED
from apscheduler.schedulers.base import STATE_STOPPED

from tests.integration.quorum_helpers import service_over
from tests.support.anvil import Anvil
from tests.support.daemon import config_text, toml_value, wait_for
from tests.support.ports import free_port
from tests.support.rigs import FakeClock
from tests.support.sources_app import LiveApp
from watcher.app.pacing import PROBE_EVERY, REGULAR, SEARCH_STEPS, poll_job_id

INTERVAL_MS = 500


@pytest.fixture
def live(
    start_anvil: Callable[..., Anvil], tmp_path: Path
) -> Iterator[tuple[LiveApp, Anvil, FakeClock]]:
    anvil = start_anvil("--no-mining")
    chain = {
        "name": "local",
        "chain_id": 31337,
        "rpc": [anvil.url],
        "confirmations": 2,
        "poll_interval_s": INTERVAL_MS / 1000,
    }
    text = config_text(f"sqlite:///{tmp_path}/f.db", f"127.0.0.1:{free_port()}", chain)
    path = tmp_path / "finality.toml"
    path.write_text(text + f"\n[signing]\ndev_key_file = {toml_value(str(tmp_path / 'k'))}\n")
    clock = FakeClock(int(datetime.now(UTC).timestamp() * 1000))
    with LiveApp(path, clock=clock) as app:
        service = app.service
        service.start_chain("local")
        service.scheduler.start(paused=True)
        service.add_poll_job(service.chain_config("local"))
        yield app, anvil, clock


def _ms(when: datetime) -> int:
    return round(when.timestamp() * 1000)


def _run(app: LiveApp, anvil: Anvil, clock: FakeClock, blocks: int) -> int:
    """One run of the poll job with ``blocks`` new blocks: how long until the next run."""
    job = app.service.scheduler.get_job(poll_job_id("local"))
    assert job is not None and job.next_run_time is not None
    fire = job.next_run_time
    clock.now = _ms(fire)
    job.modify(next_run_time=fire + timedelta(milliseconds=INTERVAL_MS))  # at submission
    if blocks:
        anvil.mine(blocks)
    app.service.poll_chain("local")
    moved = app.service.scheduler.get_job(poll_job_id("local"))
    assert moved is not None and moved.next_run_time is not None
    return _ms(moved.next_run_time) - _ms(fire)


def test_the_poll_job_moves_to_just_after_the_next_block(
    live: tuple[LiveApp, Anvil, FakeClock],
) -> None:
    app, anvil, clock = live
    step = INTERVAL_MS // 8
    assert _run(app, anvil, clock, 0) == INTERVAL_MS  # the first poll reads the genesis
    assert _run(app, anvil, clock, 0) == INTERVAL_MS  # nothing new: not regular, no retry
    # Not regular yet: the interval.
    assert [_run(app, anvil, clock, 1) for _ in range(REGULAR - 1)] == [INTERVAL_MS] * (REGULAR - 1)
    # Regular: each poll that still found its block moves the next one two steps earlier.
    search = INTERVAL_MS - SEARCH_STEPS * step
    assert [_run(app, anvil, clock, 1) for _ in range(3)] == [search] * 3
    # Early (nothing yet): tried again a step later, and settled there.
    assert _run(app, anvil, clock, 0) == step
    assert _run(app, anvil, clock, 1) == INTERVAL_MS
    pacing = app.http.get("/v1/chains").json()[0]["heads"]
    assert pacing["mode"] == "poll"
    assert pacing["pacing"] == {
        "step_ms": step,
        "regular": True,
        "settled": True,
        "moves": 4,
        "extra_polls": 1,
    }
    # Settled: a probe half a step earlier every PROBE_EVERY polls, else the interval.
    probes = [_run(app, anvil, clock, 1) for _ in range(PROBE_EVERY)]
    assert probes == [INTERVAL_MS] * (PROBE_EVERY - 1) + [INTERVAL_MS - step // 2]
    # A missed slot: the probe finds nothing, nor its retries at the phase that found the
    # last block and a step past it: that phase again an interval on, and regular again
    # before anything moves.
    assert _run(app, anvil, clock, 0) == step // 2
    assert _run(app, anvil, clock, 0) == step
    assert _run(app, anvil, clock, 0) == INTERVAL_MS - step
    assert [_run(app, anvil, clock, 1) for _ in range(REGULAR - 1)] == [INTERVAL_MS] * (REGULAR - 1)
    # Catching up on several blocks at once is not the chain's cadence: left alone.
    assert _run(app, anvil, clock, 3) == INTERVAL_MS
    assert app.service.pacing.report("local") == {
        "step_ms": step,
        "regular": False,
        "settled": False,
        "moves": 8,
        "extra_polls": 3,
    }


def test_a_poll_ending_during_the_shutdown_does_not_hold_it_up(
    start_anvil: Callable[..., Anvil], tmp_path: Path
) -> None:
    """APScheduler's shutdown holds its job-store lock while it waits for the running poll;
    a poll that asked for that lock to move its next run would wait for ever, and the daemon
    with it (SIGTERM never finishing). The running poll is held on the chain's lock until
    the shutdown has begun, then let go: stop must return."""
    anvil = start_anvil()
    service = service_over(tmp_path, [anvil.url], poll_interval_s=0.5)
    chain_lock = service.chains.locks["local"]
    submitted = threading.Event()
    service.scheduler.add_listener(lambda _event: submitted.set(), EVENT_JOB_SUBMITTED)
    with chain_lock:
        service.scheduler.start()
        service.add_poll_job(service.chain_config("local"))
        assert submitted.wait(10), "the poll job never started"
        stopper = threading.Thread(target=service.stop, daemon=True)
        stopper.start()
        wait_for(lambda: service.scheduler.state == STATE_STOPPED, 10, what="shutdown begun")
    stopper.join(timeout=30)
    assert not stopper.is_alive(), "the shutdown waits for a poll that waits for it"
    assert service.pacing.pacers["local"].streak == 0  # the ending poll moved nothing
