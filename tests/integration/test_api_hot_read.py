"""``GET /v1/settlements/{id}``'s hot read layer (watcher/api/hot_read.py, issue 14): what it
answers is byte for byte what the route answers, it answers only the plain success, and the
read it makes runs no SQLAlchemy statement.

Real parts: the daemon's service and API under uvicorn on loopback (tests/support/
sources_app.py), tokens configured or not, its SQLite store. A query string the route ignores
(``?via=route``) makes the layer step aside, so the same settlement is read both ways; the
application's ``state.hot_reads`` counts what the layer answered itself.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.integration.test_api_read_costs import Statements
from tests.support.rigs import FakeClock
from tests.support.sources_app import LiveApp, source_config_file

CHAIN = "local"
READER = "hot-reader-" + secrets.token_hex(16)
"""read + register: the caller whose settlements are read."""
OTHER = "hot-other-" + secrets.token_hex(16)
"""read + register: another caller."""
REGISTRAR = "hot-registrar-" + secrets.token_hex(16)
"""register only."""
TOKENS = f"""
[[api.tokens]]
name = "backend"
token = "{READER}"
scopes = ["read", "register"]

[[api.tokens]]
name = "other"
token = "{OTHER}"
scopes = ["read", "register"]

[[api.tokens]]
name = "registrar"
token = "{REGISTRAR}"
scopes = ["register"]
"""


def _live(tmp_path: Path, tokens: bool) -> LiveApp:
    path = source_config_file(tmp_path, [])
    if tokens:
        path.write_text(path.read_text() + TOKENS)
    live = LiveApp(path, clock=FakeClock())  # a view says the time it answers: hold it still
    live.service.store.ensure_chain(CHAIN, 31337, live.service.clock())
    if tokens:
        live.http.headers["Authorization"] = f"Bearer {READER}"
    return live


@pytest.fixture(params=["tokens", "open"])
def live(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LiveApp]:
    with _live(tmp_path, request.param == "tokens") as app:
        yield app


def _answered(live: LiveApp) -> int:
    """How many requests the hot layer answered itself so far."""
    app = live.server.config.app
    assert isinstance(app, FastAPI)
    count: int = app.state.hot_reads.answered
    return count


def _register(live: LiveApp, **extra: Any) -> str:
    body = {"chain": CHAIN, "tx_hash": "0x" + secrets.token_hex(32), **extra}
    answer = live.http.post("/v1/settlements", json=body)
    assert answer.status_code == 201, answer.text
    sid: str = answer.json()["settlement_id"]
    return sid


def _include(live: LiveApp, sid: str, block: int, head: int) -> None:
    store = live.service.store
    with store.block_txn(CHAIN, live.service.clock()) as txn:
        txn.set_inclusion(store.settlement(sid), block, "0x" + "8" * 64, 0, 1, None, None)
        txn.put_header(head, "0x" + secrets.token_hex(32), "0x" + "9" * 64, 0, keep=64)


def _shown(answer: httpx.Response) -> tuple[int, list[tuple[str, str]], bytes]:
    """Status, headers (all but ``date``, which moves) and the body bytes."""
    headers = [(k, v) for k, v in answer.headers.multi_items() if k != "date"]
    return answer.status_code, headers, answer.content


def _both_ways(live: LiveApp, sid: str) -> tuple[Any, Any]:
    """The settlement read by the hot layer and by the route; each must have been answered
    by the one it was meant for."""
    before = _answered(live)
    hot = live.http.get(f"/v1/settlements/{sid}")
    assert _answered(live) == before + 1, "the hot layer did not answer the plain read"
    route = live.http.get(f"/v1/settlements/{sid}", params={"via": "route"})
    assert _answered(live) == before + 1, "the hot layer answered a request with a query"
    return _shown(hot), _shown(route)


def test_the_hot_read_answers_the_routes_bytes_pending_and_included(live: LiveApp) -> None:
    sid = _register(live)
    hot, route = _both_ways(live, sid)  # pending: not included, no head recorded yet
    assert hot == route
    assert hot[0] == 200 and dict(hot[1])["content-type"] == "application/json"
    assert dict(hot[1])["content-length"] == str(len(hot[2]))
    _include(live, sid, block=8, head=10)
    hot, route = _both_ways(live, sid)  # included, 3 deep
    assert hot == route
    assert b'"confirmations":3' in hot[2] and b'"head_number":10' in hot[2]
    _include(live, sid, block=8, head=11)  # the head moved: the hot read shows it at once
    hot, route = _both_ways(live, sid)
    assert hot == route and b'"confirmations":4' in hot[2]


def test_what_the_hot_read_declines_is_the_routes_answer(tmp_path: Path) -> None:
    with _live(tmp_path, tokens=True) as live:
        sid = _register(live)
        held = _register(live, dependent_state={"order": "ö-1"})
        url = f"/v1/settlements/{sid}"
        before = _answered(live)
        checks = [
            (live.http.get(url, headers={"Authorization": ""}), 401),
            (live.http.get(url, headers={"Authorization": "Bearer nope"}), 401),
            (live.http.get(url, headers={"Authorization": f"Basic {READER}"}), 401),
            (live.http.get(url, headers={"Authorization": f"Bearer {REGISTRAR}"}), 403),
            (live.http.get(url, headers={"Authorization": f"Bearer {OTHER}"}), 404),
            (live.http.get("/v1/settlements/stl_" + "0" * 24), 404),
            (live.http.get(url, headers={"Host": "evil.example"}), 421),
            (live.http.get(url + "/"), 307),  # the framework redirects a trailing slash
            (live.http.head(url), 405),
            (live.http.get(f"/v1/settlements/{held}"), 200),  # dependent state: its binding
        ]
        assert [a.status_code for a, _ in checks] == [status for _, status in checks]
        assert _answered(live) == before, "the hot layer answered what it must leave alone"
        unauthenticated = checks[0][0]
        assert unauthenticated.headers["WWW-Authenticate"] == 'Bearer realm="finality"'
        assert "'read'" in checks[3][0].json()["error"]
        view = checks[-1][0].json()
        assert view["dependent_state"] == {"order": "ö-1"} and view["binding"] is not None


def test_the_hot_read_runs_no_sqlalchemy_statement(live: LiveApp) -> None:
    sid = _register(live)
    _include(live, sid, block=3, head=4)
    live.http.get(f"/v1/settlements/{sid}")  # the first read opens the plain connection
    with Statements(live.service.store) as seen:
        view = live.http.get(f"/v1/settlements/{sid}").json()
    assert (view["confirmations"], seen.selects, seen.loop) == (2, [], 1)
