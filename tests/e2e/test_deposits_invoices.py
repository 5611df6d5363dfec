"""Deposits and invoices through the daemon as a process, on a real anvil: the HTTP API,
the CLI (``finality subscriptions``, ``finality deposits``, ``finality invoice``), the
client, the MCP tools; a deposit's commit delivered once to its commit_url; a late invoice
payment accepted by the operator; an extended private key in the config refused (exit 78)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from guard.verify import verify_receipt
from tests.e2e.test_mcp import connect, result
from tests.integration.test_invoices_engine import XPUB
from tests.support.anvil import Anvil
from tests.support.daemon import CHAIN, Daemon, run_cli, wait_for
from tests.support.erc20 import deploy_token
from tests.support.receiver import Receiver
from watcher.client import FinalityClient

pytestmark = pytest.mark.anvil

SECRET = "whsec_" + base64.b64encode(b"deposits_invoices-e2e-secret-24-bytes").decode()
DELIVERY = {"backoff_initial_s": 0.2, "backoff_max_s": 0.5, "timeout_s": 2.0, "receipt_wait_s": 1.0}
XPRV = (
    "xprvA2JDeKCSNNZky6uBCviVfJSKyQ1mDYahRjijr5idH2WwLsEd4Hsb2Tyh8RfQMuPh7f7RtyzTtdrbdqqsunu5Mm3"
    "wDvUAKRHSC34sJ7in334"
)


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with Receiver(SECRET) as r:
        yield r


@pytest.fixture(scope="module")
def daemon(
    module_anvil: Anvil, receiver: Receiver, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Daemon]:
    d = Daemon(
        tmp_path_factory.mktemp("deposits"),
        module_anvil.url,
        start=False,
        extra_config=f'\n[payments]\nxpub = "{XPUB}"\n',
    )
    d.config_path.write_text(
        d.config_path.read_text() + receiver.daemon_config(SECRET, [], **DELIVERY)
    )
    d.start()
    yield d
    d.close()


def cli(daemon: Daemon, *args: str) -> Any:
    done = run_cli(*args, "--api", daemon.url, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def pay(anvil: Anvil, sender: int, to: str, value: int) -> str:
    tx = {"from": anvil.accounts[sender], "to": to, "value": hex(value)}
    tx_hash = str(anvil.rpc("eth_sendTransaction", tx))
    anvil.receipt(tx_hash)
    return tx_hash


def receipt_of(daemon: Daemon, settlement_id: str) -> dict[str, Any] | None:
    answer = daemon.get(f"/v1/settlements/{settlement_id}/receipt")
    return answer.json() if answer.status_code == 200 else None


def effects_of(receiver: Receiver, settlement_id: str) -> list[dict[str, Any]] | None:
    return [b for b in receiver.effects() if b.get("settlement_id") == settlement_id] or None


def fresh(tag: int) -> str:
    return "0x" + f"{0xD0000 + tag:040x}"


def test_a_subscription_sees_deposits_and_commits_each_once(
    daemon: Daemon, module_anvil: Anvil, receiver: Receiver
) -> None:
    token = deploy_token(module_anvil)
    token.mint(module_anvil.accounts[1], 10**9)
    addresses = [fresh(i) for i in range(50)]
    with FinalityClient(daemon.url) as client:
        sub = client.subscribe(
            CHAIN, addresses, ["native", token.address], commit_url=receiver.url("/commit")
        )
    sid = sub["subscription_id"]
    assert sub["addresses"] == 50 and sub["active"] is True
    daemon.wait_head(module_anvil.head())
    native = pay(module_anvil, 1, addresses[4], 5_000)
    token.transfer(1, addresses[40], 70)
    module_anvil.mine(3)

    def both_final() -> bool:
        # Waited for over the API (a request, not a CLI process, per check), then read once
        # with the CLI, which asks the same route.
        path = f"/v1/subscriptions/{sid}/deposits"
        page = daemon.get(path, params={"verdict": "FINALITY_CONFIRMED"}).json()
        return len(page["items"]) == 2

    wait_for(both_final, 30, what="two final deposits")
    items = cli(daemon, "deposits", sid, "--verdict", "FINALITY_CONFIRMED")["items"]
    assert len(items) == 2, items
    by_amount = {d["amount"]: d for d in items}
    assert by_amount["5000"]["tx_hash"] == native and by_amount["5000"]["asset"] == "native"
    assert by_amount["70"]["asset"] == token.address.lower()
    assert by_amount["70"]["log_index"] is not None
    listed = daemon.get("/v1/settlements", params={"kind": "evm_deposit"}).json()["items"]
    assert {d["settlement_id"] for d in items} <= {d["settlement_id"] for d in listed}
    for deposit in items:
        did = deposit["settlement_id"]
        receipt = wait_for(partial(receipt_of, daemon, did), 20, what="its receipt")
        verify_receipt(receipt)
        assert receipt["payment"]["transfers"][0]["value"] == deposit["amount"]
        commits = wait_for(partial(effects_of, receiver, did), 20, what="its commit")
        assert [c["type"] for c in commits] == ["commit"]
        # The commit carries the deposit's decision (deposit_confirmed names only its digest).
        assert commits[0]["decision"]["verdict"] == "FINALITY_CONFIRMED"
        assert commits[0]["decision"]["evidence"]["facts"]["amount"] == deposit["amount"]
        assert commits[0]["receipt"] is not None
    gone = cli(daemon, "subscriptions", "delete", sid)
    assert gone["active"] is False


def test_bad_subscription_input_is_refused_naming_the_field(daemon: Daemon) -> None:
    answer = daemon.post(
        "/v1/subscriptions", {"chain": CHAIN, "addresses": ["0x12"], "assets": ["native"]}
    )
    assert answer.status_code == 422 and "addresses" in answer.text
    answer = daemon.post(
        "/v1/subscriptions", {"chain": CHAIN, "addresses": [fresh(1)], "assets": ["ether"]}
    )
    assert answer.status_code == 422 and "assets" in answer.text
    done = run_cli(
        "subscriptions", "create", "--asset", "native", "--address", "0xzz", "--api", daemon.url
    )
    assert done.returncode == 64 and "--address" in done.stderr
    assert daemon.get("/v1/subscriptions/sub_nope/deposits").status_code == 404


def test_an_invoice_by_cli_paid_then_settled(daemon: Daemon, module_anvil: Anvil) -> None:
    created = cli(
        daemon, "invoice", "create", "--asset", "native", "--amount", "1000", "--expires-in", "600"
    )
    assert created["state"] == "new" and created["payment_uri"].startswith("ethereum:0x")
    assert created["payment_uri"].endswith("@31337?value=1000")
    daemon.wait_head(module_anvil.head())
    pay(module_anvil, 1, created["address"], 1000)
    module_anvil.mine(3)
    path = f"/v1/invoices/{created['invoice_id']}"
    wait_for(lambda: daemon.get(path).json()["state"] == "settled", 30, what="a settled invoice")
    shown = cli(daemon, "invoice", "show", created["invoice_id"])  # the same route, once
    assert shown["state"] == "settled"
    assert shown["verdict"] == "FINALITY_CONFIRMED" and shown["paid"] == "1000"


def test_a_late_payment_is_paid_late_until_accepted(daemon: Daemon, module_anvil: Anvil) -> None:
    with FinalityClient(daemon.url) as client:
        inv = client.create_invoice(CHAIN, "native", 300, 1.0)
        iid = inv["invoice_id"]
        wait_for(lambda: client.invoice(iid)["state"] == "expired", 30, what="expired")
        refused = daemon.post(f"/v1/invoices/{iid}/accept", {})
        assert refused.status_code == 409 and "paid_late" in refused.text
        pay(module_anvil, 1, inv["address"], 300)
        module_anvil.mine(3)
        wait_for(lambda: client.invoice(iid)["state"] == "paid_late", 30, what="paid_late")
        assert client.accept_invoice(iid)["state"] == "settled"
        assert client.invoice(iid)["accepted"] is True


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_an_agent_creates_and_reads_an_invoice_over_mcp(daemon: Daemon) -> None:
    async with connect("stdio", daemon, None) as mcp:
        names = {tool.name for tool in (await mcp.list_tools()).tools}
        assert {"create_invoice", "get_invoice"} <= names
        made = result(
            await mcp.call_tool(
                "create_invoice",
                {"chain": CHAIN, "asset": "native", "amount": "42", "expires_in_s": 600},
            )
        )
        got = result(await mcp.call_tool("get_invoice", {"invoice_id": made["invoice_id"]}))
        assert got["address"] == made["address"] and got["state"] == "new"


def test_an_extended_private_key_in_the_config_is_refused(
    module_anvil: Anvil, tmp_path: Path
) -> None:
    d = Daemon(
        tmp_path, module_anvil.url, start=False, extra_config=f'\n[payments]\nxpub = "{XPRV}"\n'
    )
    done = run_cli("run", "--config", str(d.config_path), timeout=60)
    assert done.returncode == 78, done.stderr
    assert "payments.xpub" in done.stderr and "private key" in done.stderr
    assert XPRV not in done.stderr + done.stdout
