"""Celery tasks run by a real ``celery worker`` process, Redis as broker and result backend,
read by the watcher from the result backend only: success is final, failure failed, and a
task the backend never hears of times out at its deadline."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.jobs import CeleryWorker, RedisSpace, make_celery_app
from tests.support.rigs import SourceRig
from watcher.config.sources import SourceConfig
from watcher.delivery.plan import OutboxPlan
from watcher.sources.poller import SourcePoller
from watcher.sources.settlements import new_source_settlement
from watcher.store import Store


class CeleryRig(SourceRig):
    """Celery tasks sent to a real worker's queue, read from the result backend."""

    def __init__(self, space: RedisSpace, tmp: Path) -> None:
        self.queue = space.name("q")
        config = {
            "name": "tasks",
            "kind": "celery_task",
            "backend_url": space.url,
            "key_prefix": space.token + ":",
            "timeout_s": 600,
        }
        super().__init__(config, tmp, CeleryWorker(space, self.queue, tmp / "celery-worker.log"))
        self.sender: Any = make_celery_app(space.url, space.token + ":", with_backend=False)

    def send(self, task: str, *args: Any) -> str:
        return str(
            self.sender.send_task(f"tests.support.jobs.{task}", args=args, queue=self.queue).id
        )

    def close(self) -> None:
        self.sender.close()
        super().close()


@pytest.fixture
def rig(space: RedisSpace, tmp_path: Path) -> Iterator[CeleryRig]:
    r = CeleryRig(space, tmp_path)
    yield r
    r.close()


def test_a_successful_task_is_final_and_a_failing_one_failed(rig: CeleryRig) -> None:
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


def test_a_task_that_stays_pending_times_out(rig: CeleryRig, space: RedisSpace) -> None:
    rec = rig.times_out_at_its_deadline(space.name("never-sent"))
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
