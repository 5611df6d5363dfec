"""Answers of the reads the operator console draws from (watcher/api/console_reads.py): a
settlement's timeline, a search, time to final per chain, the newest event's id. Every key
today's answers carry is declared; ``extra="allow"`` keeps a newer daemon's keys readable
(and a step carries the keys of its kind)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from watcher.api.models.settlements import Verdict


class TimelineStep(BaseModel):
    """One step: ``registered``, ``reorged``, ``seen_pending``, ``included``, ``depth``,
    ``final``/``failed``/``timed_out``, ``event``, ``receipt_issued``, or a delivery's
    ``<kind>_<state>``, with the keys of its kind (docs/api.md)."""

    model_config = ConfigDict(extra="allow")

    step: str
    at: int | None = Field(description="Unix milliseconds; null when not recorded.")


class TimelineView(BaseModel):
    """``GET /v1/settlements/{settlement_id}/timeline``: its steps in the order they happened."""

    model_config = ConfigDict(extra="allow")

    settlement_id: str
    chain: str
    verdict: Verdict
    required_confirmations: int
    steps: list[TimelineStep]


class SearchView(BaseModel):
    """``GET /v1/search``: the caller's settlements the text names (empty: none)."""

    model_config = ConfigDict(extra="allow")

    settlement_ids: list[str]


class ChainTimeToFinal(BaseModel):
    """Time to final of one chain's settlements confirmed in the window (ms)."""

    model_config = ConfigDict(extra="allow")

    chain: str
    count: int
    median_ms: int
    p95_ms: int


class TimeToFinalView(BaseModel):
    """``GET /v1/stats/time-to-final``: per chain, registration to ``FINALITY_CONFIRMED``."""

    model_config = ConfigDict(extra="allow")

    window_s: int
    chains: list[ChainTimeToFinal]


class LatestEventView(BaseModel):
    """``GET /v1/events/latest``: the newest event's id (0: none yet)."""

    model_config = ConfigDict(extra="allow")

    last_event_id: int
