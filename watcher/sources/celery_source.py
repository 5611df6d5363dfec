"""Celery tasks as settlements, read from the workers' Redis result backend.

===========================================  ================================================
Celery state (result backend)                status
===========================================  ================================================
``PENDING`` (the backend has no record:      ``unknown``: awaiting; past the deadline the
not started yet, or no such task)            verdict is ``TIMEOUT_TREATED_AS_FAILURE``
``RECEIVED``, ``STARTED``, ``RETRY``         ``initiated`` (awaiting)
``SUCCESS``                                  ``final``; evidence: task id, ``date_done`` and
                                             the digest of the result
``FAILURE``, ``REVOKED``, ``REJECTED``       ``failed``; evidence: the exception type and
                                             message, the digest of the traceback
===========================================  ================================================

Only the result backend is read (one GET per task): the watcher never talks to the broker
and never imports the workers' code. Results are accepted as JSON only (Celery's default
``result_serializer``): a result in another format is not decoded (pickle would run code
from Redis in the watcher) and the task stays ``unknown``, with the reason in its evidence.
``key_prefix`` must match the workers' ``result_backend_transport_options``
``global_keyprefix``, if they set one. Results expire after the workers' ``result_expires``
(1 day by default): a task that finished longer ago than that is seen as ``PENDING``.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from celery import Celery
from celery.exceptions import BackendError
from kombu.exceptions import ContentDisallowed, DecodeError
from pydantic import model_validator
from redis.exceptions import RedisError

from guard.canonical import CanonicalError
from guard.settlement import Evidence
from guard.source import (
    Snapshot,
    SourceObservation,
    SourceStatus,
    SourceUnavailable,
    check_ref_text,
    objects_digest,
)
from guard.types import UnixMillis
from watcher.config.base import KeyedErrors
from watcher.config.sources import SourceConfig, redis_url_problems

KIND = "celery_task"
"""The settlement kind this module serves."""

AWAITING = frozenset({"RECEIVED", "STARTED", "RETRY"})
FAILED = frozenset({"FAILURE", "REVOKED", "REJECTED"})

REDIS_TIMEOUT_S = 5.0
"""Socket timeouts: a hung Redis fails a poll instead of stalling it."""


class CelerySettings(SourceConfig):
    """The keys of a ``celery_task`` table::

    [[sources]]
    name = "tasks"
    kind = "celery_task"
    backend_url = "redis://127.0.0.1:6379/1"
    """

    backend_url: str | None = None
    """The Redis result backend (``redis://host:port/db``); required."""
    key_prefix: str | None = None
    """The backend's ``global_keyprefix`` transport option, if the workers use one."""

    @model_validator(mode="after")
    def _check_backend(self) -> CelerySettings:
        urls = {"backend_url": self.backend_url}
        problems = redis_url_problems(KIND, urls, required="backend_url")
        if problems:
            raise KeyedErrors(problems)
        return self


class CelerySource:
    """One ``celery_task`` source (see the module doc)."""

    kind = KIND
    reversible = False
    settings_model = CelerySettings

    def __init__(self, source: SourceConfig) -> None:
        config = CelerySettings.narrow(source)
        self.name = config.name
        app = Celery(f"finality-{config.name}", set_as_current=False)
        app.conf.update(
            result_backend=config.backend_url,
            accept_content=["json"],
            result_accept_content=["json"],
            redis_socket_timeout=REDIS_TIMEOUT_S,
            redis_socket_connect_timeout=REDIS_TIMEOUT_S,
            result_backend_transport_options=(
                {"global_keyprefix": config.key_prefix} if config.key_prefix else {}
            ),
        )
        self.app = app

    def check_ref(self, ref: str) -> str:
        """A Celery task id (any printable id; Celery's own are UUIDs)."""
        return check_ref_text(ref)

    def fetch(self, ref: str, now: UnixMillis) -> Snapshot:
        """The task's meta as the backend stores it (one GET), decoded as JSON."""
        backend = self.app.backend
        try:
            raw = backend.get(backend.get_key_for_task(ref))
        except (RedisError, BackendError) as exc:
            raise SourceUnavailable(self.name, f"result backend: {exc}") from exc
        if not raw:
            return Snapshot(ref, now, {"meta": None})
        try:
            meta = backend.decode(raw)
        except (ContentDisallowed, DecodeError, ValueError) as exc:
            return Snapshot(ref, now, {"undecodable": f"{type(exc).__name__}: {exc}"[:300]})
        if not isinstance(meta, dict):
            return Snapshot(ref, now, {"undecodable": f"meta is a {type(meta).__name__}"})
        return Snapshot(ref, now, {"meta": meta})

    def observe(
        self, ref: str, snapshot: Snapshot | None, previous: Evidence | None, now: UnixMillis
    ) -> SourceObservation:
        """Classify the task (see the module doc)."""
        if snapshot is None:
            return SourceObservation(ref, SourceStatus.UNKNOWN)
        base: dict[str, object] = {"source": self.name, "source_kind": KIND, "ref": ref}
        undecodable = snapshot.objects.get("undecodable")
        if undecodable is not None:
            evidence = Evidence.of("result_undecodable", now, **base, reason=str(undecodable))
            return SourceObservation(ref, SourceStatus.UNKNOWN, evidence)
        meta = snapshot.objects.get("meta")
        if not isinstance(meta, dict):
            evidence = Evidence.of("task_pending", now, **base, state="PENDING")
            return SourceObservation(ref, SourceStatus.UNKNOWN, evidence)
        state = str(meta.get("status"))
        facts = {
            **base,
            "task_id": str(meta.get("task_id", ref)),
            "state": state,
            "date_done": _ms(meta.get("date_done")),
            "retries": _int(meta.get("retries")),
            "worker": _str(meta.get("worker")),
        }
        if state == "SUCCESS":
            facts["result_digest"] = _digest(meta.get("result"))
            return SourceObservation(
                ref, SourceStatus.FINAL, Evidence.of("task_succeeded", now, **facts)
            )
        if state in FAILED:
            error = meta.get("result")
            if isinstance(error, dict):
                facts["exc_type"] = _str(error.get("exc_type"))
                facts["exc_message"] = str(error.get("exc_message"))[:500]
            traceback = meta.get("traceback")
            if isinstance(traceback, str):
                facts["traceback_digest"] = (
                    "sha256:" + hashlib.sha256(traceback.encode()).hexdigest()
                )
            kind = "task_revoked" if state == "REVOKED" else "task_failed"
            return SourceObservation(ref, SourceStatus.FAILED, Evidence.of(kind, now, **facts))
        if state == "PENDING":
            return SourceObservation(
                ref, SourceStatus.UNKNOWN, Evidence.of("task_pending", now, **facts)
            )
        kind = f"task_{state.lower()}" if state in AWAITING else "task_state_unrecognised"
        return SourceObservation(ref, SourceStatus.INITIATED, Evidence.of(kind, now, **facts))

    def close(self) -> None:
        """Close the backend's connections."""
        self.app.close()


def _digest(value: Any) -> str:
    """Canonical digest of a JSON result (anything else: of its repr, marked as such)."""
    try:
        return objects_digest(value)
    except CanonicalError:
        return "repr-sha256:" + hashlib.sha256(repr(value).encode()).hexdigest()


def _ms(value: Any) -> int | None:
    """Celery's ``date_done`` (an ISO 8601 string, UTC) as Unix milliseconds."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
