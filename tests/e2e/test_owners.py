"""Settlements belong to their caller, with the daemon as a real process.

Two token callers register the same (public) tx hash, each with its own dependent state and
commit_url (two loopback receivers): the tx is mined to finality and each receiver gets its
own commit exactly once, with its own state. Neither caller can read, list, or see in the
events the other's settlement; a reorg's ``touched`` list names only the caller's own. An
API without tokens (one anonymous caller) answers a repeat registration 200 with the same id,
as before owners existed.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from functools import partial
from typing import Any

import httpx
import pytest

from tests.support.anvil import Anvil
from tests.support.daemon import CHAIN, Daemon, wait_for
from tests.support.receiver import Receiver
from watcher.settlements import settlement_id_for

pytestmark = pytest.mark.anvil

SECRET = "owners-secret"
TOKENS = {name: f"fw-{name}-" + secrets.token_hex(16) for name in ("alice", "bob", "ops")}
API_TABLE = "\n".join(
    f'[[api.tokens]]\nname = "{name}"\ntoken = "{token}"\nscopes = {scopes}\n'
    for (name, token), scopes in zip(
        TOKENS.items(),
        ('["read", "register"]', '["read", "register"]', '["read", "admin"]'),
        strict=True,
    )
)
DELIVERY = {"backoff_initial_s": 0.2, "backoff_max_s": 0.5, "receipt_wait_s": 1.0}


@pytest.fixture(scope="module")
def receivers() -> Iterator[dict[str, Receiver]]:
    with Receiver(SECRET) as a, Receiver(SECRET) as b:
        yield {"alice": a, "bob": b}


@pytest.fixture(scope="module")
def daemon(
    module_anvil: Anvil,
    receivers: dict[str, Receiver],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("owners"), module_anvil.url, start=False)
    config = d.config_path.read_text()
    head, sep, rest = config.partition("\n[[chains]]")
    extra = receivers["alice"].daemon_config(SECRET, alerts=(), **DELIVERY)
    d.config_path.write_text(head.rstrip("\n") + "\n\n" + API_TABLE + sep + rest + extra)
    d.start()
    yield d
    d.close()


@pytest.fixture(scope="module")
def callers(daemon: Daemon) -> Iterator[dict[str, httpx.Client]]:
    clients = {
        name: httpx.Client(
            base_url=daemon.url, timeout=10.0, headers={"Authorization": f"Bearer {token}"}
        )
        for name, token in TOKENS.items()
    }
    yield clients
    for client in clients.values():
        client.close()


def _commits(receiver: Receiver) -> list[dict[str, Any]]:
    return receiver.effects("/commit", "commit")


def _commits_or_none(receiver: Receiver) -> list[dict[str, Any]] | None:
    return _commits(receiver) or None


def test_two_callers_of_one_tx_each_get_their_own_commit_once(
    daemon: Daemon,
    module_anvil: Anvil,
    receivers: dict[str, Receiver],
    callers: dict[str, httpx.Client],
) -> None:
    tx = module_anvil.send()
    views: dict[str, dict[str, Any]] = {}
    for name in ("alice", "bob"):
        body = {
            "chain": CHAIN,
            "tx_hash": tx,
            "dependent_state": {"order": f"{name}-1"},
            "commit_url": receivers[name].url("/commit"),
        }
        answer = callers[name].post("/v1/settlements", json=body)
        assert answer.status_code == 201, answer.text  # bob's is not alice's answered back
        views[name] = answer.json()
        assert views[name]["dependent_state"] == {"order": f"{name}-1"}
        assert views[name]["commit_url"] == receivers[name].url("/commit")
    alice, bob = views["alice"]["settlement_id"], views["bob"]["settlement_id"]
    assert alice != bob
    alice_body = {
        "chain": CHAIN,
        "tx_hash": tx,
        "dependent_state": {"order": "alice-1"},
        "commit_url": receivers["alice"].url("/commit"),
    }
    again = callers["alice"].post("/v1/settlements", json=alice_body)
    assert again.status_code == 200 and again.json()["settlement_id"] == alice
    other = callers["alice"].post("/v1/settlements", json={"chain": CHAIN, "tx_hash": tx})
    assert other.status_code == 409  # the same tx without her terms: not silently hers
    assert other.json()["fields"] == ["dependent_state", "commit_url"]

    module_anvil.mine(2)
    for name, sid in (("alice", alice), ("bob", bob)):
        [commit] = wait_for(partial(_commits_or_none, receivers[name]), 20, what=name)
        assert commit["settlement_id"] == sid
        assert commit["dependent_state"] == {"order": f"{name}-1"}
        assert commit["receipt"]["kind"] == "settlement_finality_receipt"
    ops = callers["ops"]

    def both_delivered() -> bool:
        rows = ops.get("/v1/deliveries", params={"state": "delivered"}).json()
        return {r["settlement_id"] for r in rows if r["channel"] == "commit"} >= {alice, bob}

    wait_for(both_delivered, 10, what="both commits recorded as delivered")  # nothing more due
    for name in ("alice", "bob"):
        assert len(_commits(receivers[name])) == 1
        assert len(receivers[name].received("/commit")) == 1

    # each reads its own, and nothing of the other's
    a, b = callers["alice"], callers["bob"]
    assert b.get(f"/v1/settlements/{bob}").json()["dependent_state"] == {"order": "bob-1"}
    unknown = "stl_" + "0" * 24
    for path in ("", "/receipt", "/receipts", "/events"):
        hidden, missing = (
            b.get(f"/v1/settlements/{alice}{path}"),
            b.get(f"/v1/settlements/{unknown}{path}"),
        )
        assert hidden.status_code == missing.status_code == 404, (path, hidden.text)
        assert hidden.json()["error"] == missing.json()["error"].replace(unknown, alice)
    assert b.get(f"/v1/chains/{CHAIN}/txs/{tx}").json()["settlement_id"] == bob
    assert a.get(f"/v1/chains/{CHAIN}/txs/{tx}").json()["settlement_id"] == alice
    listed = [s["settlement_id"] for s in b.get("/v1/settlements").json()["items"]]
    assert bob in listed and alice not in listed
    assert a.get(f"/v1/settlements/{alice}/receipt").json()["settlement_id"] == alice

    events = b.get("/v1/events", params={"limit": 1000}).json()
    assert {e["settlement_id"] for e in events} <= {bob, None}
    assert alice not in json.dumps(events)
    assert any(e["settlement_id"] == bob and e["kind"] == "settlement_confirmed" for e in events)

    deliveries = b.get("/v1/deliveries").json()
    assert {d["settlement_id"] for d in deliveries} == {bob}
    # an operator (admin, who replays dead letters) reads the outbox across callers
    across = ops.get("/v1/deliveries", params={"settlement_id": alice}).json()
    assert [d["settlement_id"] for d in across] == [alice]
    assert ops.get(f"/v1/settlements/{alice}").status_code == 404  # not its own settlement

    # the batch route: bob's item for a tx alice registered is bob's own new settlement
    fresh = module_anvil.send()
    assert a.post("/v1/settlements", json={"chain": CHAIN, "tx_hash": fresh}).status_code == 201
    bobs = {
        "chain": CHAIN,
        "tx_hash": tx,
        "dependent_state": {"order": "bob-1"},
        "commit_url": receivers["bob"].url("/commit"),
    }
    items = [{"chain": CHAIN, "tx_hash": fresh}, bobs]
    results = b.post("/v1/settlements/batch", json={"items": items}).json()["results"]
    assert [r["status"] for r in results] == [201, 200]
    assert results[1]["settlement"]["settlement_id"] == bob
    assert results[0]["settlement"]["settlement_id"] not in (alice, bob)
    [theirs] = [d for d in a.get("/v1/deliveries").json() if d["settlement_id"] == alice]
    assert b.get(f"/v1/deliveries/{theirs['id']}").status_code == 404
    assert a.get(f"/v1/deliveries/{theirs['id']}").json()["body"]["dependent_state"] == {
        "order": "alice-1"
    }


def test_the_event_stream_shows_a_caller_only_its_own(
    daemon: Daemon, module_anvil: Anvil, callers: dict[str, httpx.Client]
) -> None:
    """A reorg touching both callers' settlements: each stream shows the reorg, its
    ``touched`` naming only the caller's own, and none of the other's settlement events."""
    tx = module_anvil.send()
    module_anvil.receipt(tx)
    ids = {
        name: callers[name]
        .post("/v1/settlements", json={"chain": CHAIN, "tx_hash": tx, "confirmations": 5})
        .json()["settlement_id"]
        for name in ("alice", "bob")
    }
    wait_for(
        lambda: callers["bob"].get(f"/v1/settlements/{ids['bob']}").json()["block_number"],
        15,
        what="inclusion",
    )
    raw = module_anvil.rpc("eth_getRawTransactionByHash", tx)
    after = max([0] + [e["id"] for e in callers["bob"].get("/v1/events?limit=1000").json()])
    module_anvil.rpc("anvil_reorg", 1, [[raw, 0]])
    module_anvil.mine(1)

    frames: list[dict[str, Any]] = []
    headers = {"Accept": "text/event-stream"}
    with callers["bob"].stream("GET", f"/v1/events?after={after}", headers=headers) as stream:
        for line in stream.iter_lines():
            if line.startswith("data: "):
                frames.append(json.loads(line[len("data: ") :]))
            if any(f["kind"] == "reorg" for f in frames):
                break
    [reorg] = [f for f in frames if f["kind"] == "reorg"]
    assert reorg["payload"]["touched"] == [ids["bob"]]
    assert ids["alice"] not in json.dumps(frames)
    [mine] = callers["alice"].get("/v1/reorgs", params={"chain": CHAIN}).json()[:1]
    assert mine["touched"] == [ids["alice"]]
    for name in ("alice", "bob"):
        view = callers[name].get(f"/v1/settlements/{ids[name]}").json()
        assert view["reorg_count"] == 1


def test_without_tokens_a_repeat_registration_is_200_with_the_same_id(
    module_anvil: Anvil, tmp_path_factory: pytest.TempPathFactory
) -> None:
    with Daemon(tmp_path_factory.mktemp("open"), module_anvil.url) as open_daemon:
        tx = module_anvil.send()
        first = open_daemon.post("/v1/settlements", {"chain": CHAIN, "tx_hash": tx})
        second = open_daemon.post("/v1/settlements", {"chain": CHAIN, "tx_hash": tx})
        assert (first.status_code, second.status_code) == (201, 200)
        assert first.json()["settlement_id"] == second.json()["settlement_id"]
        assert first.json()["settlement_id"] == settlement_id_for(CHAIN, tx)  # as before owners
        listed = open_daemon.get("/v1/settlements").json()["items"]
        assert [s["settlement_id"] for s in listed] == [first.json()["settlement_id"]]
