"""``/v1/workflows`` over real HTTP against the real daemon's parts (SQLite), with time injected.

Each verdict of the handoff guard reached through the API; fencing (a stale or released token
changes nothing); bad input answered 4xx naming the field with nothing stored changed; the
four receipts verified offline (the client's ``verify_workflow`` and ``finality verify
--workflow``), tampering refused with the reason, and one workflow's receipt never accepted
as another's; the events on ``/v1/events``; the lapse noticed with nobody asking.
"""

from __future__ import annotations

import copy
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import run_cli, wait_for
from tests.support.sources_app import LiveApp, source_config_file
from watcher.client import verify_workflow

START = 1_700_000_000_000


class Clock:
    """The daemon's clock (ms), moved by the tests, never slept on."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1000)


@pytest.fixture(scope="module")
def clock() -> Clock:
    return Clock()


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, clock: Clock) -> Iterator[LiveApp]:
    tmp = tmp_path_factory.mktemp("workflows")
    with LiveApp(source_config_file(tmp, []), clock=clock) as live:
        yield live


def create(app: LiveApp, **fields: Any) -> dict[str, Any]:
    body = {"steps": ["charge", "ship", "notify"], "holder": "agent-a", "lease_s": 30, **fields}
    r = app.http.post("/v1/workflows", json=body)
    assert r.status_code == 201, r.text
    return dict(r.json())


def post(app: LiveApp, path: str, body: Any) -> tuple[int, dict[str, Any]]:
    r = app.http.post(path, json=body)
    return r.status_code, dict(r.json())


def stored(app: LiveApp, wid: str) -> tuple[dict[str, Any], int]:
    """What a refusal must leave as it was: the stored workflow and the event count."""
    view = app.http.get(f"/v1/workflows/{wid}").json()
    view.pop("lease_state")
    return view, len(app.http.get("/v1/events", params={"limit": 1000}).json())


def begin(app: LiveApp, wid: str, step: str, token: int, **body: Any) -> dict[str, Any]:
    status, answer = post(
        app,
        f"/v1/workflows/{wid}/steps/{step}/begin",
        {"fencing_token": token, "operation": f"do {step}", **body},
    )
    assert status == 200, answer
    return answer


def complete(app: LiveApp, wid: str, step: str, token: int, **body: Any) -> dict[str, Any]:
    status, answer = post(
        app, f"/v1/workflows/{wid}/steps/{step}/complete", {"fencing_token": token, **body}
    )
    assert status == 200, answer
    return answer


def take_over(app: LiveApp, wid: str, holder: str = "agent-b") -> tuple[int, dict[str, Any]]:
    return post(app, f"/v1/workflows/{wid}/takeover", {"holder": holder, "lease_s": 30})


def expire(app: LiveApp, clock: Clock, wid: str) -> None:
    view = app.http.get(f"/v1/workflows/{wid}").json()
    clock.now = max(clock.now, view["lease_expires_at"]) + 1


# -- verdicts ---------------------------------------------------------------------------------


def test_creation_is_idempotent_on_reference_and_a_different_request_under_it_conflicts(
    app: LiveApp,
) -> None:
    first = create(app, reference="order-812", idempotent_steps=["notify"])
    assert first["fencing_token"] == 1 and first["lock"]["holder"] == "agent-a"
    assert [s["state"] for s in first["steps"]] == ["pending"] * 3
    assert first["verdict"] == "NO_TRANSACTION"
    again = app.http.post(
        "/v1/workflows",
        json={
            "steps": ["charge", "ship", "notify"],
            "holder": "agent-a",
            "lease_s": 30,
            "idempotent_steps": ["notify"],
            "reference": "order-812",
        },
    )
    assert again.status_code == 200 and again.json()["workflow_id"] == first["workflow_id"]
    before = stored(app, first["workflow_id"])
    for change, field in (
        ({"steps": ["charge", "notify"]}, "steps"),
        ({"holder": "agent-z"}, "holder"),
        ({"idempotent_steps": []}, "idempotent_steps"),
    ):
        body = {
            "steps": ["charge", "ship", "notify"],
            "holder": "agent-a",
            "lease_s": 30,
            "idempotent_steps": ["notify"],
            "reference": "order-812",
            **change,
        }
        r = app.http.post("/v1/workflows", json=body)
        assert r.status_code == 409, r.text
        assert r.json()["fields"] == ["reference", field]
    assert stored(app, first["workflow_id"]) == before
    listed = app.http.get("/v1/workflows").json()["items"]
    assert [w["workflow_id"] for w in listed].count(first["workflow_id"]) == 1


def test_a_live_lease_refuses_a_takeover_with_lock_not_held_and_changes_nothing(
    app: LiveApp,
) -> None:
    wf = create(app)
    wid = wf["workflow_id"]
    begin(app, wid, "charge", 1)
    before = stored(app, wid)
    status, answer = take_over(app, wid)
    assert status == 409
    assert answer["verdict"] == "LOCK_NOT_HELD"
    assert answer["holder"] == "agent-a"
    assert answer["lease_expires_at"] == wf["lease_expires_at"]
    assert "agent-a" in answer["error"] and str(wf["lease_expires_at"]) in answer["error"]
    assert stored(app, wid) == before


def test_nothing_begun_or_everything_completed_hands_off_as_no_transaction(
    app: LiveApp, clock: Clock
) -> None:
    fresh = create(app)["workflow_id"]
    expire(app, clock, fresh)
    status, answer = take_over(app, fresh)
    assert (status, answer["verdict"], answer["fencing_token"]) == (200, "NO_TRANSACTION", 2)
    assert answer["recovery"] == []

    done = create(app, steps=["charge"])["workflow_id"]
    begin(app, done, "charge", 1)
    complete(app, done, "charge", 1, side_effects={"charge_id": "ch_1"})
    post(app, f"/v1/workflows/{done}/release", {"fencing_token": 1})
    status, answer = take_over(app, done)  # released: no need to wait for the lease
    assert (status, answer["verdict"]) == (200, "NO_TRANSACTION")
    assert answer["workflow"]["steps"][0]["side_effects"] == {"charge_id": "ch_1"}


def test_an_in_flight_step_with_an_idempotency_key_on_an_idempotent_step_is_handoff_safe(
    app: LiveApp, clock: Clock
) -> None:
    wid = create(app, idempotent_steps=["notify"])["workflow_id"]
    begin(app, wid, "charge", 1, recovery={"idempotency_key": "k-1"})  # not idempotent
    complete(app, wid, "charge", 1)
    begin(app, wid, "notify", 1, recovery={"idempotency_key": "n-1"})
    expire(app, clock, wid)
    status, answer = take_over(app, wid)
    assert status == 200 and answer["verdict"] == "HANDOFF_SAFE", answer
    assert answer["recovery"] == [
        {
            "step": "notify",
            "operation": "do notify",
            "recovery": {"idempotency_key": "n-1"},
            "state": "pending",
            "evidence": answer["recovery"][0]["evidence"],
        }
    ]
    assert answer["recovery"][0]["evidence"]["idempotency_key"] == "n-1"
    assert answer["workflow"]["holder"] == "agent-b" and answer["fencing_token"] == 2


def test_an_in_flight_step_nothing_can_check_is_in_flight_untracked(
    app: LiveApp, clock: Clock
) -> None:
    wid = create(app, idempotent_steps=["notify"])["workflow_id"]
    # An idempotency key does not make a step that is not idempotent safe to re-run.
    begin(app, wid, "charge", 1, recovery={"idempotency_key": "k-2"})
    expire(app, clock, wid)
    status, answer = take_over(app, wid)
    assert status == 200 and answer["verdict"] == "IN_FLIGHT_UNTRACKED", answer
    assert "do not retry charge blindly" in answer["directive"]
    assert [(r["step"], r["state"]) for r in answer["recovery"]] == [("charge", "unknown")]
    registry = answer["receipts"]["in_flight_operation_registry_receipt"]["element"]
    assert [(o["id"], o["tracked"]) for o in registry["operations"]] == [("charge", False)]


def test_untracked_but_all_idempotent_work_is_handoff_safe_by_the_exception(
    app: LiveApp, clock: Clock
) -> None:
    wid = create(app, steps=["sync", "notify"], idempotent_steps=["sync", "notify"])["workflow_id"]
    begin(app, wid, "sync", 1)  # no recovery: nothing can check it, but it is idempotent
    expire(app, clock, wid)
    status, answer = take_over(app, wid)
    assert status == 200, answer
    assert (answer["verdict"], answer["exception_applied"]) == ("HANDOFF_SAFE", True)
    assert [(r["step"], r["state"]) for r in answer["recovery"]] == [("sync", "pending")]


def test_steps_that_no_longer_match_their_checkpoint_are_checkpoint_missing(
    app: LiveApp, clock: Clock
) -> None:
    wid = create(app)["workflow_id"]
    begin(app, wid, "charge", 1, recovery={"idempotency_key": "k-3"})
    complete(app, wid, "charge", 1, side_effects={"charge_id": "ch_3"})
    begin(app, wid, "ship", 1)
    # The row restored from a backup of an earlier moment: charge back in flight.
    steps = app.http.get(f"/v1/workflows/{wid}").json()["steps"]
    steps[0]["state"], steps[0]["side_effects"] = "in_flight", None
    db = sqlite3.connect(app.config.store.url.removeprefix("sqlite:///"))
    with db:
        db.execute("UPDATE workflows SET steps = ? WHERE workflow_id = ?", (json.dumps(steps), wid))
    db.close()
    expire(app, clock, wid)
    status, answer = take_over(app, wid)
    assert status == 200 and answer["verdict"] == "CHECKPOINT_MISSING", answer
    assert "do not match the checkpoint" in answer["directive"]


# -- fencing and bad input --------------------------------------------------------------------


def test_a_predecessor_woken_after_a_takeover_can_never_write_again(
    app: LiveApp, clock: Clock
) -> None:
    wid = create(app)["workflow_id"]
    begin(app, wid, "charge", 1, recovery={"idempotency_key": "k-4"})
    expire(app, clock, wid)
    assert take_over(app, wid)[0] == 200
    before = stored(app, wid)
    for path, body in (
        (f"/v1/workflows/{wid}/steps/ship/begin", {"fencing_token": 1, "operation": "ship"}),
        (f"/v1/workflows/{wid}/steps/charge/complete", {"fencing_token": 1}),
        (f"/v1/workflows/{wid}/lease", {"fencing_token": 1}),
        (f"/v1/workflows/{wid}/release", {"fencing_token": 1}),
        (f"/v1/workflows/{wid}/lease", {"fencing_token": 3}),  # a token from the future
    ):
        status, answer = post(app, path, body)
        assert status == 409, (path, answer)
        assert answer["error"] == "fencing_token: stale (current 2)"
        assert answer["fields"] == ["fencing_token"]
    assert stored(app, wid) == before
    # The successor renews and releases; then even its own token writes no more.
    assert post(app, f"/v1/workflows/{wid}/lease", {"fencing_token": 2})[0] == 200
    assert post(app, f"/v1/workflows/{wid}/release", {"fencing_token": 2})[0] == 200
    status, answer = post(app, f"/v1/workflows/{wid}/steps/charge/complete", {"fencing_token": 2})
    assert status == 409 and answer["fields"] == ["fencing_token"]


@pytest.mark.parametrize(
    ("path", "body", "status", "field"),
    [
        ("steps/nope/begin", {"fencing_token": 1, "operation": "x"}, 404, "step"),
        ("steps/charge/begin", {"fencing_token": 1, "operation": "again"}, 409, "step"),
        ("steps/ship/complete", {"fencing_token": 1}, 409, "step"),
        ("steps/charge/begin", {"operation": "x"}, 422, "fencing_token"),
        ("steps/ship/begin", {"fencing_token": "1", "operation": "x"}, 422, "fencing_token"),
        ("steps/ship/begin", {"fencing_token": 1}, 422, "operation"),
        ("steps/ship/begin", {"fencing_token": 1, "operation": "x", "retry": 1}, 422, "retry"),
        (
            "steps/ship/begin",
            {"fencing_token": 1, "operation": "x", "recovery": {}},
            422,
            "recovery",
        ),
        (
            "steps/ship/begin",
            {"fencing_token": 1, "operation": "x", "recovery": {"settlement_id": "stl_nope"}},
            422,
            "recovery.settlement_id",
        ),
        ("steps/charge/complete", {"fencing_token": 1, "side_effects": []}, 422, "side_effects"),
        (
            "steps/charge/complete",
            {"fencing_token": 1, "side_effects": {"amount": 1.5}},
            422,
            "side_effects",
        ),
        ("takeover", {"holder": "", "lease_s": 30}, 422, "holder"),
        ("takeover", {"holder": "b", "lease_s": 0}, 422, "lease_s"),
        ("lease", [], 422, "body"),
    ],
)
def test_bad_requests_name_the_field_and_change_nothing(
    app: LiveApp, path: str, body: Any, status: int, field: str
) -> None:
    wid = create(app)["workflow_id"]
    begin(app, wid, "charge", 1)
    before = stored(app, wid)
    got, answer = post(app, f"/v1/workflows/{wid}/{path}", body)
    assert got == status, answer
    assert answer["fields"][0] == field, answer
    assert answer["error"].startswith(field) or field == "body", answer
    assert stored(app, wid) == before


def test_side_effects_are_bounded_like_dependent_state(app: LiveApp) -> None:
    wid = create(app)["workflow_id"]
    begin(app, wid, "charge", 1)
    limit = app.config.delivery.max_dependent_state_bytes
    status, answer = post(
        app,
        f"/v1/workflows/{wid}/steps/charge/complete",
        {"fencing_token": 1, "side_effects": {"blob": "x" * limit}},
    )
    assert status == 413 and answer["error"].startswith("side_effects:")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"steps": [], "holder": "a", "lease_s": 30}, "steps"),
        ({"steps": ["a", "a"], "holder": "a", "lease_s": 30}, "steps"),
        ({"steps": ["a b"], "holder": "a", "lease_s": 30}, "steps"),
        (
            {"steps": ["a"], "holder": "a", "lease_s": 30, "idempotent_steps": ["b"]},
            "idempotent_steps",
        ),
        ({"steps": ["a"], "lease_s": 30}, "holder"),
        ({"steps": ["a"], "holder": "a", "lease_s": -1}, "lease_s"),
    ],
)
def test_bad_creations_name_the_field_and_store_nothing(
    app: LiveApp, body: dict[str, Any], field: str
) -> None:
    count = len(app.http.get("/v1/workflows", params={"limit": 1000}).json()["items"])
    r = app.http.post("/v1/workflows", json=body)
    assert r.status_code == 422 and r.json()["fields"][0].startswith(field), r.text
    assert len(app.http.get("/v1/workflows", params={"limit": 1000}).json()["items"]) == count


def test_an_unknown_workflow_is_a_404_naming_it(app: LiveApp) -> None:
    r = app.http.get("/v1/workflows/wf_nope")
    assert r.status_code == 404 and r.json()["fields"] == ["workflow_id"]
    status, answer = take_over(app, "wf_nope")
    assert status == 404 and answer["fields"] == ["workflow_id"]


# -- receipts ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def handed(app: LiveApp, clock: Clock) -> dict[str, Any]:
    """A takeover of a workflow with one completed step and one in flight."""
    wid = create(app, idempotent_steps=["notify"], reference="order-r")["workflow_id"]
    begin(app, wid, "charge", 1, recovery={"idempotency_key": "k-r"})
    complete(app, wid, "charge", 1, side_effects={"charge_id": "ch_r"})
    begin(app, wid, "notify", 1, recovery={"idempotency_key": "n-r"})
    expire(app, clock, wid)
    status, answer = take_over(app, wid)
    assert status == 200
    return answer


def test_the_four_receipts_verify_offline_and_name_the_workflow_and_token(
    app: LiveApp, handed: dict[str, Any], tmp_path: Path
) -> None:
    wid = handed["workflow"]["workflow_id"]
    receipts = handed["receipts"]
    assert list(receipts) == [
        "transaction_state_checkpoint_receipt",
        "in_flight_operation_registry_receipt",
        "handoff_lock_signature",
        "transaction_recovery_predicate_receipt",
    ]
    assert handed["workflow"]["receipts"] == receipts  # GET shows the last lock change's
    for kind, receipt in receipts.items():
        checked = verify_workflow(receipt, wid)
        assert checked.valid, (kind, checked.reason)
        assert checked.receipt is not None and checked.receipt.handoff is not None
        assert checked.receipt.handoff["to_token"] == 2
        assert checked.receipt.handoff["name"] == f"workflow:{wid}"
        path = tmp_path / f"{kind}.json"
        path.write_text(json.dumps(receipt))
        done = run_cli("verify", str(path), "--workflow", wid)
        assert done.returncode == 0, done.stderr
    checkpoint = receipts["transaction_state_checkpoint_receipt"]["element"]
    assert [(s["name"], s["state"]) for s in checkpoint["steps"]] == [
        ("charge", "completed"),
        ("ship", "pending"),
        ("notify", "in_flight"),
    ]
    assert checkpoint["steps"][0]["side_effects"] == {"charge_id": "ch_r"}
    lock = receipts["handoff_lock_signature"]["element"]
    assert (lock["from_owner"], lock["from_token"], lock["to_owner"], lock["to_token"]) == (
        "agent-a",
        1,
        "agent-b",
        2,
    )


def test_a_receipt_of_one_workflow_never_verifies_as_another(
    app: LiveApp, handed: dict[str, Any], tmp_path: Path
) -> None:
    other = create(app)["workflow_id"]
    receipt = handed["receipts"]["handoff_lock_signature"]
    checked = verify_workflow(receipt, other)
    assert not checked.valid and checked.reason is not None
    assert other in checked.reason and "handoff.name" in checked.reason
    path = tmp_path / "lock.json"
    path.write_text(json.dumps(receipt))
    done = run_cli("verify", str(path), "--workflow", other)
    assert done.returncode == 1 and "handoff.name" in done.stderr


def _set(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


@pytest.mark.parametrize(
    ("kind", "path", "value", "reason"),
    [
        (
            "transaction_state_checkpoint_receipt",
            ("element", "steps", 1, "state"),
            "completed",
            "element_digest",
        ),
        (
            "transaction_state_checkpoint_receipt",
            ("element", "steps_digest"),
            "sha256:" + "0" * 64,
            "element",
        ),
        ("handoff_lock_signature", ("handoff", "to_token"), 3, "settlement_id"),
        ("handoff_lock_signature", ("element", "to_owner"), "agent-x", "element_digest"),
        ("in_flight_operation_registry_receipt", ("element", "operations"), [], "element_digest"),
        ("transaction_recovery_predicate_receipt", ("issued_at",), START, "issued_at"),
        ("transaction_recovery_predicate_receipt", ("handoff", "verdict"), "X", "handoff.verdict"),
        ("handoff_lock_signature", ("chain",), "workflow:wf_other", "chain"),
        ("handoff_lock_signature", ("signature",), "0x" + "11" * 65, "signature"),
    ],
)
def test_tampering_with_any_field_fails_with_the_reason(
    handed: dict[str, Any], kind: str, path: tuple[Any, ...], value: Any, reason: str
) -> None:
    receipt = copy.deepcopy(handed["receipts"][kind])
    _set(receipt, path, value)
    checked = verify_workflow(receipt, handed["workflow"]["workflow_id"])
    assert not checked.valid
    assert checked.reason is not None and checked.reason.startswith(reason), checked.reason


def test_a_body_reshaped_and_resigned_by_another_key_is_not_trusted(
    handed: dict[str, Any],
) -> None:
    receipt = handed["receipts"]["handoff_lock_signature"]
    checked = verify_workflow(
        receipt, handed["workflow"]["workflow_id"], signers=["0x" + "12" * 20]
    )
    assert not checked.valid and "not trusted" in str(checked.reason)


# -- events -----------------------------------------------------------------------------------


def test_every_change_is_an_event_and_a_lapse_is_noticed_with_nobody_asking(
    app: LiveApp, clock: Clock
) -> None:
    after = max([e["id"] for e in app.http.get("/v1/events", params={"limit": 1000}).json()] + [0])
    wid = create(app)["workflow_id"]
    begin(app, wid, "charge", 1, recovery={"idempotency_key": "k-e"})
    complete(app, wid, "charge", 1)
    app.start_components()  # the lapse thread, on the injected clock
    expire(app, clock, wid)

    def kinds() -> list[str]:
        events = app.http.get("/v1/events", params={"after": after, "limit": 1000}).json()
        return [e["kind"] for e in events if e["settlement_id"] == wid]

    wait_for(lambda: "workflow_lease_expired" in kinds(), timeout=30, what="the lapse event")
    assert take_over(app, wid)[0] == 200
    assert kinds() == [
        "workflow_step_begun",
        "workflow_step_completed",
        "workflow_lease_expired",  # once: the takeover saw it noted
        "workflow_taken_over",
    ]


# -- CLI --------------------------------------------------------------------------------------


def test_the_cli_lists_and_shows_workflows_and_refuses_a_bad_id(
    app: LiveApp, handed: dict[str, Any], tmp_path: Path
) -> None:
    wid = handed["workflow"]["workflow_id"]
    listed = run_cli("workflows", "--api", app.url, "--limit", "1000")
    assert listed.returncode == 0, listed.stderr
    line = next(x for x in listed.stdout.splitlines() if x.startswith(wid))
    assert line.startswith(f"{wid} (order-r)  agent-b token 2 (")  # held, or lapsed since
    assert line.endswith("1/3 completed, in flight: notify")
    shown = run_cli("workflow", wid, "--api", app.url, "--receipt", "handoff_lock_signature")
    assert shown.returncode == 0, shown.stderr
    path = tmp_path / "lock.json"
    path.write_text(shown.stdout)
    assert run_cli("verify", str(path), "--workflow", wid).returncode == 0
    detail = run_cli("workflow", wid, "--api", app.url)
    assert "notify           in_flight  do notify  -> recovery: pending" in detail.stdout
    for bad in ("../v1/chains", "wf_nope"):
        refused = run_cli("workflow", bad, "--api", app.url)
        assert refused.returncode == 64, refused
        assert len(refused.stderr.strip().splitlines()) == 1 and "workflow" in refused.stderr
