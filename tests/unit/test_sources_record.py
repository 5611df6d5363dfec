"""Source decisions are stored as the chain engine stores them: one transaction with the
verdict, its events and its outbox rows. A scripted source drives a real SQLite store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guard.settlement import Evidence
from guard.source import Snapshot, SourceObservation, SourceStatus, SourceUnavailable
from guard.types import UnixMillis
from watcher.config.sources import SourceConfig
from watcher.delivery.plan import AlertRoute, OutboxPlan
from watcher.sources import poller as poller_module
from watcher.sources.poller import SourcePoller
from watcher.sources.settlements import new_source_settlement, source_settlement_id
from watcher.store import SettlementRecord, Store

START = 1_700_000_000_000
COMMIT_URL = "http://127.0.0.1:9/commit"
ALERTS = AlertRoute("webhook", "http://127.0.0.1:9/alerts", None, "info")


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> int:
        return self.now


class Scripted:
    """A source whose answer for each ref the test sets: (status, facts, cutoff)."""

    kind = "rq_job"
    name = "jobs"

    def __init__(self, reversible: bool = False) -> None:
        self.reversible = reversible
        self.answers: dict[str, tuple[SourceStatus, dict[str, Any], int | None]] = {}
        self.down: set[str] = set()
        self.fetched: list[str] = []

    def set(self, ref: str, status: SourceStatus, cutoff: int | None = None, **facts: Any) -> None:
        self.answers[ref] = (status, facts, cutoff)

    def check_ref(self, ref: str) -> str:
        return ref

    def fetch(self, ref: str, now: UnixMillis) -> Snapshot:
        if ref in self.down:
            raise SourceUnavailable(self.name, "scripted outage")
        self.fetched.append(ref)
        return Snapshot(ref, now, {})

    def observe(
        self, ref: str, snapshot: Snapshot | None, previous: Evidence | None, now: UnixMillis
    ) -> SourceObservation:
        status, facts, cutoff = self.answers.get(ref, (SourceStatus.UNKNOWN, {}, None))
        evidence = (
            None if status is SourceStatus.UNKNOWN else Evidence.of(status.value, now, **facts)
        )
        return SourceObservation(
            ref, status, evidence, None if cutoff is None else UnixMillis(cutoff)
        )

    def close(self) -> None:
        pass


CONFIG = SourceConfig.model_validate(
    {
        "name": "jobs",
        "kind": "rq_job",
        "redis_url": "redis://127.0.0.1:1/0",
        "timeout_s": 60,
        "late_watch_s": 30,
    }
)


class Rig:
    def __init__(self, store: Store, reversible: bool = False) -> None:
        self.store = store
        self.clock = Clock()
        self.source = Scripted(reversible)
        self.poller = SourcePoller(
            store, [CONFIG], OutboxPlan([ALERTS]), self.clock, sources={"jobs": self.source}
        )

    def register(self, ref: str) -> str:
        new = new_source_settlement(
            CONFIG, ref, self.clock(), dependent_state={"order": ref}, commit_url=COMMIT_URL
        )
        rec, created = self.store.register(new)
        assert created
        return rec.settlement_id

    def rec(self, sid: str) -> SettlementRecord:
        return self.store.settlement(sid)

    def events(self, sid: str) -> list[str]:
        return [e.kind for e in self.store.events(settlement_id=sid)]

    def commits(self, sid: str) -> list[tuple[str, str, str]]:
        return [
            (d.kind, d.state, d.idempotency_key)
            for d in self.store.outbox().list(settlement_id=sid)
            if d.channel == "commit"
        ]

    def alerts(self) -> list[str]:
        return [d.kind for d in self.store.outbox().list(limit=1000) if d.channel == "webhook"]


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    store = Store.open(f"sqlite:///{tmp_path}/finality.db")
    yield Rig(store)
    store.close()


@pytest.fixture
def reversible_rig(tmp_path: Path) -> Iterator[Rig]:
    store = Store.open(f"sqlite:///{tmp_path}/finality.db")
    yield Rig(store, reversible=True)
    store.close()


def test_the_id_and_row_of_a_source_settlement(rig: Rig) -> None:
    sid = rig.register("job-1")
    rec = rig.rec(sid)
    assert sid == source_settlement_id("rq_job", "jobs", "job-1")
    assert (rec.chain, rec.tx_hash, rec.finality_mode, rec.verdict) == (
        "jobs",
        "job-1",
        "rq_job",
        "AWAITING_FINALITY",
    )
    assert (rec.deadline, rec.watching) == (START + 60_000, True)


def test_progress_is_stored_only_when_its_facts_change(rig: Rig) -> None:
    sid = rig.register("job-1")
    rig.source.set("job-1", SourceStatus.INITIATED, state="queued")
    assert rig.poller.poll("jobs") == 1
    rig.clock.now += 1000
    assert rig.poller.poll("jobs") == 0  # same facts, later: nothing to store
    rig.source.set("job-1", SourceStatus.INITIATED, state="started")
    assert rig.poller.poll("jobs") == 1
    rec = rig.rec(sid)
    assert rec.verdict == "AWAITING_FINALITY"
    assert rec.decision["evidence"]["facts"] == {"state": "started"}
    assert rig.events(sid) == [] and rig.commits(sid) == []


def test_final_stores_the_verdict_its_event_and_the_commit_together(rig: Rig) -> None:
    sid = rig.register("job-1")
    rig.source.set("job-1", SourceStatus.FINAL, ended_at=5)
    rig.poller.poll("jobs")
    rec = rig.rec(sid)
    assert (rec.verdict, rec.watching, rec.terminal_at) == ("FINALITY_CONFIRMED", False, START)
    assert rig.events(sid) == ["settlement_confirmed"]
    assert rig.commits(sid) == [("commit", "pending", f"fw:{sid}:commit")]
    assert rig.alerts() == ["settlement_confirmed"]
    assert rig.poller.poll("jobs") == 0 and rig.source.fetched == ["job-1"]  # no longer polled


def test_failed_stores_a_discard(rig: Rig) -> None:
    sid = rig.register("job-1")
    rig.source.set("job-1", SourceStatus.FAILED, exc="RuntimeError: boom")
    rig.poller.poll("jobs")
    assert rig.rec(sid).verdict == "SETTLEMENT_FAILED"
    assert rig.events(sid) == ["settlement_failed"]
    assert rig.commits(sid) == [("discard", "pending", f"fw:{sid}:discard")]


def test_a_reversal_after_finality_is_a_finality_violation(reversible_rig: Rig) -> None:
    rig = reversible_rig
    sid = rig.register("pay-1")
    rig.source.set("pay-1", SourceStatus.FINAL, funds="available")
    rig.poller.poll("jobs")
    assert (rig.rec(sid).verdict, rig.rec(sid).watching) == ("FINALITY_CONFIRMED", True)
    rig.clock.now += 1000
    rig.source.set("pay-1", SourceStatus.REVERSED, refunds=["re_1"])
    assert rig.poller.poll("jobs") == 1
    rec = rig.rec(sid)
    assert (rec.verdict, rec.watching) == ("SETTLEMENT_FAILED", False)
    assert rig.events(sid) == ["settlement_confirmed", "finality_violation"]
    violation = rig.store.events(settlement_id=sid)[-1]
    assert violation.severity == "critical"
    assert violation.payload["previous"]["verdict"] == "FINALITY_CONFIRMED"
    assert violation.payload["now"]["evidence"]["facts"] == {"refunds": ["re_1"]}
    assert (violation.payload["source"], violation.payload["ref"]) == ("jobs", "pay-1")
    # The commit not yet delivered must not go out any more; the failure is told (discard).
    assert rig.commits(sid) == [
        ("commit", "cancelled", f"fw:{sid}:commit"),
        ("discard", "pending", f"fw:{sid}:discard"),
    ]
    assert rig.alerts() == ["settlement_confirmed", "finality_violation"]


def test_a_reversible_confirmation_is_watched_only_for_late_watch_s(reversible_rig: Rig) -> None:
    rig = reversible_rig
    sid = rig.register("pay-1")
    rig.source.set("pay-1", SourceStatus.FINAL)
    rig.poller.poll("jobs")
    rig.clock.now += 29_999
    rig.poller.poll("jobs")
    assert rig.rec(sid).watching
    rig.clock.now += 1
    assert rig.poller.poll("jobs") == 1
    assert (rig.rec(sid).verdict, rig.rec(sid).watching) == ("FINALITY_CONFIRMED", False)


def test_a_reversal_before_finality_is_a_plain_failure(reversible_rig: Rig) -> None:
    rig = reversible_rig
    sid = rig.register("pay-1")
    rig.source.set("pay-1", SourceStatus.ACCEPTED)
    rig.poller.poll("jobs")
    rig.source.set("pay-1", SourceStatus.REVERSED, refunds=["re_1"])
    rig.poller.poll("jobs")
    assert rig.rec(sid).verdict == "SETTLEMENT_FAILED"
    assert rig.events(sid) == ["settlement_failed"]
    assert rig.commits(sid) == [("discard", "pending", f"fw:{sid}:discard")]


def test_timeout_then_late_finality(rig: Rig) -> None:
    sid = rig.register("job-1")
    rig.source.set("job-1", SourceStatus.INITIATED, state="started")
    rig.clock.now = START + 60_000
    rig.poller.poll("jobs")
    rec = rig.rec(sid)
    assert (rec.verdict, rec.watching) == ("TIMEOUT_TREATED_AS_FAILURE", True)
    assert rig.commits(sid) == [("discard", "pending", f"fw:{sid}:discard")]
    rig.clock.now += 1000
    rig.source.set("job-1", SourceStatus.FINAL)
    rig.poller.poll("jobs")
    rec = rig.rec(sid)
    assert (rec.verdict, rec.watching) == ("TIMEOUT_TREATED_AS_FAILURE", False)
    assert rig.events(sid) == ["settlement_timed_out", "late_finality"]
    assert [k for k, _, _ in rig.commits(sid)] == ["discard"]  # never a commit after a discard


def test_a_lost_worker_times_out_before_the_deadline(rig: Rig) -> None:
    sid = rig.register("job-1")
    rig.source.set("job-1", SourceStatus.INITIATED, cutoff=START + 5_000, lost=True)
    rig.clock.now = START + 4_999
    rig.poller.poll("jobs")
    assert rig.rec(sid).verdict == "AWAITING_FINALITY"
    rig.clock.now = START + 5_000
    rig.poller.poll("jobs")
    rec = rig.rec(sid)
    assert rec.verdict == "TIMEOUT_TREATED_AS_FAILURE"
    assert rec.decision["deadline"] == START + 5_000 and rec.deadline == START + 60_000
    assert rec.decision["evidence"]["facts"] == {"lost": True}


def test_an_outage_decides_what_was_fetched_and_concludes_nothing_else(rig: Rig) -> None:
    first, second = rig.register("job-1"), rig.register("job-2")
    rig.source.set("job-1", SourceStatus.FINAL)
    rig.source.set("job-2", SourceStatus.FINAL)
    rig.source.down.add("job-2")
    with pytest.raises(SourceUnavailable):
        rig.poller.poll("jobs")
    assert (rig.rec(first).verdict, rig.rec(second).verdict) == (
        "FINALITY_CONFIRMED",
        "AWAITING_FINALITY",
    )
    rig.poller.poll_job("jobs")  # the scheduled job records the failure instead of raising
    health = rig.poller.slots["jobs"].health
    assert health.consecutive_errors == 1 and "scripted outage" in str(health.last_error)
    assert not rig.poller.healthy("jobs")
    rig.source.down.clear()
    rig.poller.poll_job("jobs")
    assert rig.rec(second).verdict == "FINALITY_CONFIRMED"
    assert (health.consecutive_errors, health.last_error) == (0, None)
    assert rig.poller.healthy("jobs")


def test_every_settlement_gets_its_turn(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(poller_module, "MAX_FETCH_PER_POLL", 2)
    for ref in ("a", "b", "c"):
        rig.register(ref)
    rig.poller.poll("jobs")
    rig.poller.poll("jobs")
    assert rig.source.fetched == ["a", "b", "c", "a"]


def test_a_pushed_snapshot_reaches_a_settlement_no_longer_watched(reversible_rig: Rig) -> None:
    rig = reversible_rig
    sid = rig.register("pay-1")
    rig.source.set("pay-1", SourceStatus.FINAL)
    rig.poller.poll("jobs")
    rig.clock.now += 60_000  # past the reversal watch: polling has stopped
    rig.poller.poll("jobs")
    assert not rig.rec(sid).watching
    rig.source.set("pay-1", SourceStatus.REVERSED, disputes=["dp_1"])
    rec = rig.poller.receive("jobs", "pay-1", Snapshot("pay-1", UnixMillis(rig.clock()), {}))
    assert rec is not None and rec.verdict == "SETTLEMENT_FAILED"
    assert rig.events(sid)[-1] == "finality_violation"
    assert rig.poller.receive("jobs", "nobody", Snapshot("nobody", UnixMillis(0), {})) is None
