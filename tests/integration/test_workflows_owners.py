"""A workflow belongs to the caller whose token created it: another caller cannot see it,
take it over or read its events, and a reference is the caller's own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.sources_app import LiveApp, source_config_file
from watcher.client import FinalityClient

TOKENS = {
    "alice": ("alice-token-0123456789abcdef", ["read", "register"]),
    "bob": ("bob-token-0123456789abcdef01", ["read", "register"]),
    "carol": ("carol-token-0123456789abcdef", ["read"]),
}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveApp]:
    tmp: Path = tmp_path_factory.mktemp("owners")
    path = source_config_file(tmp, [])
    path.write_text(
        path.read_text()
        + "".join(
            f'\n[[api.tokens]]\nname = "{name}"\ntoken = "{token}"\nscopes = {scopes!r}\n'.replace(
                "'", '"'
            )
            for name, (token, scopes) in TOKENS.items()
        )
    )
    with LiveApp(path) as live:
        yield live


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name][0]}"}


def test_another_callers_workflow_is_a_404_and_its_events_are_not_shown(app: LiveApp) -> None:
    body = {"steps": ["charge"], "holder": "agent-a", "lease_s": 30, "reference": "order-1"}
    mine = app.http.post("/v1/workflows", json=body, headers=auth("alice"))
    assert mine.status_code == 201
    wid = mine.json()["workflow_id"]
    begun = app.http.post(
        f"/v1/workflows/{wid}/steps/charge/begin",
        json={"fencing_token": 1, "operation": "charge"},
        headers=auth("alice"),
    )
    assert begun.status_code == 200

    assert app.http.get(f"/v1/workflows/{wid}", headers=auth("bob")).status_code == 404
    taken = app.http.post(
        f"/v1/workflows/{wid}/takeover", json={"holder": "b", "lease_s": 1}, headers=auth("bob")
    )
    assert taken.status_code == 404 and taken.json()["fields"] == ["workflow_id"]
    assert app.http.get("/v1/workflows", headers=auth("bob")).json()["items"] == []
    assert [
        e["settlement_id"] for e in app.http.get("/v1/events", headers=auth("bob")).json()
    ] == []
    seen = app.http.get("/v1/events", headers=auth("alice")).json()
    assert [(e["kind"], e["settlement_id"]) for e in seen] == [("workflow_step_begun", wid)]
    with FinalityClient(app.url, token=TOKENS["alice"][0]) as client:  # the SSE stream too
        stream = client.events(follow=True)
        streamed = next(stream)
        stream.close()  # type: ignore[attr-defined]  # a generator: ends its connection
    assert (streamed["kind"], streamed["settlement_id"]) == ("workflow_step_begun", wid)

    # The same reference is another caller's own workflow, not a conflict with alice's.
    theirs = app.http.post("/v1/workflows", json=body, headers=auth("bob"))
    assert theirs.status_code == 201 and theirs.json()["workflow_id"] != wid
    # Reading needs read, writing register.
    assert app.http.get(f"/v1/workflows/{wid}", headers=auth("alice")).status_code == 200
    refused = app.http.post("/v1/workflows", json=body, headers=auth("carol"))
    assert refused.status_code == 403
    assert app.http.post("/v1/workflows", json=body).status_code == 401
