"""Commits, discards, provisional updates and alerts from the daemon as a real process.

One anvil, one daemon, one loopback receiver for the module. The receiver verifies the
signature with the documented recipe and applies each Idempotency-Key once; assertions
count applied effects, not requests. Reorg tests first mine a few blocks so that earlier
tests' settlements lie below the replaced range.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import standardwebhooks

from guard.verify import verify_receipt
from tests.support.anvil import Anvil
from tests.support.daemon import Daemon, wait_for
from tests.support.receiver import Receiver

pytestmark = pytest.mark.anvil

SECRET = "whsec_" + base64.b64encode(b"e2e-secret-of-twenty-four").decode()
"""Standard Webhooks' form: what a receiver's ``standardwebhooks.Webhook(SECRET)`` takes."""
STATE_LIMIT = 2048
DELIVERY = {
    "max_attempts": 4,
    "backoff_initial_s": 0.2,
    "backoff_max_s": 0.5,
    "timeout_s": 2.0,
    "receipt_wait_s": 1.0,
    "max_dependent_state_bytes": STATE_LIMIT,
}


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with Receiver(SECRET) as r:
        yield r


@pytest.fixture(scope="module")
def daemon(
    module_anvil: Anvil, receiver: Receiver, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("delivery"), module_anvil.url, start=False)
    alerts: list[tuple[str, str, dict[str, Any]]] = [
        ("webhook", "/alerts", {}),
        ("slack", "/slack", {"events": ["reorg", "finality_violation"], "min_severity": "warning"}),
        ("log", "", {"min_severity": "critical"}),
    ]
    extra = receiver.daemon_config(SECRET, alerts, **DELIVERY)
    d.config_path.write_text(d.config_path.read_text() + extra)
    d.start()
    yield d
    d.close()


def effects_of(receiver: Receiver, sid: str, path: str | None = None) -> list[dict[str, Any]]:
    return [b for b in receiver.effects(path) if b.get("settlement_id") == sid]


def wait_effect(
    receiver: Receiver, sid: str, type_: str, path: str | None = None, timeout: float = 15
) -> dict[str, Any]:
    return wait_for(
        lambda: next((b for b in effects_of(receiver, sid, path) if b.get("type") == type_), None),
        timeout,
        what=f"{type_} for {sid}",
    )


def wait_alert(receiver: Receiver, kind: str, match: Any, timeout: float = 15) -> dict[str, Any]:
    return wait_for(
        lambda: next((a for a in receiver.alerts(kind) if match(a)), None),
        timeout,
        what=f"{kind} alert",
    )


def wait_seen(daemon: Daemon, sid: str) -> None:
    wait_for(lambda: daemon.settlement(sid)["block_number"] is not None, 10, what="inclusion")


def test_a_final_settlement_commits_its_state_once(
    daemon: Daemon, module_anvil: Anvil, receiver: Receiver
) -> None:
    tx = module_anvil.send()
    state = {"order": "A-1", "items": [1, 2, 3], "note": "ünïcode"}
    view = daemon.register(tx, dependent_state=state, commit_url=receiver.url("/commit"))
    sid = view["settlement_id"]
    module_anvil.mine(2)
    commit = wait_effect(receiver, sid, "commit")

    assert commit["verdict"] == "FINALITY_CONFIRMED" and commit["provisional"] is False
    assert commit["dependent_state"] == state
    assert commit["decision"]["verdict"] == "FINALITY_CONFIRMED"
    assert commit["tx_hash"] == tx
    # The receipts component signs after the verdict commits; the commit waited for it.
    assert commit["receipt"]["kind"] == "settlement_finality_receipt"
    assert commit["receipt"]["receipt"]["decision_digest"] == commit["decision"]["digest"]
    assert commit["binding"]["kind"] == "dependent_state_binding_receipt"
    assert commit["receipt_unavailable"] is None
    confirmed = wait_alert(receiver, "settlement_confirmed", lambda a: a["settlement_id"] == sid)
    assert confirmed["severity"] == "info"

    def commit_recorded() -> list[dict[str, Any]] | None:
        # The receiver applies the commit before the sender records the answer: wait for it.
        rows = daemon.get("/v1/deliveries", params={"settlement_id": sid}).json()
        done = any(r["channel"] == "commit" and r["state"] == "delivered" for r in rows)
        return rows if done else None

    rows = wait_for(commit_recorded, 10, what="the commit recorded as delivered")
    [row] = [r for r in rows if r["channel"] == "commit"]
    assert {r["channel"] for r in rows} == {"commit", "webhook"}  # and the alert
    assert (row["kind"], row["state"], row["idempotency_key"]) == (
        "commit",
        "delivered",
        f"fw:{sid}:commit",
    )
    full = daemon.get(f"/v1/deliveries/{row['id']}").json()
    assert full["body"] == commit
    time.sleep(0.5)
    assert len(effects_of(receiver, sid, "/commit")) == 1


def test_a_failed_settlement_discards_and_never_commits(
    daemon: Daemon, module_anvil: Anvil, receiver: Receiver
) -> None:
    tx = module_anvil.send_revert()
    module_anvil.receipt(tx)
    sid = daemon.register(tx, dependent_state={"x": 1}, commit_url=receiver.url("/commit"))[
        "settlement_id"
    ]
    module_anvil.mine(2)
    discard = wait_effect(receiver, sid, "discard")
    assert discard["verdict"] == "SETTLEMENT_FAILED"
    assert discard["receipt"]["kind"] == "settlement_failure_receipt"
    assert discard["receipt"]["receipt"]["decision_digest"] == discard["decision"]["digest"]
    wait_alert(receiver, "settlement_failed", lambda a: a["settlement_id"] == sid)
    module_anvil.mine(3)
    time.sleep(0.6)
    assert [b["type"] for b in effects_of(receiver, sid, "/commit")] == ["discard"]


def test_only_a_provisional_subscriber_hears_of_inclusion_before_finality(
    daemon: Daemon, module_anvil: Anvil, receiver: Receiver
) -> None:
    tx_p = module_anvil.send(2, 3)
    tx_n = module_anvil.send(3, 4)
    module_anvil.receipt(tx_n)
    sid_p = daemon.register(tx_p, commit_url=receiver.url("/prov"), provisional=True)[
        "settlement_id"
    ]
    sid_n = daemon.register(tx_n, commit_url=receiver.url("/plain"))["settlement_id"]
    first = wait_effect(receiver, sid_p, "provisional", "/prov")
    assert first["provisional"] is True and first["stage"] == "included"
    assert first["verdict"] == "AWAITING_FINALITY"
    assert daemon.settlement(sid_p)["verdict"] == "AWAITING_FINALITY"

    module_anvil.mine(3)
    wait_effect(receiver, sid_p, "commit", "/prov")
    wait_effect(receiver, sid_n, "commit", "/plain")
    seen = [b["type"] for b in effects_of(receiver, sid_p, "/prov")]
    assert seen[-1] == "commit" and set(seen[:-1]) == {"provisional"}
    assert all(b["provisional"] is True for b in effects_of(receiver, sid_p, "/prov")[:-1])
    assert [b["type"] for b in effects_of(receiver, sid_n, "/plain")] == ["commit"]


def test_a_reorg_alert_has_its_depth_and_touched_settlements(
    daemon: Daemon, module_anvil: Anvil, receiver: Receiver
) -> None:
    module_anvil.mine(6)
    tx = module_anvil.send()
    sid = daemon.register(tx)["settlement_id"]
    wait_seen(daemon, sid)
    module_anvil.reorg(2)
    alert = wait_alert(receiver, "reorg", lambda a: sid in a["payload"]["touched"])
    assert alert["payload"]["depth"] == 2
    assert alert["payload"]["touched"] == [sid]
    assert alert["severity"] == "warning"
    slack = wait_for(
        lambda: [b for b in receiver.effects("/slack") if "depth 2" in b.get("text", "")],
        10,
        what="slack reorg text",
    )
    assert "*reorg*" in slack[0]["text"]


def test_a_reorg_under_a_confirmed_settlement_is_a_finality_violation(
    daemon: Daemon, module_anvil: Anvil, receiver: Receiver
) -> None:
    module_anvil.mine(6)
    tx = module_anvil.send()
    sid = daemon.register(tx, confirmations=1, commit_url=receiver.url("/commit"))["settlement_id"]
    daemon.wait_verdict(sid, "FINALITY_CONFIRMED")
    module_anvil.reorg(3)
    alert = wait_alert(receiver, "finality_violation", lambda a: a["settlement_id"] == sid)
    assert alert["severity"] == "critical"
    assert alert["payload"]["previous"]["verdict"] == "FINALITY_CONFIRMED"
    reorg = wait_alert(receiver, "reorg", lambda a: sid in a["payload"]["touched"])
    assert reorg["severity"] == "critical" and reorg["payload"]["depth"] == 3
    # The structured log channel (type = "log", min_severity = "critical"): one JSON line.
    wait_for(lambda: '"alert":"finality_violation"' in daemon.log(), 5, what="JSON log line")
    assert "FINALITY VIOLATION" in daemon.log()  # and the engine's own critical line


def test_an_unreachable_commit_url_is_accepted_and_delivered_later(
    daemon: Daemon, module_anvil: Anvil
) -> None:
    late = Receiver(SECRET, start=False)
    try:
        tx = module_anvil.send()
        answer = daemon.post(
            "/v1/settlements",
            {
                "chain": "local",
                "tx_hash": tx,
                "commit_url": late.url("/late"),
                "dependent_state": {"k": 2},
            },
        )
        assert answer.status_code == 201, answer.text
        sid = answer.json()["settlement_id"]
        module_anvil.mine(2)

        def retried() -> bool:
            rows = daemon.get("/v1/deliveries", params={"settlement_id": sid}).json()
            rows = [r for r in rows if r["channel"] == "commit"]
            return bool(rows) and rows[0]["attempts"] >= 2 and rows[0]["state"] != "delivered"

        wait_for(retried, 15, what="failed attempts against the unreachable URL")
        late.start()
        commit = wait_effect(late, sid, "commit")
        assert commit["dependent_state"] == {"k": 2}
        assert len(late.effects()) == 1
    finally:
        late.stop()


def test_dead_letter_is_listed_and_replayed_from_the_cli(
    daemon: Daemon, module_anvil: Anvil
) -> None:
    with Receiver(SECRET) as failing:
        failing.fail_with = 500
        tx = module_anvil.send()
        sid = daemon.register(tx, commit_url=failing.url("/commit"))["settlement_id"]
        module_anvil.mine(2)

        def dead() -> list[dict[str, Any]]:
            rows = daemon.get("/v1/deliveries", params={"state": "dead"}).json()
            return [r for r in rows if r["settlement_id"] == sid and r["channel"] == "commit"]

        [row] = wait_for(dead, 20, what="dead letter")
        assert row["attempts"] == DELIVERY["max_attempts"] and row["last_status"] == 500
        listed = daemon.cli("deliveries", "--state", "dead")
        assert listed.returncode == 0, listed.stderr
        assert f"#{row['id']}" in listed.stdout and "dead" in listed.stdout

        failing.fail_with = None
        replay = daemon.cli("deliveries", "replay", str(row["id"]))
        assert replay.returncode == 0, replay.stderr
        wait_effect(failing, sid, "commit")
        again = daemon.cli("deliveries", "replay", str(row["id"]))
        assert again.returncode == 64 and "only a dead delivery" in again.stderr
        missing = daemon.cli("deliveries", "replay")
        assert missing.returncode == 64
        assert len(failing.effects()) == 1


def test_dependent_state_over_the_configured_limit_is_413_and_a_non_object_422(
    daemon: Daemon,
) -> None:
    tx = "0x" + "ab" * 32
    big = daemon.post(
        "/v1/settlements",
        {"chain": "local", "tx_hash": tx, "dependent_state": {"b": "x" * STATE_LIMIT}},
    )
    assert big.status_code == 413
    assert big.json()["limit"] == STATE_LIMIT and str(STATE_LIMIT) in big.json()["error"]
    for bad in ([1, 2], "state", 3):
        answer = daemon.post(
            "/v1/settlements", {"chain": "local", "tx_hash": tx, "dependent_state": bad}
        )
        assert answer.status_code == 422 and "dependent_state" in answer.json()["error"]
    assert daemon.get(f"/v1/chains/local/txs/{tx}").json()["registered"] is False


def _frames(response: httpx.Response, count: int) -> list[dict[str, str]]:
    frames: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in response.iter_lines():
        if not line:
            if "id" in current:
                frames.append(current)
                if len(frames) == count:
                    break
            current = {}
        elif not line.startswith(":") and ":" in line:
            field, _, value = line.partition(":")
            current[field] = value.strip()
    return frames


def test_the_event_stream_resumes_from_last_event_id(daemon: Daemon) -> None:
    events = daemon.get("/v1/events", params={"limit": 1000}).json()
    assert len(events) >= 3
    sse = {"Accept": "text/event-stream"}
    with daemon.http.stream("GET", "/v1/events", headers=sse, timeout=10) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        first = _frames(stream, 2)
    assert [int(f["id"]) for f in first] == [e["id"] for e in events[:2]]
    assert first[0]["event"] == events[0]["kind"]

    resume = {**sse, "Last-Event-ID": first[0]["id"]}
    with daemon.http.stream("GET", "/v1/events", headers=resume, timeout=10) as stream:
        [again] = _frames(stream, 1)
    assert int(again["id"]) == events[1]["id"]

    critical = [e for e in events if e["severity"] == "critical"]
    if critical:  # the violation test above made some (this test may also run alone)
        params = {"min_severity": "critical"}
        with daemon.http.stream("GET", "/v1/events", headers=sse, params=params) as stream:
            [worst] = _frames(stream, 1)
        assert (int(worst["id"]), worst["event"]) == (critical[0]["id"], critical[0]["kind"])
    assert daemon.get("/v1/events", headers={"Last-Event-ID": "x", **sse}).status_code == 422


def test_metrics_cover_reorgs_verdicts_rpc_and_deliveries(daemon: Daemon) -> None:
    text = daemon.get("/metrics").text
    for needle in (
        'finality_reorg_depth_blocks_bucket{chain="local",le="2"}',
        'finality_settlements{chain="local",verdict="FINALITY_CONFIRMED"}',
        'finality_inclusion_to_finality_seconds_count{chain="local"}',
        'finality_rpc_requests_total{chain="local",method="eth_getBlockByNumber",outcome="ok"}',
        'finality_deliveries{channel="commit",state="delivered"}',
        'finality_delivery_attempts_total{channel="webhook",outcome="delivered"}',
        "finality_outbox_backlog ",
        'finality_head_lag_seconds{chain="local"}',
    ):
        assert needle in text, needle


def test_unknown_delivery_state_and_id_are_clear_errors(daemon: Daemon, tmp_path: Path) -> None:
    bad = daemon.get("/v1/deliveries", params={"state": "lost"})
    assert bad.status_code == 422 and "state" in bad.json()["error"]
    assert daemon.get("/v1/deliveries/999999").status_code == 404
    assert daemon.post("/v1/deliveries/999999/replay", {}).status_code == 404


# -- a finality violation after the commit was delivered (told at the commit_url) ----------


def commit_channel(receiver: Receiver, sid: str) -> list[tuple[str, str]]:
    """(type, Idempotency-Key) of every request the commit_url answered 200 for ``sid``."""
    return [
        (r.json["type"], r.key)
        for r in receiver.received("/commit")
        if r.status == 200 and isinstance(r.json, dict) and r.json.get("settlement_id") == sid
    ]


def confirmed_and_committed(
    daemon: Daemon, anvil: Anvil, receiver: Receiver, sender: int
) -> tuple[str, str, dict[str, Any]]:
    """A settlement with N=2, its commit applied by the receiver: (tx, id, commit body)."""
    anvil.mine(6)  # earlier tests' settlements stay below the reorgs of these tests
    tx = anvil.send(sender=sender, to=9)
    view = daemon.register(
        tx, confirmations=2, dependent_state={"order": tx[:10]}, commit_url=receiver.url("/commit")
    )
    anvil.mine(1)
    return tx, view["settlement_id"], wait_effect(receiver, view["settlement_id"], "commit")


def check_violation(violation: dict[str, Any], sid: str, commit: dict[str, Any]) -> None:
    """What every violation body must say about the commit it withdraws."""
    assert violation["idempotency_key"].startswith(f"fw:{sid}:violation:")
    assert violation["commit_idempotency_key"] == f"fw:{sid}:commit"
    assert violation["reversed_decision"]["digest"] == commit["decision"]["digest"]
    rested = commit["decision"]["evidence"]["facts"]
    block = {"number": rested["block_number"], "hash": rested["block_hash"]}
    assert violation["commit_block"] == block
    reorg = violation["reorg"]
    assert reorg["depth"] == 3 and reorg["commit_block"] == block
    assert reorg["common_ancestor"]["number"] < block["number"]
    assert reorg["replaced_by"] not in (None, block["hash"])
    assert violation["dependent_state"] == commit["dependent_state"]
    assert violation["binding"]["digest"] == commit["binding"]["digest"]
    assert "HOLD OR COMPENSATE" in violation["directive"]
    # The signed revocation withdraws exactly the receipt the commit carried, and checks
    # offline like any receipt.
    assert violation["revoked_receipt_digest"] == commit["receipt"]["digest"]
    revocation = violation["revocation"]["receipt"]
    assert violation["revocation_missing"] is None
    assert revocation["kind"] == "receipt_revocation"
    assert revocation["revokes"]["digest"] == commit["receipt"]["digest"]
    verified = verify_receipt(revocation, trusted_signers=[commit["receipt"]["signer"]])
    assert verified.kind == "receipt_revocation"


def test_a_delivered_commit_whose_tx_is_dropped_gets_a_violation_then_a_discard(
    daemon: Daemon, module_anvil: Anvil, receiver: Receiver
) -> None:
    anvil = module_anvil
    tx, sid, commit = confirmed_and_committed(daemon, anvil, receiver, sender=3)
    sent = anvil.rpc("eth_getTransactionByHash", tx)
    # The reorg replaces the block and 2 more; the tx's nonce goes to another transfer, so
    # the tx can never come back.
    other = {"from": sent["from"], "to": anvil.accounts[8], "value": "0x2", "nonce": sent["nonce"]}
    anvil.rpc("anvil_reorg", 3, [[other, 2]])
    violation = wait_effect(receiver, sid, "finality_violation")
    check_violation(violation, sid, commit)
    anvil.mine(2)  # the replacement reaches depth 2: the settlement failed
    discard = wait_effect(receiver, sid, "discard")

    assert discard["verdict"] == "SETTLEMENT_FAILED"
    assert discard["receipt"]["kind"] == "settlement_failure_receipt"
    assert commit_channel(receiver, sid) == [
        ("commit", f"fw:{sid}:commit"),
        ("finality_violation", violation["idempotency_key"]),
        ("discard", f"fw:{sid}:discard"),
    ]


def test_a_delivered_commit_whose_tx_comes_back_gets_a_violation_then_the_commit_again(
    daemon: Daemon, module_anvil: Anvil, receiver: Receiver
) -> None:
    anvil = module_anvil
    tx, sid, commit = confirmed_and_committed(daemon, anvil, receiver, sender=4)
    raw = anvil.raw_tx(tx)
    anvil.reorg(3, [(raw, 2)])  # the same tx, one block deep in the new branch
    violation = wait_effect(receiver, sid, "finality_violation")
    check_violation(violation, sid, commit)
    anvil.mine(1)  # depth 2 again: confirmed again

    def again() -> list[tuple[str, str]] | None:
        seen = commit_channel(receiver, sid)
        return seen if len(seen) >= 3 else None

    seen = wait_for(again, 15, what="the commit sent again")
    assert seen == [
        ("commit", f"fw:{sid}:commit"),
        ("finality_violation", violation["idempotency_key"]),
        ("commit", f"fw:{sid}:commit"),  # the same key: the receiver deduped it
    ]
    assert [b["type"] for b in effects_of(receiver, sid, "/commit")] == [
        "commit",
        "finality_violation",
    ]
    [resent] = [r.json for r in receiver.received("/commit") if r.key == f"fw:{sid}:commit"][1:]
    assert resent["decision"]["digest"] != commit["decision"]["digest"]
    assert resent["receipt"]["receipt"]["decision_digest"] == resent["decision"]["digest"]
    assert violation["revoked_receipt_digest"] != resent["receipt"]["digest"]


def test_every_delivery_verifies_with_the_standard_webhooks_library(
    daemon: Daemon, module_anvil: Anvil, receiver: Receiver
) -> None:
    """The independent oracle: the ``standardwebhooks`` package accepts every commit, discard
    and alert the daemon sent this module, and refuses each one altered or replayed."""
    sids = {}
    for effect, tx in (("commit", module_anvil.send()), ("discard", module_anvil.send_revert())):
        module_anvil.receipt(tx)
        view = daemon.register(tx, dependent_state={"o": 1}, commit_url=receiver.url("/commit"))
        sids[effect] = view["settlement_id"]
    module_anvil.mine(2)
    for effect, sid in sids.items():
        wait_effect(receiver, sid, effect)
    wait_alert(receiver, "settlement_confirmed", lambda a: a["settlement_id"] == sids["commit"])
    webhook = standardwebhooks.Webhook(SECRET)
    requests = receiver.received()
    kinds = {r.headers["x-finality-event"] for r in requests}
    assert {"commit", "discard", "settlement_confirmed"} <= kinds, kinds
    for request in requests:
        assert request.headers["webhook-id"] == request.key
        webhook.verify(request.body, request.headers)  # raises on a bad one

    sample = next(r for r in requests if r.headers["x-finality-event"] == "commit")
    forged = [
        (sample.body.replace(b'"commit"', b'"discard"'), sample.headers),  # altered body
        (sample.body, {**sample.headers, "webhook-timestamp": str(int(time.time()) + 1)}),
        (sample.body, {**sample.headers, "webhook-id": sample.key.replace("commit", "x")}),
    ]
    for body, headers in forged:
        with pytest.raises(standardwebhooks.WebhookVerificationError):
            webhook.verify(body, headers)
