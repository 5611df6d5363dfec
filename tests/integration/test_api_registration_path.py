"""``POST /v1/settlements`` on its route's own ASGI app (watcher/api/json_write.py): every
answer is the one FastAPI's ordinary handler for the same route gives, byte for byte (the
refusals: bad JSON, a body that is not an object, no token, a token without ``register``,
which of 401/403/422 comes first, a field the request model refuses, an unknown chain, a
repeat with other terms; and the registration's own 201 and 200), refusals store nothing,
and the registration's answer is the view ``GET /v1/settlements/{id}`` then reads.

Real parts: the daemon's service and API under uvicorn on loopback (tests/support/
sources_app.py) with tokens, its SQLite store; beside it the same service's application with
the route answered by FastAPI's own handler (the one :class:`JsonWrite` hands refusals to),
driven in process.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.support.rigs import FakeClock
from tests.support.sources_app import LiveApp, source_config_file, token_tables
from watcher.api.json_write import JsonWrite
from watcher.api.server import create_app

REGISTRAR = "reg-" + secrets.token_hex(16)
READER = "read-" + secrets.token_hex(16)
TOKENS = token_tables(REGISTRAR, READER)


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveApp, TestClient]]:
    """The daemon's API (short path) and a twin whose route is FastAPI's ordinary handler."""
    tmp = tmp_path_factory.mktemp("registration-path")
    path = source_config_file(tmp, [])
    path.write_text(path.read_text() + TOKENS)
    with LiveApp(path, clock=FakeClock()) as live:  # held still: a view says its time
        live.service.store.ensure_chain("local", 31337, live.service.clock())
        twin = create_app(live.service)
        routes = [r for r in twin.router.routes if isinstance(r, JsonWrite)]
        create = next(r for r in routes if r.path == "/v1/settlements")
        create.app = create.framework  # every request through FastAPI's handler
        with TestClient(twin, base_url=live.url) as client:
            yield live, client


def _shown(answer: Any) -> tuple[int, list[tuple[str, str]], bytes]:
    """Status, headers (all but ``date`` and uvicorn's ``server``) and body bytes (of an
    httpx answer, or of the test client's, whose httpx is its own)."""
    headers = [(k, v) for k, v in answer.headers.items() if k not in ("date", "server")]
    return answer.status_code, headers, answer.content


def _both(
    apps: tuple[LiveApp, TestClient], raw: bytes, headers: dict[str, str]
) -> tuple[object, object]:
    live, twin = apps
    mine = live.http.post("/v1/settlements", content=raw, headers=headers)
    ordinary = twin.post("/v1/settlements", content=raw, headers=headers)
    return _shown(mine), _shown(ordinary)


def _stored(live: LiveApp) -> int:
    counts = live.service.store.verdict_counts()
    return sum(counts.values())


JSON = {"Content-Type": "application/json"}
AS_REGISTRAR = {**JSON, "Authorization": f"Bearer {REGISTRAR}"}
AS_READER = {**JSON, "Authorization": f"Bearer {READER}"}
TX = '"0x' + "ab" * 32 + '"'
REFUSALS: list[tuple[bytes, dict[str, str]]] = [
    (b"{not json", AS_REGISTRAR),
    (b'{"chain": "local"', AS_REGISTRAR),  # cut short
    (b"[]", AS_REGISTRAR),  # not an object
    (b'"text"', AS_REGISTRAR),
    (b"", AS_REGISTRAR),  # no body at all
    (b"{}", AS_REGISTRAR),  # neither chain nor tx hash
    (b'{"chain": "local", "tx_hash": "0x12"}', AS_REGISTRAR),  # not a hash
    (b'{"chain": "nope", "tx_hash": ' + TX.encode() + b"}", AS_REGISTRAR),  # unknown chain
    (b'{"chain": "local", "tx_hash": ' + TX.encode() + b', "colour": 1}', AS_REGISTRAR),
    (b'{"chain": "local", "tx_hash": ' + TX.encode() + b', "confirmations": 0}', AS_REGISTRAR),
    (b'{"kind": "evm_payment", "chain": "local"}', AS_REGISTRAR),  # a payment, incomplete
    (b'{"kind": "no-such-source", "ref": "x"}', AS_REGISTRAR),
    (b'{"chain": "local", "tx_hash": ' + TX.encode() + b"}", JSON),  # no token: 401
    (b'{"chain": "local", "tx_hash": ' + TX.encode() + b"}", AS_READER),  # no scope: 403
    (b"{not json", AS_READER),  # which comes first, 422 or 403: the framework's order
    (b"{not json", {**JSON, "Authorization": "Bearer nobody"}),
    (b'{"chain": "local"}', {"Content-Type": "text/plain", "Authorization": f"Bearer {REGISTRAR}"}),
]


@pytest.mark.parametrize(("raw", "headers"), REFUSALS)
def test_a_refusal_is_the_frameworks_and_stores_nothing(
    apps: tuple[LiveApp, TestClient], raw: bytes, headers: dict[str, str]
) -> None:
    before = _stored(apps[0])
    mine, ordinary = _both(apps, raw, headers)
    assert mine == ordinary
    assert mine[0] in (400, 401, 403, 409, 413, 415, 422), mine  # type: ignore[index]
    assert _stored(apps[0]) == before


def test_a_registration_answers_as_the_framework_and_as_get_reads_it(
    apps: tuple[LiveApp, TestClient],
) -> None:
    live, twin = apps
    tx = "0x" + secrets.token_hex(32)
    body = b'{"chain": "local", "tx_hash": "' + tx.encode() + b'", "confirmations": 2}'
    created = live.http.post("/v1/settlements", content=body, headers=AS_REGISTRAR)
    assert created.status_code == 201, created.text
    sid = created.json()["settlement_id"]
    read = live.http.get(f"/v1/settlements/{sid}", headers=AS_REGISTRAR)
    assert read.content == created.content  # the view GET reads, byte for byte
    assert created.headers["content-type"] == "application/json"
    # The repeat (200, the same settlement) and one with other terms (409): the same answers
    # through the short path and through FastAPI's handler, and nothing more stored.
    before = _stored(live)
    again = _both(apps, body, AS_REGISTRAR)
    assert again[0] == again[1] and again[0][0] == 200 and again[0][2] == created.content  # type: ignore[index]
    other = body.replace(b'"confirmations": 2', b'"confirmations": 5')
    conflict = _both(apps, other, AS_REGISTRAR)
    assert conflict[0] == conflict[1] and conflict[0][0] == 409, conflict  # type: ignore[index]
    assert _stored(live) == before
    fresh = twin.post(
        "/v1/settlements",
        json={"chain": "local", "tx_hash": "0x" + secrets.token_hex(32)},
        headers=AS_REGISTRAR,
    )
    assert fresh.status_code == 201 and set(fresh.json()) == set(created.json())
