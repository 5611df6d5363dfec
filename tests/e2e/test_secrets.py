"""Secrets never leave: credentials planted in every configured URL appear in no
output channel of the daemon.

Every URL of the config carries a marker (``SECRETMARK…``) in its userinfo, path and query
(alert URLs in path and query only: credentials in an alert URL are refused at load, see
tests/e2e/test_ssrf.py): two HTTP RPC endpoints (fault proxies in front of a real anvil, one
of them failing), a WebSocket heads URL (whose secret path the node refuses: a failing
subscription), the PostgreSQL store URL's password, a Stripe source's ``api_base`` and key,
an RQ source's Redis password, a webhook and a Slack alert URL. The daemon runs as a process
through endpoint faults, a whole-chain outage and a reorg, with alerts going to a real
receiver; then every channel is read: every API answer (``/openapi.json`` and ``/metrics``
included), every stored event, every alert body received, the daemon's log, the CLI's
output, and the start-up error of a daemon whose node serves another chain.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.anvil import Anvil, free_port
from tests.support.daemon import Daemon, run_cli, toml_value, wait_for
from tests.support.faulty_proxy import FaultyProxy
from tests.support.receiver import Receiver

MARK = "SECRETMARK"
"""Every planted secret contains this; no output may."""


def keyed(base: str, tag: str) -> str:
    """``base`` (``scheme://host:port``) with a marker in userinfo, path and query."""
    scheme, rest = base.split("://", 1)
    return (
        f"{scheme}://{MARK}user{tag}:{MARK}pass{tag}@{rest}/v2/{MARK}path{tag}"
        f"?apikey={MARK}query{tag}"
    )


def path_keyed(url: str, tag: str) -> str:
    """An alert URL: markers in path and query (userinfo is refused for alerts)."""
    return f"{url.rstrip('/')}/{MARK}path{tag}?token={MARK}query{tag}"


def leaks(text: str) -> list[str]:
    """Each planted secret found in ``text``, with a little context."""
    return [text[max(0, m.start() - 60) : m.end() + 20] for m in re.finditer(MARK, text)]


def extra_config(receiver: Receiver, pg_url: str) -> str:
    """Alerts to the receiver (webhook and Slack) and two sources, all keyed."""
    dead = f"http://127.0.0.1:{free_port()}"
    return "\n".join(
        [
            "",
            "[delivery]",
            "max_attempts = 2",
            "backoff_initial_s = 0.2",
            "",
            "[[alerts]]",
            'type = "webhook"',
            f"url = {toml_value(path_keyed(receiver.url('/alerts'), 'hook'))}",
            "",
            "[[alerts]]",
            'type = "slack"',
            f"url = {toml_value(path_keyed(receiver.url('/slack'), 'slack'))}",
            "",
            "[[sources]]",
            'name = "stripe"',
            'kind = "stripe_payment_intent"',
            f'api_key = "sk_test_{MARK}stripekey"',
            f"api_base = {toml_value(keyed(dead, 'stripe'))}",
            "",
            "[[sources]]",
            'name = "jobs"',
            'kind = "rq_job"',
            f'redis_url = "redis://:{MARK}redis@127.0.0.1:6379/0"',
            "",
        ]
    )


def pg_keyed(pg_url: str) -> str:
    """The store URL with a password (the server trusts loopback, so it is not checked)."""
    return pg_url.replace("postgresql://postgres@", f"postgresql://postgres:{MARK}pgpass@", 1)


def api_answers(daemon: Daemon) -> dict[str, str]:
    """Every read route's answer, by path (settlements, events and deliveries one by one)."""
    paths = [
        "/healthz",
        "/metrics",
        "/openapi.json",
        "/v1/chains",
        "/v1/reorgs",
        "/v1/events?limit=1000",
        "/v1/settlements",
        "/v1/deliveries?limit=1000",
        "/v1/handoffs",
        "/v1/leases",
        "/v1/signers",
    ]
    found = {path: daemon.get(path).text for path in paths}
    for row in json.loads(found["/v1/deliveries?limit=1000"]):
        found[f"/v1/deliveries/{row['id']}"] = daemon.get(f"/v1/deliveries/{row['id']}").text
    settlements = json.loads(found["/v1/settlements"])
    for item in settlements.get("items", settlements if isinstance(settlements, list) else []):
        sid = item["settlement_id"]
        for tail in ("", "/receipt", "/receipts", "/events"):
            found[f"/v1/settlements/{sid}{tail}"] = daemon.get(f"/v1/settlements/{sid}{tail}").text
    missing = f"/v1/chains/local/txs/0x{'ab' * 32}"
    found[missing] = daemon.get(missing).text  # a live lookup (fails while the node is down)
    return found


def cli_outputs(daemon: Daemon, tx: str, only: tuple[str, ...] = ()) -> dict[str, str]:
    """What the query commands print (``only`` these commands, if given)."""
    outputs: dict[str, str] = {}
    for args in (
        ("chains",),
        ("chains", "--json"),
        ("reorgs",),
        ("status", tx),
        ("status", tx, "--json"),
        ("settlements",),
        ("deliveries",),
        ("handoffs",),
    ):
        if only and args[0] not in only:
            continue
        done = daemon.cli(*args)
        outputs[" ".join(args)] = done.stdout + done.stderr
    return outputs


@pytest.mark.timeout(400)
def test_no_output_channel_shows_a_configured_secret(
    anvil: Anvil, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy_a, proxy_b = FaultyProxy(anvil.url), FaultyProxy(anvil.url)
    with Receiver() as receiver:
        try:
            daemon = Daemon(
                tmp_path / "d",
                anvil.url,
                start=False,
                store_url=pg_keyed(pg_url),
                extra_config=extra_config(receiver, pg_url),
                rpc=[keyed(proxy_a.url, "a"), keyed(proxy_b.url, "b")],
                heads="ws",
                heads_url=keyed(f"ws://127.0.0.1:{anvil.port}", "ws"),
                poll_interval_s=0.2,
            )
            daemon.start()
            outputs = _exercise(daemon, anvil, proxy_a, proxy_b, receiver)
        finally:
            daemon.close()
            proxy_a.close()
            proxy_b.close()
    outputs["daemon log"] = daemon.log()
    outputs["start-up error"] = _start_up_error(anvil, tmp_path / "wrong", pg_url)
    found = {channel: leaks(text) for channel, text in outputs.items() if leaks(text)}
    assert not found, json.dumps(found, indent=1)


def _exercise(
    daemon: Daemon, anvil: Anvil, proxy_a: FaultyProxy, proxy_b: FaultyProxy, receiver: Receiver
) -> dict[str, str]:
    """Faults, a reorg and alerts; returns every answer read while the node was down and
    after, by channel."""
    outputs: dict[str, str] = {}
    tx = anvil.send()
    commit_url = receiver.url("/commit") + f"?mine={MARK}callerown"
    view = daemon.register(tx, commit_url=commit_url, dependent_state={"order": 1})
    # A caller's own commit_url is shown back to that caller as given.
    assert daemon.settlement(view["settlement_id"])["commit_url"] == commit_url
    commit_url_owned = commit_url  # not a leak: checked above, then left out of the grep

    for kind, ref in (("stripe_payment_intent", "pi_secretstest1"), ("rq_job", "job-1")):
        answer = daemon.post("/v1/settlements", {"kind": kind, "ref": ref})  # sources poll
        assert answer.status_code in (200, 201), answer.text
    wait_for(lambda: "source stripe: poll failed" in daemon.log(), 30, what="Stripe failing")
    proxy_a.http_500 = True  # one endpoint fails: its circuit opens, rpc_unhealthy (warning)
    wait_for(lambda: _event(daemon, "rpc_unhealthy"), 30, what="an endpoint's rpc_unhealthy")
    proxy_b.drop = True  # then the whole chain: polls fail, the chain's rpc_unhealthy
    wait_for(lambda: not daemon.get("/healthz").is_success, 30, what="the chain unhealthy")
    wait_for(lambda: _event(daemon, "rpc_unhealthy", "critical"), 30, what="chain unhealthy")
    outputs |= {f"{p} (down)": t for p, t in api_answers(daemon).items()}
    down = cli_outputs(daemon, tx, only=("chains", "status"))  # the error texts show here
    outputs |= {f"cli {c} (down)": t for c, t in down.items()}
    proxy_a.clear()
    proxy_b.clear()
    wait_for(lambda: daemon.get("/healthz").is_success, 30, what="the chain healthy again")

    anvil.mine(1)
    daemon.wait_head(anvil.head())
    anvil.reorg(2)  # the tx is erased: a reorg alert and the settlement's reorg
    wait_for(lambda: _alert_kinds(receiver) >= {"reorg"}, 30, what="the reorg alert")
    wait_for(lambda: _sent_to(receiver, "/slack"), 30, what="a Slack alert")
    outputs |= api_answers(daemon)
    outputs |= {f"cli {c}": t for c, t in cli_outputs(daemon, tx).items()}
    for i, request in enumerate(receiver.received()):
        text = request.body.decode(errors="replace")
        outputs[f"request {i} to {request.path.split('?')[0][:8]}"] = text.replace(
            commit_url_owned, "<the caller's own commit_url>"
        )
    return {
        channel: text.replace(commit_url_owned, "<the caller's own commit_url>")
        for channel, text in outputs.items()
    }


def _alert_kinds(receiver: Receiver) -> set[str]:
    """Kinds of the webhook alerts received (at the keyed path)."""
    return {
        str(r.json.get("kind"))
        for r in receiver.received()
        if r.path.startswith("/alerts/") and isinstance(r.json, dict)
    }


def _sent_to(receiver: Receiver, prefix: str) -> bool:
    return any(r.path.startswith(prefix) for r in receiver.received())


def _event(daemon: Daemon, kind: str, severity: str | None = None) -> bool:
    events = daemon.get("/v1/events?limit=1000").json()
    return any(
        e.get("kind") == kind and (severity is None or e.get("severity") == severity)
        for e in (events if isinstance(events, list) else events.get("items", []))
    )


def _start_up_error(anvil: Anvil, where: Path, pg_url: str) -> str:
    """The start-up refusal of a daemon whose only endpoint serves another chain id."""
    proxy = FaultyProxy(anvil.url)
    proxy.chain_id = 5
    try:
        daemon = Daemon(
            where, anvil.url, start=False, store_url=pg_keyed(pg_url), rpc=[keyed(proxy.url, "c")]
        )
        done = run_cli("run", "--config", str(daemon.config_path), timeout=60)
    finally:
        proxy.close()
    assert done.returncode != 0
    assert "chain id" in done.stderr, done.stderr
    return done.stdout + done.stderr
