"""Safe outbound calls: a ``commit_url`` the daemon must not POST to is refused at
registration with a 422 naming it and the reason (nothing stored), loopback only where every
chain is a dev chain or the allow-list names it, a delivery's answer body is never shown,
and an alert URL with credentials is a config error that does not print them. Daemons as
processes, a real anvil, a real receiver."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import unknown_hash
from tests.support.anvil import Anvil
from tests.support.daemon import Daemon, run_cli, wait_for
from tests.support.faulty_proxy import FaultyProxy
from tests.support.receiver import Receiver

REFUSED = [
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://10.0.0.1:6379/", "private"),
    ("http://[fd00::1]/", "private"),
    ("http://0.0.0.0/", "unspecified"),
    ("http://[::ffff:169.254.169.254]/", "link-local"),
    ("http://user:pw@example.com/", "credentials"),
    # IANA special-purpose blocks that are not globally reachable, beyond "private"
    ("http://192.0.0.8/", "IETF protocol assignments"),
    ("http://198.18.0.1/", "benchmarking"),
    ("http://100.64.0.1/", "shared address space"),
    ("http://240.0.0.1/", "reserved"),
    ("http://[64:ff9b::c000:8]/", "IETF protocol assignments"),  # NAT64 of 192.0.0.8
    ("http://[2001::1]/", "Teredo"),
]

MALFORMED = [
    ("http://example.com/a\r\nX-Injected: 1", "control character"),
    ("http://example.com/a\nb", "control character"),
    ("http://example.com/\u0000", "control character"),
    ("http://example.com/" + "a" * 65_536, "longer than 65536 bytes"),
]


def test_inner_destinations_are_refused_at_registration(
    module_daemon: Daemon,
) -> None:
    for i, (url, reason) in enumerate(REFUSED):
        tx = unknown_hash(9000 + i)
        answer = module_daemon.post(
            "/v1/settlements", {"chain": "local", "tx_hash": tx, "commit_url": url}
        )
        assert answer.status_code == 422, (url, answer.text)
        body = answer.json()
        assert body["fields"] == ["commit_url"]
        assert body["error"].startswith("commit_url: ") and reason in body["error"], body
        assert "pw" not in body["error"]
        assert module_daemon.get(f"/v1/chains/local/txs/{tx}").json().get("registered") is not True


@pytest.mark.parametrize("kind", ["settlement", "payment"])
def test_a_commit_url_that_cannot_be_a_request_line_is_a_422(
    module_daemon: Daemon, kind: str
) -> None:
    for i, (url, reason) in enumerate(MALFORMED):
        body: dict[str, Any] = {"chain": "local", "tx_hash": unknown_hash(9200 + i)}
        if kind == "payment":
            body = {
                "kind": "evm_payment",
                "chain": "local",
                "to": "0x" + "11" * 20,
                "asset": "native",
                "amount": "1",
            }
        answer = module_daemon.post("/v1/settlements", {**body, "commit_url": url})
        assert answer.status_code == 422, (kind, url[:60], answer.text[:300])
        error = answer.json()
        assert error["fields"] == ["commit_url"], error
        assert reason in error["error"], error


def test_a_loopback_receiver_is_fine_on_a_dev_chain(module_daemon: Daemon) -> None:
    answer = module_daemon.post(
        "/v1/settlements",
        {"chain": "local", "tx_hash": unknown_hash(9100), "commit_url": "http://127.0.0.1:9/x"},
    )
    assert answer.status_code == 201, answer.text


def test_a_name_resolving_to_loopback_needs_the_allow_list_on_a_real_chain(
    anvil: Anvil, make_daemon: Callable[..., Daemon], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FINALITY_SIGNING_KEY", "0x" + "42" * 32)  # not a dev chain: a key
    proxy = FaultyProxy(anvil.url)
    proxy.chain_id = 1  # the node answers for mainnet
    try:
        strict = make_daemon(anvil.url, rpc=[proxy.url], chain_id=1)
        listed = make_daemon(
            anvil.url,
            rpc=[proxy.url],
            chain_id=1,
            extra_config='\n[delivery]\nallow_destinations = ["localhost"]\n',
        )
        body = {"chain": "local", "tx_hash": unknown_hash(9200)}
        refused = strict.post("/v1/settlements", {**body, "commit_url": "http://localhost:9/c"})
        assert refused.status_code == 422, refused.text
        assert "loopback" in refused.json()["error"]
        assert "127.0.0.1" not in refused.json()["error"]  # no resolution details
        ip = strict.post("/v1/settlements", {**body, "commit_url": "http://127.0.0.1:9/c"})
        assert ip.status_code == 422
        allowed = listed.post("/v1/settlements", {**body, "commit_url": "http://localhost:9/c"})
        assert allowed.status_code == 201, allowed.text
    finally:
        proxy.close()


def test_a_delivery_shows_the_status_and_never_the_answer_body(
    anvil: Anvil, make_daemon: Callable[..., Daemon]
) -> None:
    with Receiver() as receiver:
        receiver.fail_with = 500  # answers {"error": "told to fail"}
        daemon = make_daemon(
            anvil.url, extra_config="\n[delivery]\nmax_attempts = 1\nbackoff_initial_s = 0.1\n"
        )
        tx = anvil.send()
        view = daemon.register(tx, commit_url=receiver.url("/commit"), dependent_state={"a": 1})
        anvil.mine(3)
        sid = view["settlement_id"]

        def dead() -> list[dict[str, object]]:
            rows = daemon.get("/v1/deliveries", params={"settlement_id": sid}).json()
            return [r for r in rows if r["state"] == "dead"]

        [row] = wait_for(dead, 30, what="the commit dead")
    assert (row["last_status"], row["last_error"]) == (500, "HTTP 500")
    full = daemon.get(f"/v1/deliveries/{row['id']}").text
    cli = daemon.cli("deliveries", "--state", "dead", "--json")
    assert cli.returncode == 0 and sid in cli.stdout, cli.stderr
    listed = cli.stdout
    for shown in (str(row), full, listed):
        assert "told to fail" not in shown


def test_an_alert_url_with_credentials_is_a_config_error_that_hides_them(
    anvil: Anvil, tmp_path: Path
) -> None:
    extra = '\n[[alerts]]\ntype = "webhook"\nurl = "http://ops:HUNTER2pass@127.0.0.1:9/a"\n'
    daemon = Daemon(tmp_path, anvil.url, start=False, extra_config=extra)
    done = run_cli("run", "--config", str(daemon.config_path))
    assert done.returncode == 78, done.stderr
    assert "alerts[0].url" in done.stderr and "credentials" in done.stderr
    assert "HUNTER2pass" not in done.stdout + done.stderr
