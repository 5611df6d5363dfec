"""Payments to an address through the daemon as a process: register over HTTP, pay with real
transfers on a real anvil, read the view, get the commit or discard at the commit_url."""

from __future__ import annotations

import base64
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from guard.hexes import checksum_address
from tests.support.anvil import Anvil
from tests.support.daemon import Daemon, subprocess_env, wait_for
from tests.support.receiver import Receiver
from watcher.client import FinalityClient, Rejected

pytestmark = pytest.mark.anvil

SECRET = "whsec_" + base64.b64encode(b"payments-e2e-secret-24-bytes").decode()
DELIVERY = {"backoff_initial_s": 0.2, "backoff_max_s": 0.5, "timeout_s": 2.0, "receipt_wait_s": 1.0}


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with Receiver(SECRET) as r:
        yield r


@pytest.fixture(scope="module")
def daemon(
    module_anvil: Anvil, receiver: Receiver, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("payments"), module_anvil.url, start=False)
    d.config_path.write_text(
        d.config_path.read_text() + receiver.daemon_config(SECRET, [], **DELIVERY)
    )
    d.start()
    yield d
    d.close()


def body(to: str, amount: str = "1000", **extra: Any) -> dict[str, Any]:
    return {
        "kind": "evm_payment",
        "chain": "local",
        "to": to,
        "asset": "native",
        "amount": amount,
        **extra,
    }


def pay(anvil: Anvil, sender: int, to: str, value: int) -> str:
    tx = {"from": anvil.accounts[sender], "to": to, "value": hex(value)}
    tx_hash = str(anvil.rpc("eth_sendTransaction", tx))
    anvil.receipt(tx_hash)
    return tx_hash


def fresh_address(tag: int) -> str:
    return "0x" + f"{tag:040x}"


def effect(receiver: Receiver, sid: str, type_: str) -> dict[str, Any]:
    return wait_for(
        lambda: next(
            (
                b
                for b in receiver.effects()
                if b.get("settlement_id") == sid and b.get("type") == type_
            ),
            None,
        ),
        20,
        what=f"{type_} for {sid}",
    )


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"to": "0x" + "ab" * 19}, "to"),
        ({"amount": "1.5"}, "amount"),
        ({"amount": "0"}, "amount"),
        ({"amount": 1000}, "amount"),
        ({"asset": "ether"}, "asset"),
        ({"from": "0xnothex"}, "from"),
        ({"chain": "nowhere"}, "chain"),
        ({"color": "red"}, "color"),
    ],
)
def test_a_bad_payment_body_is_a_422_naming_the_field(
    daemon: Daemon, change: dict[str, Any], field: str
) -> None:
    answer = daemon.post("/v1/settlements", {**body(fresh_address(1)), **change})
    assert answer.status_code == 422, answer.text
    assert field in answer.json()["fields"], answer.text


def test_a_wrong_eip55_checksum_is_refused_and_a_right_one_accepted(daemon: Daemon) -> None:
    good = checksum_address("0x" + "5aaeb6053f3e94c9b9a09f33669435e7ef1beaed")
    bad = good[:-1] + (good[-1].lower() if good[-1].isupper() else good[-1].upper())
    bad = bad if bad != good else good.replace("A", "a", 1)
    answer = daemon.post("/v1/settlements", body(bad))
    assert answer.status_code == 422 and "checksum" in answer.json()["error"], answer.text
    ok = daemon.post("/v1/settlements", body(good))
    assert ok.status_code == 201, ok.text
    assert ok.json()["to"] == good.lower()


def test_a_reference_makes_a_repeat_the_same_payment(daemon: Daemon) -> None:
    to = fresh_address(2)
    first = daemon.post("/v1/settlements", body(to, reference="order-1"))
    again = daemon.post("/v1/settlements", body(to, reference="order-1"))
    other = daemon.post("/v1/settlements", body(to))
    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 201)
    assert first.json()["settlement_id"] == again.json()["settlement_id"]
    assert other.json()["settlement_id"] != first.json()["settlement_id"]
    clash = daemon.post("/v1/settlements", body(to, amount="5", reference="order-1"))
    assert clash.status_code == 409 and clash.json()["fields"] == ["reference", "amount"]


def test_a_split_overpayment_confirms_and_commits_the_dependent_state(
    daemon: Daemon, module_anvil: Anvil, receiver: Receiver
) -> None:
    to = module_anvil.accounts[7]
    state = {"order": 42, "ship": True}
    view = daemon.post(
        "/v1/settlements",
        body(to, dependent_state=state, commit_url=receiver.url("/commit")),
    ).json()
    sid = view["settlement_id"]
    assert view["kind"] == "evm_payment" and view["tx_hash"] is None
    assert (view["transfers"], view["paid"], view["remaining"]) == ([], "0", "1000")
    assert view["verdict"] == "AWAITING_FINALITY"
    daemon.wait_head(module_anvil.head())  # the daemon has seen the registration's head
    first = pay(module_anvil, 1, to, 600)
    pay(module_anvil, 2, to, 500)

    def counted() -> dict[str, Any] | None:
        view = daemon.settlement(sid)
        return view if len(view["transfers"]) == 2 else None

    partial = wait_for(counted, 20, what="two transfers counted")
    assert (
        partial["paid"] == "1100" and partial["overpaid"] == "100" and partial["remaining"] == "0"
    )
    assert partial["transfers"][0]["tx_hash"] == first
    assert (
        partial["transfers"][0]["value"] == "600" and partial["transfers"][0]["log_index"] is None
    )
    module_anvil.mine(3)
    final = daemon.wait_verdict(sid, "FINALITY_CONFIRMED")
    assert final["transfers"][1]["confirmations"] >= 3
    commit = effect(receiver, sid, "commit")
    assert commit["dependent_state"] == state


def test_a_timeout_with_a_partial_payment_discards_saying_what_was_paid(
    daemon: Daemon, module_anvil: Anvil, receiver: Receiver
) -> None:
    to = module_anvil.accounts[8]
    sid = daemon.post(
        "/v1/settlements",
        body(to, timeout_s=3, dependent_state={"order": 7}, commit_url=receiver.url("/commit")),
    ).json()["settlement_id"]
    daemon.wait_head(module_anvil.head())
    pay(module_anvil, 1, to, 250)
    module_anvil.mine(3)
    wait_for(lambda: daemon.settlement(sid)["paid"] == "250", 20, what="counted")
    done = daemon.wait_verdict(sid, "TIMEOUT_TREATED_AS_FAILURE", timeout=20)
    assert done["paid"] == "250" and done["remaining"] == "750"
    discard = effect(receiver, sid, "discard")
    assert "Paid 250 of 1000 wei" in discard["directive"] and "refund" in discard["directive"]


def test_payments_are_listed_by_kind(daemon: Daemon) -> None:
    sid = daemon.post("/v1/settlements", body(fresh_address(9))).json()["settlement_id"]
    page = daemon.get("/v1/settlements", params={"kind": "evm_payment", "limit": 500}).json()
    assert sid in [item["settlement_id"] for item in page["items"]]
    assert all(item["kind"] == "evm_payment" for item in page["items"])
    txs = daemon.get("/v1/settlements", params={"kind": "evm_tx", "limit": 500}).json()
    assert sid not in [item["settlement_id"] for item in txs["items"]]


def _cli(daemon: Daemon, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "watcher.cli",
            "watch",
            "--kind",
            "evm_payment",
            *args,
            "--api",
            daemon.url,
        ],
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _registered(daemon: Daemon, to: str) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        page = daemon.get("/v1/settlements", params={"kind": "evm_payment", "limit": 500}).json()
        return next((i for i in page["items"] if i["to"] == to.lower()), None)

    return wait_for(found, 20, what=f"a payment to {to}")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            (
                "--to",
                "0x5aaeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
                "--asset",
                "native",
                "--amount",
                "1",
            ),
            "checksum",
        ),
        (("--to", "0x" + "ab" * 20, "--asset", "native"), "--amount"),
        (("--to", "0x" + "ab" * 20, "--asset", "native", "--amount", "1.5"), "--amount"),
    ],
)
def test_cli_watch_refuses_a_bad_payment_with_exit_64(
    daemon: Daemon, args: tuple[str, ...], says: str
) -> None:
    done = daemon.cli("watch", "--kind", "evm_payment", *args)
    assert done.returncode == 64, done.stderr
    assert says in done.stderr


def test_cli_watch_waits_for_a_payment_and_exits_0_once_paid_finally(
    daemon: Daemon, module_anvil: Anvil
) -> None:
    to = module_anvil.accounts[9]
    proc = _cli(daemon, "--to", to, "--asset", "native", "--amount", "700")
    try:
        _registered(daemon, to)
        daemon.wait_head(module_anvil.head())
        pay(module_anvil, 1, to, 700)
        module_anvil.mine(3)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "FINALITY_CONFIRMED" in out and "paid 700 of 700 wei" in err


def test_cli_watch_exits_2_on_a_partial_payment_saying_what_was_paid(
    daemon: Daemon, module_anvil: Anvil
) -> None:
    to = fresh_address(77)
    proc = _cli(daemon, "--to", to, "--asset", "native", "--amount", "700", "--timeout", "3")
    try:
        _registered(daemon, to)
        daemon.wait_head(module_anvil.head())
        pay(module_anvil, 1, to, 300)
        module_anvil.mine(3)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 2, err
    assert "Paid 300 of 700 wei" in out


def test_a_batch_registers_payments_with_their_checks(daemon: Daemon) -> None:
    to = fresh_address(55)
    items = [
        body(to, reference="batch-1"),
        body(to, reference="batch-1"),  # the same payment again, inside the batch
        body(to, amount="7", reference="batch-1"),  # the same reference, another payment
        body(to, amount="0"),
        body(to),
    ]
    answer = daemon.post("/v1/settlements/batch", {"items": items})
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [r["status"] for r in results] == [201, 200, 409, 422, 201]
    first, again, _, bad, fresh = results
    assert first["settlement"]["settlement_id"] == again["settlement"]["settlement_id"]
    assert results[2]["fields"] == ["reference", "amount"] and bad["fields"] == ["amount"]
    assert fresh["settlement"]["kind"] == "evm_payment" and fresh["settlement"]["transfers"] == []
    stored = daemon.settlement(first["settlement"]["settlement_id"])
    assert stored["amount"] == "1000" and stored["reference"] == "batch-1"


def test_cli_shows_a_payment_by_id_and_in_the_listing(daemon: Daemon) -> None:
    to = fresh_address(66)
    sid = daemon.post("/v1/settlements", body(to, amount="42")).json()["settlement_id"]
    one = daemon.cli("settlement", sid)
    assert one.returncode == 0, one.stderr
    assert f"payment to {to}: paid 0 of 42 native" in one.stdout
    listed = daemon.cli("settlements", "--kind", "evm_payment", "--limit", "500")
    assert listed.returncode == 0 and f"{sid}  AWAITING_FINALITY" in listed.stdout


def test_the_python_client_registers_a_payment(daemon: Daemon) -> None:
    to = fresh_address(88)
    with FinalityClient(daemon.url) as client:
        view = client.register_payment("local", to, "native", 10**30, reference="py-1")
        again = client.register_payment("local", to, "native", str(10**30), reference="py-1")
        with pytest.raises(Rejected) as refused:
            client.register_payment("local", to, "native", 0)
    assert view["amount"] == str(10**30) and again["settlement_id"] == view["settlement_id"]
    assert "amount" in refused.value.fields
