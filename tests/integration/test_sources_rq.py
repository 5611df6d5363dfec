"""RQ jobs on the machine's real Redis, run by a real ``rq worker`` process.

A job that returns is final, a job that raises failed, and a job whose worker is killed
with SIGKILL in the middle of it (its heartbeat stops) ends timed out, long before the
registration's own deadline. The last test follows two jobs from registration to the
commit and the discard a receiver applies.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rq import Queue

from tests.support.daemon import wait_for
from tests.support.jobs import RedisSpace, RqWorker, fail, sleep_forever, succeed
from tests.support.receiver import Receiver
from tests.support.rigs import SourceRig
from tests.support.sources_app import LiveApp, source_config_file

HEARTBEAT_LIMIT_S = 2.5
"""Above the worker's 1 s monitoring interval, so a live job never looks lost."""


class RqRig(SourceRig):
    """RQ jobs enqueued on a real worker's queue, read from Redis."""

    def __init__(self, space: RedisSpace, tmp: Path) -> None:
        self.queue = Queue(space.name("q"), connection=space.redis)
        config = {
            "name": "jobs",
            "kind": "rq_job",
            "redis_url": space.url,
            "heartbeat_limit_s": HEARTBEAT_LIMIT_S,
            "timeout_s": 600,
        }
        super().__init__(config, tmp, RqWorker(space, self.queue.name, tmp / "rq-worker.log"))


@pytest.fixture
def rig(space: RedisSpace, tmp_path: Path) -> Iterator[RqRig]:
    r = RqRig(space, tmp_path)
    yield r
    r.close()


def test_jobs_that_return_raise_or_lose_their_worker(
    rig: RqRig, space: RedisSpace, tmp_path: Path
) -> None:
    ok = rig.queue.enqueue(succeed, 7, job_id=space.name("ok"), result_ttl=600)
    bad = rig.queue.enqueue(fail, "no stock", job_id=space.name("bad"), failure_ttl=600)
    running = tmp_path / "running"
    stuck = rig.queue.enqueue(
        sleep_forever, str(running), job_id=space.name("stuck"), job_timeout=600
    )
    ok_id, bad_id, stuck_id = (rig.register(j.id) for j in (ok, bad, stuck))

    finished = rig.settle(ok_id, "FINALITY_CONFIRMED")
    facts = finished.decision["evidence"]["facts"]
    assert finished.decision["evidence"]["kind"] == "job_finished"
    assert facts["id"] == ok.id and facts["ended_at"] is not None
    assert facts["result"]["type"] == "successful"
    assert str(facts["result"]["return_value_digest"]).startswith("sha256:")

    failed = rig.settle(bad_id, "SETTLEMENT_FAILED")
    assert failed.decision["evidence"]["kind"] == "job_failed"
    assert failed.decision["evidence"]["facts"]["result"]["exc_last_line"] == (
        "RuntimeError: no stock"
    )

    wait_for(running.exists, 10, what="the stuck job to run")
    rig.poller.poll("jobs")
    assert rig.store.settlement(stuck_id).verdict == "AWAITING_FINALITY"  # alive: waiting
    killed_at = time.time()
    rig.worker.kill9()
    lost = rig.settle(stuck_id, "TIMEOUT_TREATED_AS_FAILURE", timeout=HEARTBEAT_LIMIT_S + 10)
    assert time.time() - killed_at < HEARTBEAT_LIMIT_S + 5  # not the 600 s deadline
    evidence = lost.decision["evidence"]
    assert evidence["kind"] == "worker_lost"
    assert evidence["facts"]["status"] == "started"
    assert evidence["facts"]["worker_name"] == space.name("rqworker")
    assert lost.decision["deadline"] < lost.deadline  # the wait ended at the cutoff
    assert [e.kind for e in rig.store.events(settlement_id=stuck_id)] == ["settlement_timed_out"]
    assert [e.kind for e in rig.store.events(settlement_id=bad_id)] == ["settlement_failed"]


def test_an_unknown_job_waits_until_its_deadline(rig: RqRig, space: RedisSpace) -> None:
    timed_out = rig.times_out_at_its_deadline(space.name("never"))
    assert timed_out.decision["evidence"] is None  # nothing was ever observed


def test_jobs_commit_and_discard_their_dependent_state(space: RedisSpace, tmp_path: Path) -> None:
    queue = Queue(space.name("q"), connection=space.redis)
    worker = RqWorker(space, queue.name, tmp_path / "rq-worker.log")
    with Receiver() as receiver:
        config = source_config_file(
            tmp_path,
            [
                {
                    "name": "jobs",
                    "kind": "rq_job",
                    "redis_url": space.url,
                    "heartbeat_limit_s": HEARTBEAT_LIMIT_S,
                    "poll_interval_s": 0.2,
                }
            ],
            delivery={"receipt_wait_s": 0, "backoff_initial_s": 0.2},
        )
        try:
            with LiveApp(config, start_components=True) as app:
                ok = queue.enqueue(succeed, "x", job_id=space.name("ok"), result_ttl=600)
                bad = queue.enqueue(fail, job_id=space.name("bad"), failure_ttl=600)
                ids = {}
                for job, state in ((ok, {"credit": 5}), (bad, {"credit": 9})):
                    view = app.register(
                        kind="rq_job",
                        ref=job.id,
                        dependent_state=state,
                        commit_url=receiver.url("/jobs"),
                    )
                    assert (view["kind"], view["source"], view["ref"]) == ("rq_job", "jobs", job.id)
                    ids[job.id] = view["settlement_id"]
                app.wait_verdict(ids[ok.id], "FINALITY_CONFIRMED")
                app.wait_verdict(ids[bad.id], "SETTLEMENT_FAILED")
                commit = wait_for(lambda: receiver.effects(type_="commit"), 10, what="commit")
                discard = wait_for(lambda: receiver.effects(type_="discard"), 10, what="discard")
                assert [b["dependent_state"] for b in commit] == [{"credit": 5}]
                assert [b["dependent_state"] for b in discard] == [{"credit": 9}]
                assert commit[0]["settlement_id"] == ids[ok.id]
                assert commit[0]["idempotency_key"] == f"fw:{ids[ok.id]}:commit"
        finally:
            worker.stop()
