"""Celery tasks run by a real ``celery worker`` process, Redis as broker and result backend,
read by the watcher from the result backend only: success is final, failure failed, and a
task the backend never hears of times out at its deadline."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import wait_for
from tests.support.jobs import CeleryWorker, RedisSpace, make_celery_app, need_redis
from tests.support.rigs import FakeClock
from watcher.config.sources import SourceConfig
from watcher.delivery.plan import OutboxPlan
from watcher.sources.poller import SourcePoller
from watcher.sources.settlements import new_source_settlement
from watcher.store import SettlementRecord, Store


@pytest.fixture
def space() -> Iterator[RedisSpace]:
    need_redis()
    s = RedisSpace()
    yield s
    s.cleanup()


class Rig:
    def __init__(self, space: RedisSpace, tmp: Path) -> None:
        self.queue = space.name("q")
        self.worker = CeleryWorker(space, self.queue, tmp / "celery-worker.log")
        self.sender: Any = make_celery_app(space.url, space.token + ":", with_backend=False)
        self.config = SourceConfig.model_validate(
            {
                "name": "tasks",
                "kind": "celery_task",
                "backend_url": space.url,
                "key_prefix": space.token + ":",
                "timeout_s": 600,
            }
        )
        self.store = Store.open(f"sqlite:///{tmp}/finality.db")
        self.poller = SourcePoller(self.store, [self.config], OutboxPlan())

    def send(self, task: str, *args: Any) -> str:
        return str(
            self.sender.send_task(f"tests.support.jobs.{task}", args=args, queue=self.queue).id
        )

    def register(self, task_id: str, timeout_s: float | None = None) -> str:
        new = new_source_settlement(self.config, task_id, self.poller.clock(), timeout_s)
        rec, _ = self.store.register(new)
        return rec.settlement_id

    def settle(self, sid: str, verdict: str, timeout: float = 20.0) -> SettlementRecord:
        def decided() -> SettlementRecord | None:
            self.poller.poll("tasks")
            rec = self.store.settlement(sid)
            return rec if rec.verdict == verdict else None

        try:
            return wait_for(decided, timeout, interval=0.1, what=f"{sid} → {verdict}")
        except TimeoutError as exc:
            rec = self.store.settlement(sid)
            raise AssertionError(
                f"{exc}: {rec.verdict} {rec.decision['evidence']}\n{self.worker.log()}"
            ) from None

    def close(self) -> None:
        self.worker.stop()
        self.sender.close()
        self.poller.stop()
        self.store.close()


@pytest.fixture
def rig(space: RedisSpace, tmp_path: Path) -> Iterator[Rig]:
    r = Rig(space, tmp_path)
    yield r
    r.close()


def test_a_successful_task_is_final_and_a_failing_one_failed(rig: Rig) -> None:
    ok, bad = rig.send("succeed", 3), rig.send("fail", "card expired")
    ok_id, bad_id = rig.register(ok), rig.register(bad)
    rig.poller.poll("tasks")
    assert rig.store.settlement(ok_id).verdict in ("AWAITING_FINALITY", "FINALITY_CONFIRMED")

    done = rig.settle(ok_id, "FINALITY_CONFIRMED")
    evidence = done.decision["evidence"]
    assert evidence["kind"] == "task_succeeded"
    assert (evidence["facts"]["task_id"], evidence["facts"]["state"]) == (ok, "SUCCESS")
    assert str(evidence["facts"]["result_digest"]).startswith("sha256:")
    assert evidence["facts"]["date_done"] is not None

    failed = rig.settle(bad_id, "SETTLEMENT_FAILED")
    facts = failed.decision["evidence"]["facts"]
    assert (facts["state"], facts["exc_type"]) == ("FAILURE", "RuntimeError")
    assert "card expired" in facts["exc_message"]
    assert [e.kind for e in rig.store.events(settlement_id=ok_id)] == ["settlement_confirmed"]
    assert [e.kind for e in rig.store.events(settlement_id=bad_id)] == ["settlement_failed"]


def test_a_task_that_stays_pending_times_out(rig: Rig, space: RedisSpace) -> None:
    # The poller's clock moves when the test says: on a busy machine the 0.5 s timeout
    # would otherwise pass before the first poll looked at the settlement.
    clock = rig.poller.clock = FakeClock(int(time.time() * 1000))
    sid = rig.register(space.name("never-sent"), timeout_s=0.5)
    rig.poller.poll("tasks")
    assert rig.store.settlement(sid).verdict == "AWAITING_FINALITY"
    clock.advance(0.499)
    rig.poller.poll("tasks")
    assert rig.store.settlement(sid).verdict == "AWAITING_FINALITY"
    clock.advance(ms=1)  # the deadline itself: timed out
    rec = rig.settle(sid, "TIMEOUT_TREATED_AS_FAILURE", timeout=5)
    assert rec.decision["evidence"]["kind"] == "task_pending"


def test_the_result_backend_going_away_is_an_outage_not_a_verdict(tmp_path: Path) -> None:
    config = SourceConfig.model_validate(
        {"name": "tasks", "kind": "celery_task", "backend_url": "redis://127.0.0.1:1/0"}
    )
    store = Store.open(f"sqlite:///{tmp_path}/finality.db")
    poller = SourcePoller(store, [config], OutboxPlan())
    try:
        rec, _ = store.register(new_source_settlement(config, "t-1", poller.clock()))
        poller.poll_job("tasks")
        health = poller.slots["tasks"].health
        assert health.consecutive_errors == 1 and "result backend" in str(health.last_error)
        assert store.settlement(rec.settlement_id) == rec
    finally:
        poller.stop()
        store.close()
