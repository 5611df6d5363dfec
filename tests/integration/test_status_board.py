"""The API shows each chain as its last poll job published it, never an engine's live fields.

A real anvil and the daemon as built (its runner, engine and store), its HTTP API driven in
process through ASGI. The engine is moved behind the runner's back (a poll run directly, as
no daemon does): ``/v1/chains`` and ``/metrics`` keep showing the published snapshot until the
runner's poll job publishes the next; ``/healthz`` answers from the snapshot too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.integration.helpers import wait_included
from tests.integration.quorum_helpers import api_get, close_built, service_over
from tests.support.anvil import Anvil
from tests.support.rigs import register_tx
from watcher.app.daemon import App
from watcher.app.status import PollHealth


@pytest.fixture
def service(anvil: Anvil, tmp_path: Path) -> Iterator[App]:
    built = service_over(tmp_path, [anvil.url], confirmations=3)
    try:
        built.start_chain("local")
        yield built
    finally:
        close_built(built)


def chain_json(service: App) -> dict[str, Any]:
    answer = api_get(service, "/v1/chains")
    assert answer.status_code == 200, answer.text
    (chain,) = answer.json()
    assert isinstance(chain, dict)
    return chain


def polls_metric(service: App) -> float:
    text = api_get(service, "/metrics").text
    found = re.search(r'^finality_polls_total\{chain="local"\} (\S+)$', text, re.MULTILINE)
    assert found is not None, text
    return float(found.group(1))


def test_the_api_shows_the_snapshot_the_poll_job_published(service: App, anvil: Anvil) -> None:
    assert service.chains.poll("local") is not None
    assert chain_json(service)["watched"] == 0 and polls_metric(service) == 1
    tx = anvil.send()
    wait_included(anvil, tx)
    register_tx(service.store, service.config.chain("local"), tx, now=service.clock())
    service.watchers["local"].poll()  # the engine moves; nothing is published
    assert len(service.watchers["local"].index.by_id) == 1
    assert chain_json(service)["watched"] == 0 and polls_metric(service) == 1
    service.chains.poll("local")  # the poll job publishes what it found
    assert service.board.get("local").watched == 1
    chain = chain_json(service)
    assert chain["watched"] == 1 and chain["healthy"] is True
    assert polls_metric(service) == 3


def test_healthz_answers_from_the_published_snapshot(service: App) -> None:
    service.chains.poll("local")
    assert api_get(service, "/healthz").status_code == 200
    failing = replace(
        service.board.get("local"),
        health=PollHealth(last_success_ms=service.clock(), last_error="node went away"),
        lagging=True,
    )
    service.board.publish(failing)
    answer = api_get(service, "/healthz")
    assert answer.status_code == 503
    assert answer.json()["chains"]["local"]["healthy"] is False
    assert answer.json()["chains"]["local"]["last_error"] == "node went away"
    chain = chain_json(service)
    assert chain["lagging"] is True and chain["last_error"] == "node went away"
    service.chains.poll("local")  # the next poll job's snapshot replaces it
    assert api_get(service, "/healthz").status_code == 200
    assert chain_json(service)["lagging"] is False
