"""A node that lies is caught before anything is decided on its word.

The daemon (a real process) reads a real anvil through a real proxy that lies
(tests/support/faulty_proxy.py): it flips a reverted receipt's status to success, changes a
header field under the block's original hash, answers batches out of order without ids or
with each other's ids. Each lie must be caught before a decision: the endpoint is marked
``inconsistent`` (``/healthz``, ``/v1/chains``, an ``rpc_unhealthy`` event), the settlement
waits and its view says why, and once the node tells the truth again the right verdict
follows; the reverted tx is never FINALITY_CONFIRMED, the good txs never failed. With
``rpc = [liar, anvil]`` and ``quorum = 2`` the liar is left and the chain read on the other.

One anvil and two daemons serve the whole module (automining switched off while a test
needs a tx pending at registration).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.anvil import Anvil
from tests.support.daemon import CHAIN, Daemon, wait_for
from tests.support.faulty_proxy import FaultyProxy

pytestmark = pytest.mark.anvil

FORGED_ROOT = "0x" + "11" * 32
REVERTING = "0x6460006000fd6000526005601bf3"
"""Init code of a contract whose every call reverts (its runtime: PUSH1 0 PUSH1 0 REVERT), so
a value sent to it is a native transfer to a watched address that reverts."""
AVALANCHE = 43114
"""A chain id the registry marks as one whose headers do not re-hash."""


@pytest.fixture(scope="module")
def liar(module_anvil: Anvil) -> Iterator[FaultyProxy]:
    proxy = FaultyProxy(module_anvil.url)
    yield proxy
    proxy.close()


@pytest.fixture(scope="module")
def alone(
    module_anvil: Anvil, liar: FaultyProxy, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Daemon]:
    """A daemon whose only endpoint is the lying proxy."""
    daemon = Daemon(
        tmp_path_factory.mktemp("alone"), liar.url, confirmations=2, poll_interval_s=0.2
    )
    yield daemon
    daemon.close()


@pytest.fixture(autouse=True)
def _truthful(liar: FaultyProxy, module_anvil: Anvil) -> Iterator[None]:
    yield
    liar.clear()
    module_anvil.rpc("evm_setAutomine", True)


def pending(anvil: Anvil, *txs: str) -> None:
    """Wait until the node holds ``txs`` (sent with automining off)."""
    wait_for(
        lambda: all(anvil.rpc("eth_getTransactionByHash", tx) for tx in txs),
        10,
        what="txs pending",
    )


def refused(daemon: Daemon, words: str) -> dict[str, Any]:
    """Wait until ``/healthz`` is 503 with the chain's node said to be inconsistent (and
    ``words`` in why); returns the chain's health."""

    def check() -> dict[str, Any] | None:
        answer = daemon.get("/healthz")
        chain = answer.json()["chains"][CHAIN]
        error = chain["last_error"] or ""
        return chain if answer.status_code == 503 and "inconsistent" in error else None

    chain = wait_for(check, 20, what="/healthz naming the inconsistent node")
    assert words in chain["last_error"], chain
    return chain


def probed(daemon: Daemon, sid: str) -> None:
    """Wait until the daemon looked the pending tx of ``sid`` up (its timeline shows the
    sender and nonce it saw pending)."""
    wait_for(
        lambda: [s for s in daemon.timeline(sid) if s["step"] == "seen_pending"],
        10,
        what=f"{sid} probed",
    )


def unhealthy_events(daemon: Daemon) -> list[dict[str, Any]]:
    return [e for e in daemon.get("/v1/events").json() if e["kind"] == "rpc_unhealthy"]


def confirmed_events(daemon: Daemon, sid: str) -> list[dict[str, Any]]:
    return [
        e
        for e in daemon.get("/v1/events").json()
        if e.get("settlement_id") == sid and e["kind"] == "settlement_confirmed"
    ]


def test_a_flipped_receipt_status_is_caught_and_the_reverted_tx_fails(
    module_anvil: Anvil, liar: FaultyProxy, alone: Daemon
) -> None:
    anvil = module_anvil
    anvil.rpc("evm_setAutomine", False)
    tx = anvil.send_revert()
    pending(anvil, tx)
    sid = alone.register(tx)["settlement_id"]
    probed(alone, sid)
    liar.flip_status = True
    anvil.mine(3)

    health = refused(alone, "receiptsRoot")
    assert health["healthy"] is False
    view = alone.settlement(sid)
    assert view["verdict"] == "AWAITING_FINALITY"
    assert "inconsistent" in view["waiting"] and "receiptsRoot" in view["waiting"]
    [event] = wait_for(lambda: unhealthy_events(alone) or None, 10, what="rpc_unhealthy")
    assert "inconsistent" in event["payload"]["reason"]
    assert "inconsistent" in str(alone.chain_info()["last_error"])

    liar.clear()
    anvil.mine(1)
    failed = alone.wait_verdict(sid, "SETTLEMENT_FAILED", timeout=20)
    assert failed["status"] == 0 and failed["evidence"]["kind"] == "reverted"
    assert "waiting" not in failed
    assert confirmed_events(alone, sid) == []
    # The verdict commits inside the poll; the chain's health is set when the poll ends.
    wait_for(lambda: alone.get("/healthz").status_code == 200, 10, what="healthy again")


def test_a_flipped_status_makes_no_deposit_of_a_reverted_transfer(
    module_anvil: Anvil, liar: FaultyProxy, alone: Daemon
) -> None:
    anvil = module_anvil
    creation = {"from": anvil.accounts[0], "data": REVERTING, "gas": hex(100_000)}
    wall = anvil.receipt(anvil.rpc("eth_sendTransaction", creation))["contractAddress"]
    payee = anvil.accounts[5]
    body = {"chain": CHAIN, "addresses": [wall, payee], "assets": ["native"]}
    answer = alone.post("/v1/subscriptions", body)
    assert answer.status_code == 201, answer.text
    deposits = f"/v1/subscriptions/{answer.json()['subscription_id']}/deposits"
    try:
        anvil.rpc("evm_setAutomine", False)
        bounce = {"from": anvil.accounts[0], "to": wall, "value": hex(10**15), "gas": "0x186a0"}
        bounced = anvil.rpc("eth_sendTransaction", bounce)
        pending(anvil, bounced)
        liar.flip_status = True
        anvil.mine(1)

        refused(alone, "receiptsRoot")
        assert alone.get(deposits).json()["items"] == []

        liar.clear()
        paid = anvil.send(to=5, value=10**15)
        pending(anvil, paid)
        anvil.mine(3)
        seen = wait_for(lambda: alone.get(deposits).json()["items"] or None, 20, what="deposit")
        assert [d["tx_hash"] for d in seen] == [paid]  # the reverted transfer is none
        assert anvil.receipt(bounced)["status"] == "0x0"
    finally:
        alone.http.request("DELETE", deposits.removesuffix("/deposits"))


def test_a_header_field_changed_under_its_hash_is_not_believed(
    module_anvil: Anvil, liar: FaultyProxy, alone: Daemon
) -> None:
    anvil = module_anvil
    alone.wait_head(anvil.head())
    before = alone.head()
    liar.forge_header = {"stateRoot": FORGED_ROOT}
    anvil.mine(2)

    refused(alone, "do not hash to its hash")
    assert alone.head() == before  # not one forged block was taken
    stored = alone.query("SELECT COUNT(*) FROM headers WHERE number > ?", before)
    assert stored == [(0,)]

    liar.clear()
    alone.wait_head(anvil.head())
    assert alone.get("/healthz").status_code == 200


def test_a_sender_named_falsely_makes_no_replacement(
    module_anvil: Anvil, liar: FaultyProxy, alone: Daemon
) -> None:
    anvil = module_anvil
    anvil.rpc("evm_setAutomine", False)
    tx = anvil.send(sender=2, value=9)
    pending(anvil, tx)
    liar.forge_sender = anvil.accounts[3]  # whose next tx would then "replace" this one
    sid = alone.register(tx)["settlement_id"]
    refused(alone, "its signed bytes say sender")
    assert alone.settlement(sid)["verdict"] == "AWAITING_FINALITY"

    liar.clear()
    anvil.send(sender=3, value=1)  # the same nonce from the falsely named sender
    anvil.mine(3)
    done = alone.wait_verdict(sid, "FINALITY_CONFIRMED", timeout=20)
    assert done["replaced_by"] is None


@pytest.mark.parametrize(
    ("lie", "words"),
    [("shuffle_batches", "no (integer) id"), ("mislabel_batches", "answered tx")],
)
def test_batch_answers_out_of_order_change_no_verdict(
    module_anvil: Anvil, liar: FaultyProxy, alone: Daemon, lie: str, words: str
) -> None:
    anvil = module_anvil
    anvil.rpc("evm_setAutomine", False)
    txs = [anvil.send(value=7), anvil.send(sender=1, value=8)]
    pending(anvil, *txs)
    asked = liar.calls["eth_getTransactionByHash"]
    setattr(liar, lie, True)
    items = [{"chain": CHAIN, "tx_hash": tx} for tx in txs]
    answer = alone.post("/v1/settlements/batch", {"items": items})
    assert answer.status_code == 200, answer.text
    sids = [result["settlement"]["settlement_id"] for result in answer.json()["results"]]
    wait_for(  # one batch looked both up
        lambda: liar.calls["eth_getTransactionByHash"] >= asked + 2, 10, what="the probe"
    )
    wait_for(
        lambda: words in str(alone.get("/healthz").json()["chains"][CHAIN]["last_error"]),
        20,
        what="the batch refused",
    )

    liar.clear()
    anvil.mine(3)
    for sid in sids:
        done = alone.wait_verdict(sid, "FINALITY_CONFIRMED", timeout=20)
        assert done["replaced_by"] is None and done["status"] == 1


@pytest.mark.parametrize(
    ("lie", "words"),
    [
        ({"flip_status": True}, "receiptsRoot"),
        ({"forge_header": {"stateRoot": FORGED_ROOT}}, "do not hash to its hash"),
    ],
    ids=["status", "header"],
)
def test_with_a_quorum_the_liar_is_left_and_the_chain_read_on_the_other(
    module_anvil: Anvil, tmp_path_factory: pytest.TempPathFactory, lie: dict[str, Any], words: str
) -> None:
    """A liar among two endpoints with a quorum of two: its data is refused, the chain is
    read from the other; a liar about receipts still votes on block hashes (they check out),
    a liar about headers cannot vote at all until it tells the truth (the gate re-hashes)."""
    anvil = module_anvil
    second = FaultyProxy(anvil.url)
    daemon = Daemon(
        tmp_path_factory.mktemp("pair"),
        second.url,
        rpc=[second.url, anvil.url],
        quorum=2,
        confirmations=2,
        poll_interval_s=0.2,
        rpc_backoff_s=0.5,
    )
    try:
        anvil.rpc("evm_setAutomine", False)
        tx = anvil.send_revert()
        pending(anvil, tx)
        sid = daemon.register(tx)["settlement_id"]
        for name, value in lie.items():
            setattr(second, name, value)
        anvil.mine(3)
        liar_view = wait_for(
            lambda: (lambda first: first if first["inconsistent"] else None)(
                daemon.chain_info()["rpc"][0]
            ),
            20,
            what="the liar marked inconsistent",
        )
        assert words in liar_view["inconsistent"]
        if "forge_header" in lie:
            anvil.mine(2)
            daemon.wait_head(anvil.head())
            held = daemon.settlement(sid)
            assert held["verdict"] == "AWAITING_FINALITY"  # no quorum without the liar
            assert "inconsistent" in held["evidence"]["facts"]["reason"]
            second.clear()

        def failed() -> dict[str, Any] | None:
            anvil.mine(1)  # the gate asks again at each block: the liar votes on heads only
            view = daemon.settlement(sid)
            return view if view["verdict"] != "AWAITING_FINALITY" else None

        view = wait_for(failed, 30, interval=1.0, what="the failure decided")
        assert view["verdict"] == "SETTLEMENT_FAILED" and view["evidence"]["kind"] == "reverted"
        assert confirmed_events(daemon, sid) == []
        events = wait_for(
            lambda: [e for e in unhealthy_events(daemon) if e["payload"].get("state")] or None,
            10,
            what="the endpoint's rpc_unhealthy",
        )
        assert events[0]["payload"]["state"] == "inconsistent"
        assert words in events[0]["payload"]["reason"]
        assert daemon.chain_info()["rpc"][1]["active"]  # read from the other since
    finally:
        daemon.close()
        second.close()


def test_where_headers_cannot_be_rehashed_the_view_and_receipt_say_attestation(
    start_anvil: Callable[..., Anvil],
    make_daemon: Callable[..., Daemon],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A chain the registry marks as not re-hashing its headers (Avalanche C-Chain's id, on
    an anvil): nothing is checked against its headers, and every view and receipt says the
    verdict rests on the node's word."""
    monkeypatch.setenv("FINALITY_SIGNING_KEY", "0x" + "5e" * 32)  # not a dev chain id
    anvil = start_anvil("--chain-id", str(AVALANCHE))
    daemon = make_daemon(anvil.url, chain_id=AVALANCHE, confirmations=2, finality="depth")
    sid = daemon.register(anvil.send())["settlement_id"]
    assert daemon.settlement(sid)["attestation"]  # the registry's reason
    anvil.mine(2)
    done = daemon.wait_verdict(sid, "FINALITY_CONFIRMED", timeout=20)
    assert done["attestation"]
    receipt = wait_for(
        lambda: (lambda r: r.json() if r.status_code == 200 else None)(
            daemon.get(f"/v1/settlements/{sid}/receipt")
        ),
        20,
        what="the signed receipt",
    )
    assert receipt["attestation_only"] is True and receipt["proof"] is None
    assert receipt["attestation"]["reason"] == done["attestation"]
