"""Step writes: the routes answer a write, a refusal (naming why, nothing changed) and a
request refused before the write; the group writer (watcher/workflows/writer.py) commits
concurrent writes together without letting one write's refusal or failure touch another's.

Real parts: the daemon's service and API under uvicorn on loopback (tests/support/
sources_app.py), tokens configured, its SQLite store.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.rigs import FakeClock
from tests.support.sources_app import LiveApp, source_config_file, token_tables
from watcher.store.workflows_store import WorkflowGroup
from watcher.workflows.steps import WorkflowRefused
from watcher.workflows.writer import Answer, GroupWriter

AGENT = "wf-agent-" + secrets.token_hex(16)
"""read + register."""
READER = "wf-reader-" + secrets.token_hex(16)
"""read only."""
TOKENS = token_tables(AGENT, READER, registrar_name="agent")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveApp]:
    path = source_config_file(tmp_path_factory.mktemp("wf-writes"), [])
    path.write_text(path.read_text() + TOKENS)
    with LiveApp(path, clock=FakeClock()) as app:  # views say the time: hold it still
        app.http.headers["Authorization"] = f"Bearer {AGENT}"
        yield app


def _create(live: LiveApp) -> str:
    body = {"steps": ["charge", "ship"], "holder": "agent-a", "lease_s": 30}
    answer = live.http.post("/v1/workflows", json=body)
    assert answer.status_code == 201, answer.text
    wid: str = answer.json()["workflow_id"]
    return wid


def _post(live: LiveApp, path: str, body: Any, **kw: Any) -> httpx.Response:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **kw.pop("headers", {})}
    return live.http.post(path, content=raw, headers=headers)


def test_a_begun_then_completed_step_is_stored_with_its_side_effects(live: LiveApp) -> None:
    wid = _create(live)
    begin = {"fencing_token": 1, "operation": "charge card", "recovery": {"idempotency_key": "k"}}
    complete = {"fencing_token": 1, "side_effects": {"charge_id": "ch_1"}}
    for move, body in (("begin", begin), ("complete", complete)):
        answer = _post(live, f"/v1/workflows/{wid}/steps/charge/{move}", body)
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] == "application/json"
    stored = live.http.get(f"/v1/workflows/{wid}").json()
    assert stored["steps"][0]["state"] == "completed"
    assert stored["steps"][0]["side_effects"] == {"charge_id": "ch_1"}


def test_a_refused_write_names_why_and_changes_nothing(live: LiveApp) -> None:
    wid = _create(live)
    begun = _post(live, f"/v1/workflows/{wid}/steps/charge/begin", {**_op(), "fencing_token": 1})
    assert begun.status_code == 200, begun.text
    before = live.http.get(f"/v1/workflows/{wid}").content
    cases = [
        (f"/v1/workflows/{wid}/steps/charge/begin", {**_op(), "fencing_token": 7}, 409),  # stale
        (f"/v1/workflows/{wid}/steps/charge/begin", {**_op(), "fencing_token": 1}, 409),  # twice
        (f"/v1/workflows/{wid}/steps/ship/complete", {"fencing_token": 1}, 409),  # never begun
        (f"/v1/workflows/{wid}/steps/refund/begin", {**_op(), "fencing_token": 1}, 404),
        ("/v1/workflows/wf_nope/steps/charge/begin", {**_op(), "fencing_token": 1}, 404),
    ]
    for path, body, status in cases:
        answer = _post(live, path, body)
        assert answer.status_code == status, (path, body, answer.text)
        assert answer.json()["error"], answer.text
    assert live.http.get(f"/v1/workflows/{wid}").content == before


def test_what_the_route_refuses_before_the_write_reaches_nothing_stored(live: LiveApp) -> None:
    wid = _create(live)
    path = f"/v1/workflows/{wid}/steps/charge/begin"
    good = {**_op(), "fencing_token": 1}
    cases: list[tuple[Any, dict[str, str], int]] = [
        ({**good, "fencing_token": "1"}, {}, 422),  # strict: a string is not a token
        ({**good, "colour": "red"}, {}, 422),  # an unknown key
        ({"fencing_token": 1}, {}, 422),  # no operation
        (b"{not json", {}, 422),
        (good, {"Authorization": "Bearer nobody"}, 401),
        (good, {"Authorization": f"Bearer {READER}"}, 403),  # read only
        ({**good, "recovery": {"idempotency_key": "k", "settlement_id": "s"}}, {}, 422),
    ]
    for body, headers, status in cases:
        answer = _post(live, path, body, headers=headers)
        assert answer.status_code == status, answer.text
    big = {"fencing_token": 1, "side_effects": {"blob": "x" * 100_000}}
    answer = _post(live, f"/v1/workflows/{wid}/steps/charge/complete", big)
    assert answer.status_code == 413, answer.text
    steps = live.http.get(f"/v1/workflows/{wid}").json()["steps"]
    assert [s["state"] for s in steps] == ["pending", "pending"]


def _op() -> dict[str, Any]:
    return {"operation": "charge card"}


def _blocking(started: threading.Event, release: threading.Event) -> Any:
    """A write that holds the writer until released (so the writes queued meanwhile are
    committed together, as concurrent requests are)."""

    def write(_group: WorkflowGroup) -> Answer:
        started.set()
        assert release.wait(10)
        return dict

    return write


def _grouped(writer: GroupWriter, writes: list[tuple[str, Any]]) -> list[Any]:
    """Run ``writes`` queued together behind a blocked writer; each one's answer or error."""

    async def main() -> list[Any]:
        started, release = threading.Event(), threading.Event()
        blocker = asyncio.ensure_future(writer.run_async("wf_", _blocking(started, release)))
        assert await asyncio.to_thread(started.wait, 10)
        tasks = [asyncio.ensure_future(writer.run_async(w, write)) for w, write in writes]
        await asyncio.sleep(0)  # every task has queued its write
        release.set()
        await blocker
        answers: list[Any] = list(await asyncio.gather(*tasks, return_exceptions=True))
        return answers

    return asyncio.run(main())


def test_concurrent_writes_commit_together_and_a_refusal_fails_none_of_the_others(
    live: LiveApp,
) -> None:
    flows = live.service.workflows
    writer = flows.steps.writer
    a, b = _create(live), _create(live)
    owner = "agent"
    groups = writer.groups
    answers = _grouped(
        writer,
        [
            (a, flows.steps.begin_write(owner, a, "charge", 1, "charge", None)),
            (b, flows.steps.begin_write(owner, b, "charge", 1, "charge", None)),
            (a, flows.steps.begin_write(owner, a, "ship", 2, "ship", None)),  # stale token
            (a, flows.steps.complete_write(owner, a, "charge", 1, {"id": 1})),  # after begin
        ],
    )
    assert writer.groups == groups + 2  # the blocker's, then the four in one transaction
    assert answers[0]["steps"][0]["state"] == "in_flight"
    assert answers[1]["steps"][0]["state"] == "in_flight"
    assert isinstance(answers[2], WorkflowRefused)
    assert answers[2].status == 409 and answers[2].message == "fencing_token: stale (current 1)"
    assert answers[3]["steps"][0]["state"] == "completed"
    stored_a = live.http.get(f"/v1/workflows/{a}").json()["steps"]
    stored_b = live.http.get(f"/v1/workflows/{b}").json()["steps"]
    assert [s["state"] for s in stored_a] == ["completed", "pending"]
    assert [s["state"] for s in stored_b] == ["in_flight", "pending"]


def test_a_group_whose_transaction_fails_answers_every_write_alone(live: LiveApp) -> None:
    flows = live.service.workflows
    writer = flows.steps.writer
    a, b = _create(live), _create(live)

    def broken(group: WorkflowGroup) -> Answer:
        group.locked(a, "agent", 0)
        raise RuntimeError("the write's own bug")

    answers = _grouped(
        writer,
        [
            (a, flows.steps.begin_write("agent", a, "charge", 1, "charge", None)),
            (a, broken),
            (b, flows.steps.begin_write("agent", b, "charge", 1, "charge", None)),
        ],
    )
    assert answers[0]["steps"][0]["state"] == "in_flight"
    assert isinstance(answers[1], RuntimeError)
    assert answers[2]["steps"][0]["state"] == "in_flight"
    for wid in (a, b):
        steps = live.http.get(f"/v1/workflows/{wid}").json()["steps"]
        assert steps[0]["state"] == "in_flight"  # stored, not rolled back with the failure


def test_a_write_waited_for_from_a_thread_is_answered_after_its_commit(live: LiveApp) -> None:
    flows = live.service.workflows
    wid = _create(live)
    view = flows.steps.begin("agent", wid, "charge", 1, "charge", {"idempotency_key": "k"})
    assert view["steps"][0]["state"] == "in_flight"
    with pytest.raises(WorkflowRefused) as refused:
        flows.steps.begin("agent", wid, "charge", 1, "charge", None)
    assert refused.value.status == 409
    stored = live.service.store.workflows().get(wid, "agent")
    assert stored is not None and stored.steps[0]["state"] == "in_flight"


def test_writes_queued_together_on_either_store_apply_in_order_per_workflow(
    store_url: str, tmp_path: Path
) -> None:
    """Every workflow's begin and complete queued at once (an agent that pipelines them):
    each workflow's complete applies after its begin, whichever lane or group carries them
    (PostgreSQL commits several groups side by side)."""
    path = source_config_file(tmp_path, [])
    path.write_text(path.read_text().replace(f"sqlite:///{tmp_path}/finality.db", store_url))
    with LiveApp(path, clock=FakeClock()) as app:
        steps = app.service.workflows.steps
        wids = [_create(app) for _ in range(8)]

        async def main() -> list[Any]:
            tasks = []
            for wid in wids:
                begin = steps.begin_write("anonymous", wid, "charge", 1, "charge", None)
                done = steps.complete_write("anonymous", wid, "charge", 1, {"wid": wid})
                tasks.append(asyncio.ensure_future(steps.writer.run_async(wid, begin)))
                tasks.append(asyncio.ensure_future(steps.writer.run_async(wid, done)))
            return list(await asyncio.gather(*tasks, return_exceptions=True))

        answers = asyncio.run(main())
        assert all(isinstance(a, dict) for a in answers), answers
        for wid in wids:
            stored = app.http.get(f"/v1/workflows/{wid}").json()["steps"][0]
            assert (stored["state"], stored["side_effects"]) == ("completed", {"wid": wid})


def test_a_step_write_refuses_bad_input_as_an_ordinary_route_does(live: LiveApp) -> None:
    # The step writes have their own ASGI app (watcher/api/json_write.py); the lease route
    # is FastAPI's ordinary handler over a body with the same ``fencing_token`` field. The
    # same bad input must get the same refusal, byte for byte, and change nothing.
    wid = _create(live)
    complete = f"/v1/workflows/{wid}/steps/charge/complete"
    lease = f"/v1/workflows/{wid}/lease"
    json_type = {"Content-Type": "application/json"}
    cases: list[tuple[bytes, dict[str, str]]] = [
        (b'{"fencing_token": "1"}', json_type),  # strict: a string is not a token
        (b'{"fencing_token": 0}', json_type),  # below its bound
        (b'{"fencing_token": 1, "colour": "red"}', json_type),  # an unknown key
        (b"{}", json_type),  # no token
        (b"[]", json_type),  # not an object
        (b"{not json", json_type),
        (b'{"fencing_token": 1', json_type),  # cut short
        (b"", json_type),  # no body at all
        (b'{"fencing_token": "x"}', {"Content-Type": "text/plain"}),
        (b"{not json", {**json_type, "Authorization": f"Bearer {READER}"}),  # 422 before 403
        (b"{not json", {**json_type, "Authorization": "Bearer nobody"}),  # 401 first
        (b'{"fencing_token": "1"}', {**json_type, "Authorization": f"Bearer {READER}"}),
    ]
    for raw, headers in cases:
        mine = live.http.post(complete, content=raw, headers=headers)
        ordinary = live.http.post(lease, content=raw, headers=headers)
        assert mine.status_code == ordinary.status_code, (raw, mine.text, ordinary.text)
        assert mine.status_code in (401, 403, 415, 422), (raw, mine.text)
        assert mine.content == ordinary.content, (raw, mine.text, ordinary.text)
        assert mine.headers.get("content-type") == ordinary.headers.get("content-type")
    named = live.http.post(complete, content=b'{"fencing_token": "1"}', headers=json_type)
    assert named.json()["fields"] == ["fencing_token"], named.text
    steps = live.http.get(f"/v1/workflows/{wid}").json()["steps"]
    assert [s["state"] for s in steps] == ["pending", "pending"]


def test_a_path_parameter_out_of_bounds_is_refused_naming_it(live: LiveApp) -> None:
    wid = _create(live)
    body = {**_op(), "fencing_token": 1}
    answer = _post(live, f"/v1/workflows/{wid}/steps/{'s' * 65}/begin", body)
    assert answer.status_code == 422 and answer.json()["fields"] == ["step"], answer.text
    answer = _post(live, f"/v1/workflows/{'w' * 65}/steps/charge/begin", body)
    assert answer.status_code == 422 and answer.json()["fields"] == ["workflow_id"], answer.text


def test_the_step_writes_are_documented_once_with_their_bodies(live: LiveApp) -> None:
    paths = live.http.get("/openapi.json").json()["paths"]
    for action, model in (("begin", "StepBegin"), ("complete", "StepComplete")):
        operation = paths[f"/v1/workflows/{{workflow_id}}/steps/{{step}}/{action}"]["post"]
        schema = operation["requestBody"]["content"]["application/json"]["schema"]
        assert schema == {"$ref": f"#/components/schemas/{model}"}, schema
        assert {"401", "403", "404", "409", "422"} <= set(operation["responses"]), operation
