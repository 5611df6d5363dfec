"""``finality init`` writes a config a daemon starts from, and ``finality completion``
prints scripts a real shell loads.

The init test runs the CLI as a process in an empty directory, starts ``finality run
--config`` on what it wrote against a real anvil, and registers a tx with the daemon it
started. A registry chain's config loads once its RPC variable is set, and an existing file
is never overwritten.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.anvil import ROOT, Anvil, free_port
from tests.support.daemon import START_TIMEOUT_S, run_cli, subprocess_env, wait_for
from watcher.cli.init_config import config_text
from watcher.config.loading import load_config

pytestmark = pytest.mark.anvil


def test_init_writes_a_config_the_daemon_starts_from(module_anvil: Anvil, tmp_path: Path) -> None:
    listen = f"127.0.0.1:{free_port()}"
    made = run_cli("init", "--rpc", module_anvil.url, "--listen", listen, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    config = tmp_path / "finality.toml"
    assert "finality run --config finality.toml" in made.stdout
    assert config.read_text().count("\n#") > 10, "the config should explain its keys"

    daemon = subprocess.Popen(
        [sys.executable, "-m", "watcher.cli", "run", "--config", str(config)],
        cwd=tmp_path,
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://{listen}"

        def healthy() -> bool:
            try:
                return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return daemon.poll() is not None  # died: stop waiting, the assert says why

        wait_for(healthy, START_TIMEOUT_S, 0.2, "the daemon from init's config")
        assert daemon.poll() is None, daemon.stderr.read() if daemon.stderr else ""
        tx = module_anvil.send()
        answer = httpx.post(f"{url}/v1/settlements", json={"chain": "local", "tx_hash": tx})
        assert answer.status_code == 201, answer.text
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)

    again = run_cli("init", "--chain", "ethereum", cwd=tmp_path)
    assert again.returncode == 64
    assert again.stderr.strip() == (
        "finality: init: finality.toml exists; not overwritten (choose another --output)"
    )
    assert "chain_id = 31337" in config.read_text()  # untouched


def test_a_registry_chain_config_loads_with_its_variable_and_tokens_beyond_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = config_text("base", "base.toml", listen="0.0.0.0:8710")
    path = tmp_path / "base.toml"
    path.write_text(text)
    monkeypatch.setenv("BASE_RPC_URL", "https://base.example.org/v2/key")
    monkeypatch.setenv("FINALITY_BACKEND_TOKEN", "t" * 32)
    config = load_config(path)
    assert [(c.name, c.chain_id, c.rpc) for c in config.chains] == [
        ("base", 8453, ["https://base.example.org/v2/key"])
    ]
    assert [t.name for t in config.api.tokens] == ["backend"]
    assert "${FINALITY_BACKEND_TOKEN}" in text and "${BASE_RPC_URL}" in text
    bad = run_cli("init", "--chain", "nowhere", cwd=tmp_path)
    assert bad.returncode == 64 and "--chain: unknown chain 'nowhere'" in bad.stderr
    assert not (tmp_path / "finality.toml").exists()


def test_the_bash_completion_loads_and_completes_commands_and_flags() -> None:
    script = (
        "source <(python -m watcher.cli completion bash) && complete -p finality"
        " && COMP_WORDS=(finality ini) COMP_CWORD=1 && _finality && echo ${COMPREPLY[@]}"
        " && COMP_WORDS=(finality init --ch) COMP_CWORD=2 && _finality && echo ${COMPREPLY[@]}"
    )
    env = {
        **subprocess_env(),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    done = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "complete -o default -F _finality finality",
        "init",
        "--chain",
    ]
