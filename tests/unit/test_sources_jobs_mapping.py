"""RQ job and Celery task states mapped to the source vocabulary, on snapshots in the shape
the adapters fetch (no Redis needed: building an adapter opens no connection)."""

from __future__ import annotations

from typing import Any

import pytest

from guard.source import Snapshot, SourceStatus
from guard.types import UnixMillis
from watcher.config.sources import SourceConfig
from watcher.sources.celery_source import CelerySource
from watcher.sources.rq_source import RqSource

NOW = UnixMillis(1_700_000_100_000)
REF = "job-1"


def rq() -> RqSource:
    return RqSource(
        SourceConfig.model_validate(
            {
                "name": "jobs",
                "kind": "rq_job",
                "redis_url": "redis://127.0.0.1:1/0",
                "heartbeat_limit_s": 10,
            }
        )
    )


def rq_snapshot(status: str, result: dict[str, Any] | None = None, **job: Any) -> Snapshot:
    fields = {
        "id": REF,
        "status": status,
        "queue": "default",
        "enqueued_at": NOW - 60_000,
        "started_at": None,
        "ended_at": None,
        "last_heartbeat": None,
        "worker_name": None,
        "worker_alive": None,
        **job,
    }
    return Snapshot(REF, NOW, {"job": fields, "result": result})


@pytest.mark.parametrize(
    ("status", "expected", "kind"),
    [
        ("created", SourceStatus.INITIATED, "job_created"),
        ("queued", SourceStatus.INITIATED, "job_queued"),
        ("deferred", SourceStatus.INITIATED, "job_deferred"),
        ("scheduled", SourceStatus.INITIATED, "job_scheduled"),
        ("finished", SourceStatus.FINAL, "job_finished"),
        ("failed", SourceStatus.FAILED, "job_failed"),
        ("stopped", SourceStatus.FAILED, "job_stopped"),
        ("canceled", SourceStatus.FAILED, "job_canceled"),
        ("something_new", SourceStatus.INITIATED, "job_status_unrecognised"),
    ],
)
def test_rq_statuses(status: str, expected: SourceStatus, kind: str) -> None:
    obs = rq().observe(REF, rq_snapshot(status), None, NOW)
    assert (obs.status, obs.evidence.kind if obs.evidence else None) == (expected, kind)
    assert obs.cutoff is None


def test_a_finished_job_is_final_on_its_end_time_and_result_digest() -> None:
    result = {"id": "1-0", "type": "successful", "return_value_digest": "sha256:ab"}
    obs = rq().observe(REF, rq_snapshot("finished", result, ended_at=NOW - 5), None, NOW)
    assert obs.evidence is not None
    facts = dict(obs.evidence.facts)
    assert (facts["id"], facts["ended_at"], facts["result"]) == (REF, NOW - 5, result)


def test_a_running_job_with_a_fresh_heartbeat_is_awaiting() -> None:
    snap = rq_snapshot("started", started_at=NOW - 60_000, last_heartbeat=NOW - 10_000)
    obs = rq().observe(REF, snap, None, NOW)
    assert (obs.status, obs.cutoff) == (SourceStatus.INITIATED, None)


def test_a_running_job_whose_heartbeat_stopped_has_lost_its_worker() -> None:
    snap = rq_snapshot(
        "started", started_at=NOW - 60_000, last_heartbeat=NOW - 10_001, worker_alive=False
    )
    obs = rq().observe(REF, snap, None, NOW)
    assert obs.status is SourceStatus.INITIATED and obs.evidence is not None
    assert obs.evidence.kind == "worker_lost"
    assert obs.cutoff == NOW - 10_001 + 10_000  # last heartbeat + the limit


def test_a_job_rq_abandoned_is_a_lost_worker_not_a_failure() -> None:
    result = {"type": "failed", "exc_last_line": "Moved to ...", "abandoned": True}
    obs = rq().observe(REF, rq_snapshot("failed", result, ended_at=NOW - 7), None, NOW)
    assert (obs.status, obs.cutoff) == (SourceStatus.INITIATED, NOW - 7)
    assert obs.evidence is not None and obs.evidence.kind == "worker_lost"


def test_an_unknown_job_is_unknown() -> None:
    assert rq().observe(REF, Snapshot(REF, NOW, {"missing": True}), None, NOW).status is (
        SourceStatus.UNKNOWN
    )
    assert rq().observe(REF, None, None, NOW).status is SourceStatus.UNKNOWN


def test_rq_job_ids_are_checked() -> None:
    assert rq().check_ref("a-b_C9") == "a-b_C9"
    for bad in ("a:b", "a b", "x" * 67, ""):
        with pytest.raises(ValueError, match="ref"):
            rq().check_ref(bad)


def celery() -> CelerySource:
    return CelerySource(
        SourceConfig.model_validate(
            {"name": "tasks", "kind": "celery_task", "backend_url": "redis://127.0.0.1:1/0"}
        )
    )


def meta(status: str, result: Any = None, **extra: Any) -> Snapshot:
    fields = {"status": status, "result": result, "task_id": REF, "traceback": None, **extra}
    return Snapshot(REF, NOW, {"meta": fields})


@pytest.mark.parametrize(
    ("status", "expected", "kind"),
    [
        ("RECEIVED", SourceStatus.INITIATED, "task_received"),
        ("STARTED", SourceStatus.INITIATED, "task_started"),
        ("RETRY", SourceStatus.INITIATED, "task_retry"),
        ("SUCCESS", SourceStatus.FINAL, "task_succeeded"),
        ("FAILURE", SourceStatus.FAILED, "task_failed"),
        ("REJECTED", SourceStatus.FAILED, "task_failed"),
        ("REVOKED", SourceStatus.FAILED, "task_revoked"),
        ("PENDING", SourceStatus.UNKNOWN, "task_pending"),
        ("CUSTOM", SourceStatus.INITIATED, "task_state_unrecognised"),
    ],
)
def test_celery_states(status: str, expected: SourceStatus, kind: str) -> None:
    obs = celery().observe(REF, meta(status), None, NOW)
    assert (obs.status, obs.evidence.kind if obs.evidence else None) == (expected, kind)


def test_a_task_with_no_record_is_pending_and_times_out_later() -> None:
    obs = celery().observe(REF, Snapshot(REF, NOW, {"meta": None}), None, NOW)
    assert obs.status is SourceStatus.UNKNOWN and obs.evidence is not None
    assert dict(obs.evidence.facts)["state"] == "PENDING"


def test_a_successful_task_is_final_on_its_result_digest_and_time() -> None:
    snap = meta("SUCCESS", {"ok": True, "ratio": 0.5}, date_done="2023-11-14T22:13:20.000123+00:00")
    obs = celery().observe(REF, snap, None, NOW)
    assert obs.evidence is not None
    facts = dict(obs.evidence.facts)
    assert facts["date_done"] == 1_700_000_000_000
    assert str(facts["result_digest"]).startswith("sha256:")


def test_a_failed_task_names_its_exception() -> None:
    error = {"exc_type": "RuntimeError", "exc_message": ["boom"], "exc_module": "builtins"}
    obs = celery().observe(REF, meta("FAILURE", error, traceback="Traceback...\n"), None, NOW)
    assert obs.evidence is not None
    facts = dict(obs.evidence.facts)
    assert facts["exc_type"] == "RuntimeError"
    assert str(facts["traceback_digest"]).startswith("sha256:")


def test_a_result_in_a_foreign_serialisation_is_not_decoded() -> None:
    snap = Snapshot(REF, NOW, {"undecodable": "ContentDisallowed: pickle"})
    obs = celery().observe(REF, snap, None, NOW)
    assert obs.status is SourceStatus.UNKNOWN and obs.evidence is not None
    assert obs.evidence.kind == "result_undecodable"
