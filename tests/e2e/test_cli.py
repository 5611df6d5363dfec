"""The ``finality`` CLI as a process, against a real daemon process and a real anvil."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import Miner, unknown_hash
from tests.support.anvil import Anvil, free_port
from tests.support.daemon import CHAIN, Daemon, run_cli, wait_for

pytestmark = pytest.mark.anvil


@pytest.fixture(scope="module")
def anvil(module_anvil: Anvil) -> Anvil:
    return module_anvil


@pytest.fixture(scope="module")
def daemon(module_daemon: Daemon) -> Daemon:
    return module_daemon


def watch_while_mining(
    daemon: Daemon, anvil: Anvil, *args: str, timeout: float = 20.0
) -> subprocess.CompletedProcess[str]:
    """``finality watch ARGS`` while a block is mined every 0.2 s."""
    with Miner(anvil, interval=0.2):
        return daemon.cli("watch", *args, "--interval", "0.1", timeout=timeout)


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


# -- watch ------------------------------------------------------------------------------------


def test_watch_confirmed_exits_0_with_progress(daemon: Daemon, anvil: Anvil) -> None:
    tx = anvil.send()
    block = int(anvil.receipt(tx)["blockNumber"], 16)
    done = watch_while_mining(daemon, anvil, tx, "--confirmations", "2")
    assert done.returncode == 0, done.stderr
    progress = re.findall(
        r"included in block (\d+) \((0x[0-9a-f]{4}…[0-9a-f]{4})\), (\d)/2 confirmations",
        done.stderr,
    )
    assert progress, done.stderr
    assert {int(n) for n, _, _ in progress} == {block}
    assert progress[-1][2] == "2"
    assert "FINALITY_CONFIRMED" in done.stdout


def test_watch_reverted_exits_1(daemon: Daemon, anvil: Anvil) -> None:
    tx = anvil.send_revert()
    assert anvil.receipt(tx)["status"] == "0x0"
    done = watch_while_mining(daemon, anvil, tx)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "SETTLEMENT_FAILED" in done.stdout


def test_watch_unknown_tx_times_out_with_2(daemon: Daemon) -> None:
    done = daemon.cli("watch", unknown_hash(10), "--timeout", "1", "--interval", "0.1")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "TIMEOUT_TREATED_AS_FAILURE" in done.stdout


def test_watch_json_prints_the_final_view(daemon: Daemon, anvil: Anvil) -> None:
    tx = anvil.send()
    done = watch_while_mining(daemon, anvil, tx, "--confirmations", "1", "--json")
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    assert view["verdict"] == "FINALITY_CONFIRMED"
    assert view["tx_hash"] == tx


# -- status -----------------------------------------------------------------------------------


def test_status_human_and_json(daemon: Daemon, anvil: Anvil) -> None:
    tx = anvil.send()
    block = int(anvil.receipt(tx)["blockNumber"], 16)
    anvil.mine(4)
    human = daemon.cli("status", tx)
    assert human.returncode == 0, human.stderr
    line = one_line(human.stdout)
    assert line.startswith("FINALITY_CONFIRMED")
    assert CHAIN in line and tx in line
    assert f"included in block {block}" in line

    machine = daemon.cli("status", tx, "--json", "--chain", CHAIN)
    assert machine.returncode == 0, machine.stderr
    view = json.loads(machine.stdout)
    assert view["tx_hash"] == tx
    assert view["verdict"] == "FINALITY_CONFIRMED"
    assert view["block_number"] == block
    assert view["required_confirmations"] == 3
    assert view["confirmations"] >= 5

    deeper = daemon.cli("status", tx, "--json", "--confirmations", "100")
    assert json.loads(deeper.stdout)["verdict"] == "AWAITING_FINALITY"

    unknown = daemon.cli("status", unknown_hash(11))
    assert unknown.returncode == 0, unknown.stderr
    assert unknown.stdout.startswith("NO_SETTLEMENT")


# -- bad input and unreachable daemon ---------------------------------------------------------


@pytest.mark.parametrize("command", ["status", "watch"])
@pytest.mark.parametrize("bad", ["0x12", "not-a-hash", "ab" * 32, "0x" + "z" * 64])
def test_malformed_hash_exits_64_naming_tx_hash(daemon: Daemon, command: str, bad: str) -> None:
    done = daemon.cli(command, bad)
    assert done.returncode == 64, (done.stdout, done.stderr)
    assert "tx_hash" in one_line(done.stderr)
    assert done.stdout == ""


def test_unknown_chain_exits_64(daemon: Daemon) -> None:
    for command in ("status", "watch"):
        done = daemon.cli(command, unknown_hash(12), "--chain", "nope")
        assert done.returncode == 64, (done.stdout, done.stderr)
        line = one_line(done.stderr)
        assert "nope" in line and "local" in line
    assert daemon.get(f"/v1/chains/local/txs/{unknown_hash(12)}").json()["registered"] is False


def test_bad_option_values_exit_64(daemon: Daemon) -> None:
    for args in (
        ("watch", unknown_hash(13), "--confirmations", "0"),
        ("watch", unknown_hash(13), "--timeout", "-1"),
        ("watch", unknown_hash(13), "--timeout", "nan"),
        ("watch", unknown_hash(13), "--timeout", "inf"),
        ("status", unknown_hash(13), "--confirmations", "abc"),
    ):
        done = daemon.cli(*args)
        assert done.returncode == 64, (args, done.stderr)
        assert "finality:" in done.stderr


def test_daemon_not_running_exits_69() -> None:
    api = f"http://127.0.0.1:{free_port()}"
    for args in (
        ("status", unknown_hash(14)),
        ("watch", unknown_hash(14)),
        ("chains",),
        ("reorgs",),
    ):
        # One command in a plain interpreter (the rest fork from the zygote, as every CLI
        # call of the suite): the exit code is the process's own either way.
        done = run_cli(*args, "--api", api, fresh=args[0] == "status")
        assert done.returncode == 69, (args, done.stdout, done.stderr)
        assert "cannot reach" in one_line(done.stderr)


# -- chains and reorgs ------------------------------------------------------------------------


def test_chains_prints_the_chain(daemon: Daemon) -> None:
    done = daemon.cli("chains")
    assert done.returncode == 0, done.stderr
    line = one_line(done.stdout)
    assert line.startswith("local")
    assert "31337" in line and "N=3" in line and "healthy" in line
    data = json.loads(daemon.cli("chains", "--json").stdout)
    assert [c["name"] for c in data] == ["local"]


def test_chains_via_config_file(daemon: Daemon) -> None:
    done = run_cli("chains", "--config", str(daemon.config_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("local")


def test_reorgs_prints_a_seen_reorg(daemon: Daemon, anvil: Anvil) -> None:
    before = daemon.cli("reorgs", "--json")
    assert before.returncode == 0, before.stderr
    seen = {r["id"] for r in json.loads(before.stdout)}
    anvil.mine(3)
    top = anvil.block()
    daemon.wait_head(int(top["number"], 16), top["hash"])
    ancestor = int(top["number"], 16) - 2
    anvil.reorg(2)

    def listed() -> list[dict[str, Any]]:
        return [r for r in daemon.get("/v1/reorgs").json() if r["id"] not in seen]

    wait_for(listed, 30, what="the reorg listed")  # as wait_head: a loaded machine
    done = daemon.cli("reorgs")
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert f"local: depth 2 at ancestor {ancestor}" in first, done.stdout
    assert daemon.cli("reorgs", "--chain", "nope").returncode == 64


# -- run: configuration errors ----------------------------------------------------------------


# A throwaway key (anvil's first dev account): a non-local chain id needs a configured key,
# and the chain-id check must be what fails, not the key.
TEST_SIGNING_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"


def run_daemon(
    config: Path, timeout: float = 60.0, env: dict[str, str] | None = None, fresh: bool = False
) -> subprocess.CompletedProcess[str]:
    """``finality run --config CONFIG`` until it exits (forked from the zygote, or in a plain
    interpreter with ``fresh``)."""
    return run_cli("run", "--config", str(config), timeout=timeout, env=env, fresh=fresh)


def test_run_with_typo_in_config_exits_78(tmp_path: Path, anvil: Anvil) -> None:
    config = Daemon(tmp_path, anvil.url, start=False, confirmation=3)
    done = run_daemon(config.config_path, fresh=True)  # one start in a plain interpreter
    config.close()
    assert done.returncode == 78, done.stderr
    assert "chains[0].confirmation: unknown key" in done.stderr
    assert "'confirmations'" in done.stderr
    assert not config.db_path.exists()


def test_run_with_missing_config_exits_78(tmp_path: Path) -> None:
    done = run_daemon(tmp_path / "nowhere.toml")
    assert done.returncode == 78, done.stderr
    assert "nowhere.toml" in done.stderr


def test_run_with_wrong_chain_id_exits_78(tmp_path: Path, anvil: Anvil) -> None:
    config = Daemon(tmp_path, anvil.url, start=False, chain_id=1)
    done = run_daemon(config.config_path, env={"FINALITY_SIGNING_KEY": TEST_SIGNING_KEY})
    config.close()
    assert done.returncode == 78, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "chain id" in last and "31337" in last and re.search(r"\b1\b", last), last


def test_run_without_a_signing_key_on_a_public_chain_exits_78(tmp_path: Path, anvil: Anvil) -> None:
    config = Daemon(tmp_path, anvil.url, start=False, chain_id=1)
    done = run_daemon(config.config_path)
    config.close()
    assert done.returncode == 78, done.stderr
    assert "signing" in done.stderr.strip().splitlines()[-1], done.stderr
