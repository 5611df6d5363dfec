"""``GET /v1/settlements/{id}`` (watcher/api/settlement_read.py): one path answers every
request, the plain view and the one with more to read alike; its view is the one the
registration answered, at the head recorded with the row; its errors are the framework's
(401, 403, 404, 421, a trailing slash's redirect, ``HEAD``'s 405); and it reads the row
and its head in one statement of the store's raw read, no SQLAlchemy statement.

Real parts: the daemon's service and API under uvicorn on loopback (tests/support/
sources_app.py), tokens configured or not, its SQLite store. A query string the route
ignores (``?via=query``) is answered the same.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

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


def _registered(live: LiveApp, **extra: Any) -> dict[str, Any]:
    """The view the registration answered."""
    body = {"chain": CHAIN, "tx_hash": "0x" + secrets.token_hex(32), **extra}
    answer = live.http.post("/v1/settlements", json=body)
    assert answer.status_code == 201, answer.text
    view: dict[str, Any] = answer.json()
    return view


def _register(live: LiveApp, **extra: Any) -> str:
    sid: str = _registered(live, **extra)["settlement_id"]
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
    """The settlement read as callers poll it, and with a query string the route ignores."""
    plain = live.http.get(f"/v1/settlements/{sid}")
    queried = live.http.get(f"/v1/settlements/{sid}", params={"via": "query"})
    return _shown(plain), _shown(queried)


def test_a_read_answers_the_registered_view_pending_and_included(live: LiveApp) -> None:
    registered = _registered(live)
    sid = registered["settlement_id"]
    plain, queried = _both_ways(live, sid)  # pending: not included, no head recorded yet
    assert plain == queried
    assert plain[0] == 200 and dict(plain[1])["content-type"] == "application/json"
    assert dict(plain[1])["content-length"] == str(len(plain[2]))
    assert httpx.Response(200, content=plain[2]).json() == registered
    _include(live, sid, block=8, head=10)
    plain, queried = _both_ways(live, sid)  # included, 3 deep
    assert plain == queried
    assert b'"confirmations":3' in plain[2] and b'"head_number":10' in plain[2]
    _include(live, sid, block=8, head=11)  # the head moved: the read shows it at once
    plain, queried = _both_ways(live, sid)
    assert plain == queried and b'"confirmations":4' in plain[2]


def test_the_reads_errors_and_fuller_views_are_the_frameworks(tmp_path: Path) -> None:
    with _live(tmp_path, tokens=True) as live:
        sid = _register(live)
        held = _register(live, dependent_state={"order": "ö-1"})
        url = f"/v1/settlements/{sid}"
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
        unauthenticated = checks[0][0]
        assert unauthenticated.headers["WWW-Authenticate"] == 'Bearer realm="finality"'
        assert "'read'" in checks[3][0].json()["error"]
        view = checks[-1][0].json()
        assert view["dependent_state"] == {"order": "ö-1"} and view["binding"] is not None


def test_a_read_runs_one_raw_statement_and_no_sqlalchemy_one(live: LiveApp) -> None:
    sid = _register(live)
    _include(live, sid, block=3, head=4)
    live.http.get(f"/v1/settlements/{sid}")  # the first read opens the raw connection
    with Statements(live.service.store) as seen:
        view = live.http.get(f"/v1/settlements/{sid}").json()
    assert (view["confirmations"], seen.selects, seen.fast) == (2, [], 1)
