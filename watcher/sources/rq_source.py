"""RQ jobs as settlements: is the enqueued work done, failed, or never coming back?

=============================================  ===============================================
RQ job status                                  status
=============================================  ===============================================
``created``, ``queued``, ``deferred``,         ``initiated`` (awaiting)
``scheduled``, ``started``
``finished``                                   ``final``; evidence: job id, ``ended_at`` and
                                               the digest of the stored result
``failed``, ``stopped``, ``canceled``          ``failed``; evidence: the exception's last line
                                               and the digest of the whole traceback
``started`` with no heartbeat for longer than  ``initiated`` with a *cutoff*: the worker is
``heartbeat_limit_s``, or ``failed`` by RQ's   lost, the job will never finish, so the wait
own clean-up as abandoned                      ends and the verdict is
                                               ``TIMEOUT_TREATED_AS_FAILURE`` (we never
                                               learned the outcome: it is not a failure)
unknown job id (never enqueued, or expired)    ``unknown``: awaiting until the deadline
=============================================  ===============================================

A worker refreshes the heartbeat of the job it runs every ``--job-monitoring-interval``
seconds (30 by default): ``heartbeat_limit_s`` must exceed it, or healthy long jobs look
lost. Results are read as RQ stored them and digested as bytes, never unpickled: the
watcher runs no code that a writer to Redis could have planted. A finished job's key lives
``result_ttl`` seconds (500 by default): give jobs you watch a ``result_ttl`` longer than
any outage of the watcher, or a job that finished meanwhile is seen as unknown.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import zlib
from datetime import UTC, datetime

from pydantic import Field, model_validator
from redis import Redis
from redis.exceptions import RedisError
from rq.exceptions import NoSuchJobError
from rq.job import Job
from rq.results import Result
from rq.worker import Worker

from guard.settlement import Evidence
from guard.source import (
    Snapshot,
    SourceObservation,
    SourceStatus,
    SourceUnavailable,
    check_ref_text,
)
from guard.types import UnixMillis
from watcher.config.base import KeyedErrors
from watcher.config.sources import SourceConfig, redis_url_problems

KIND = "rq_job"
"""The settlement kind this module serves."""

JOB_ID = re.compile(r"[A-Za-z0-9_-]+")
"""What RQ accepts as a job id (``Job.create(id=...)`` validates the same)."""

AWAITING = frozenset({"created", "queued", "deferred", "scheduled", "started"})
FAILED = frozenset({"failed", "stopped", "canceled"})

ABANDONED = "AbandonedJobError"
"""What RQ writes as the exception of a started job whose worker vanished."""

REDIS_TIMEOUT_S = 5.0
"""Socket timeouts: a hung Redis fails a poll instead of stalling it."""


class RqSettings(SourceConfig):
    """The keys of an ``rq_job`` table::

    [[sources]]
    name = "jobs"
    kind = "rq_job"
    redis_url = "redis://127.0.0.1:6379/0"
    heartbeat_limit_s = 120
    """

    redis_url: str | None = None
    """The Redis the jobs live in (``redis://host:port/db``); required."""
    heartbeat_limit_s: float = Field(default=120.0, gt=0, allow_inf_nan=False)
    """A started job whose heartbeat is older than this has lost its worker; must exceed
    the workers' ``--job-monitoring-interval`` (30 s by default)."""

    @model_validator(mode="after")
    def _check_redis(self) -> RqSettings:
        problems = redis_url_problems(KIND, {"redis_url": self.redis_url}, required="redis_url")
        if problems:
            raise KeyedErrors(problems)
        return self


class RqSource:
    """One ``rq_job`` source (see the module doc)."""

    kind = KIND
    reversible = False
    settings_model = RqSettings

    def __init__(self, source: SourceConfig) -> None:
        config = RqSettings.narrow(source)
        assert config.redis_url is not None  # RqSettings requires it
        self.name = config.name
        self.heartbeat_limit_ms = int(config.heartbeat_limit_s * 1000)
        self.redis = Redis.from_url(
            config.redis_url,
            socket_timeout=REDIS_TIMEOUT_S,
            socket_connect_timeout=REDIS_TIMEOUT_S,
        )

    def check_ref(self, ref: str) -> str:
        """An RQ job id: letters, digits, _ and -."""
        return check_ref_text(ref, JOB_ID, "an RQ job id (letters, digits, _ and -)")

    def fetch(self, ref: str, now: UnixMillis) -> Snapshot:
        """The job's status and times, its worker's liveness, and its latest result."""
        try:
            try:
                job = Job.fetch(ref, connection=self.redis)
            except NoSuchJobError:
                return Snapshot(ref, now, {"missing": True})
            status = job.get_status(refresh=False)
            worker_alive = None
            if job.worker_name:
                key = Worker.redis_worker_namespace_prefix + job.worker_name
                worker_alive = bool(self.redis.exists(key))
            result = self._latest_result(ref)
        except RedisError as exc:
            raise SourceUnavailable(self.name, f"Redis: {exc}") from exc
        return Snapshot(
            ref,
            now,
            {
                "job": {
                    "id": job.id,
                    "status": None if status is None else str(status.value),
                    "queue": job.origin,
                    "enqueued_at": _ms(job.enqueued_at),
                    "started_at": _ms(job.started_at),
                    "ended_at": _ms(job.ended_at),
                    "last_heartbeat": _ms(job.last_heartbeat),
                    "worker_name": job.worker_name,
                    "worker_alive": worker_alive,
                },
                "result": result,
            },
        )

    def _latest_result(self, ref: str) -> dict[str, object] | None:
        """The newest entry of the job's result stream, digested, without unpickling."""
        key = Result.get_key(ref)  # type: ignore[no-untyped-call]  # RQ's own key name
        entries = self.redis.xrevrange(key, "+", "-", count=1)
        if not entries:
            return None
        entry_id, payload = entries[0]
        fields = {_text(k): v for k, v in (payload or {}).items()}
        out: dict[str, object] = {
            "id": _text(entry_id),
            "type": _result_type(fields.get("type")),
            "created_at": int(_text(entry_id).split("-")[0]),
        }
        value = fields.get("return_value")
        if value is not None:
            out["return_value_digest"] = _sha256(_b64(value))
        exc = fields.get("exc_string")
        if exc is not None:
            text = _traceback(exc)
            out["exc_digest"] = _sha256(text.encode())
            out["exc_last_line"] = (text.strip().splitlines() or [""])[-1][:500]
            out["abandoned"] = ABANDONED in text
        return out

    def observe(
        self, ref: str, snapshot: Snapshot | None, previous: Evidence | None, now: UnixMillis
    ) -> SourceObservation:
        """Classify the job (see the module doc). Without a snapshot nothing is known."""
        if snapshot is None or snapshot.objects.get("missing"):
            return SourceObservation(ref, SourceStatus.UNKNOWN)
        job = snapshot.objects.get("job")
        result = snapshot.objects.get("result")
        if not isinstance(job, dict):
            return SourceObservation(ref, SourceStatus.UNKNOWN)
        status = str(job.get("status"))
        facts: dict[str, object] = {
            "source": self.name,
            "source_kind": KIND,
            "ref": ref,
            **job,
            "result": result,
        }
        abandoned = isinstance(result, dict) and result.get("abandoned") is True
        if status == "finished":
            return SourceObservation(
                ref, SourceStatus.FINAL, Evidence.of("job_finished", now, **facts)
            )
        if status == "failed" and abandoned:
            lost_at = _int(job.get("ended_at")) or now
            evidence = Evidence.of("worker_lost", now, **facts, abandoned_by_rq=True)
            return SourceObservation(ref, SourceStatus.INITIATED, evidence, UnixMillis(lost_at))
        if status in FAILED:
            return SourceObservation(
                ref, SourceStatus.FAILED, Evidence.of(f"job_{status}", now, **facts)
            )
        if status == "started":
            beat = _int(job.get("last_heartbeat")) or _int(job.get("started_at"))
            if beat is not None and now - beat > self.heartbeat_limit_ms:
                evidence = Evidence.of(
                    "worker_lost", now, **facts, heartbeat_limit_ms=self.heartbeat_limit_ms
                )
                cutoff = UnixMillis(beat + self.heartbeat_limit_ms)
                return SourceObservation(ref, SourceStatus.INITIATED, evidence, cutoff)
        kind = f"job_{status}" if status in AWAITING else "job_status_unrecognised"
        return SourceObservation(ref, SourceStatus.INITIATED, Evidence.of(kind, now, **facts))

    def close(self) -> None:
        """Close the Redis connections."""
        self.redis.close()


def _ms(moment: datetime | None) -> int | None:
    """A datetime (RQ's are UTC; a naive one is taken as UTC) as Unix milliseconds."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _b64(value: object) -> bytes:
    raw = value if isinstance(value, bytes) else str(value).encode()
    try:
        return base64.b64decode(raw)
    except (binascii.Error, ValueError):
        return raw


def _traceback(value: object) -> str:
    """RQ stores a failure's traceback zlib-compressed and base64-encoded."""
    try:
        return zlib.decompress(_b64(value)).decode(errors="replace")
    except zlib.error:
        return _text(value)


def _result_type(value: object) -> str:
    try:
        return Result.Type(int(_text(value))).name.lower()
    except ValueError:
        return "unknown"


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()
