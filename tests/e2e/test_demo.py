"""``finality demo``: a newcomer's first try, against a real dev chain (anvil) and daemon."""

from __future__ import annotations

import json

from tests.e2e.helpers import Miner
from tests.support.anvil import Anvil
from tests.support.daemon import Daemon, run_cli


def test_demo_sends_watches_to_finality_and_verifies_the_receipt_offline(
    module_anvil: Anvil, module_daemon: Daemon
) -> None:
    with Miner(module_anvil, interval=0.2):  # make run's anvil mines a block a second
        done = run_cli("demo", "--api", module_daemon.url, "--rpc", module_anvil.url)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert any(line.startswith("demo: sent 1 wei from 0x") for line in lines), done.stderr
    assert any("confirmations" in line for line in lines), done.stderr
    assert any(
        "FINALITY_CONFIRMED: included in block" in line and "3/3 confirmations" in line
        for line in lines
    ), done.stderr
    assert any("verified offline (no daemon): valid, signed by 0x" in line for line in lines)
    assert done.stdout.startswith("FINALITY_CONFIRMED: ")


def test_demo_json_answers_the_settlement_receipt_and_verification(
    module_anvil: Anvil, module_daemon: Daemon
) -> None:
    with Miner(module_anvil, interval=0.2):
        done = run_cli(
            "demo",
            "--api",
            module_daemon.url,
            "--rpc",
            module_anvil.url,
            "--json",
            "--confirmations",
            "2",
        )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    answer = json.loads(done.stdout)
    assert answer["settlement"]["verdict"] == "FINALITY_CONFIRMED"
    assert answer["verification"]["valid"] is True
    assert answer["receipt"]["settlement_id"] == answer["settlement"]["settlement_id"]


def test_demo_without_a_dev_chain_exits_69_naming_its_url(module_daemon: Daemon) -> None:
    done = run_cli("demo", "--api", module_daemon.url, "--rpc", "http://127.0.0.1:9")
    assert done.returncode == 69
    assert "cannot reach the dev chain at http://127.0.0.1:9" in done.stderr
