"""Callers authenticate: a daemon process with ``[[api.tokens]]`` (one from the
environment, one as a sha256 digest, one literal), probed over real HTTP as a stranger, a
careless caller and a browser would; and the checks that hold without tokens too (foreign
``Host``, form posts). Every answer and the daemon's log are searched for the tokens."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.anvil import Anvil
from tests.support.daemon import CHAIN, Daemon, run_cli
from watcher.client import AsyncFinalityClient, FinalityClient, Rejected

pytestmark = pytest.mark.anvil

BACKEND = "fw-backend-" + secrets.token_hex(16)
"""read + register, configured as ``token = "${FINALITY_TEST_BACKEND_TOKEN}"``."""
REGISTRAR = "fw-registrar-" + secrets.token_hex(16)
"""register only, configured by its sha256: the config file holds no secret."""
OPS = "fw-ops-" + secrets.token_hex(16)
"""admin only, written literally in the file."""
WRONG = "fw-wrong-" + secrets.token_hex(16)
"""No caller's token: sent by the stranger."""
TOKENS = (BACKEND, REGISTRAR, OPS, WRONG)

API_TABLE = f"""open_health = false
allowed_hosts = ["finality.internal"]

[[api.tokens]]
name = "backend"
token = "${{FINALITY_TEST_BACKEND_TOKEN}}"
scopes = ["read", "register"]

[[api.tokens]]
name = "registrar"
sha256 = "{hashlib.sha256(REGISTRAR.encode()).hexdigest()}"
scopes = ["register"]

[[api.tokens]]
name = "ops"
token = "{OPS}"
scopes = ["admin"]
"""

answers: list[str] = []
"""Every answer body these tests read (searched for the tokens at the end)."""


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def with_api_keys(daemon: Daemon, text: str) -> None:
    """Put ``text`` into the ``[api]`` table of the daemon's config file (after listen)."""
    config = daemon.config_path.read_text()
    head, sep, rest = config.partition("\n[[chains]]")
    daemon.config_path.write_text(head.rstrip("\n") + "\n" + text + "\n" + sep + rest)


@pytest.fixture(scope="module")
def guarded(module_anvil: Anvil, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """A daemon with three tokens; its own client carries the backend (read) token."""
    os.environ["FINALITY_TEST_BACKEND_TOKEN"] = BACKEND
    daemon = Daemon(tmp_path_factory.mktemp("auth"), module_anvil.url, start=False)
    with_api_keys(daemon, API_TABLE)
    daemon.http.headers.update(bearer(BACKEND))  # /healthz needs read here
    try:
        daemon.start()
        yield daemon
    finally:
        daemon.close()
        os.environ.pop("FINALITY_TEST_BACKEND_TOKEN", None)


@pytest.fixture
def raw(guarded: Daemon) -> Iterator[httpx.Client]:
    """A client of the guarded daemon without any token."""
    with httpx.Client(base_url=guarded.url, timeout=10.0) as client:
        yield client


def seen(response: httpx.Response) -> httpx.Response:
    answers.append(response.text)
    return response


def assert_unauthenticated(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"].startswith("Bearer")
    body = response.json()
    assert body["fields"] == ["Authorization"]
    assert body["error"].startswith("Authorization: ")


@pytest.mark.parametrize(
    "headers",
    [
        {},
        bearer(WRONG),
        {"Authorization": "Bearer"},
        {"Authorization": "Basic " + base64.b64encode(f"backend:{BACKEND}".encode()).decode()},
        {"Authorization": f"Token {BACKEND}"},
        {"Authorization": BACKEND},
    ],
    ids=["none", "wrong", "empty", "basic", "other-scheme", "no-scheme"],
)
def test_without_a_valid_bearer_token_every_route_is_401(
    raw: httpx.Client, anvil: Anvil, headers: dict[str, str]
) -> None:
    tx = anvil.send()
    for method, path, body in [
        ("GET", "/v1/settlements", None),
        ("GET", "/v1/chains", None),
        ("GET", f"/v1/chains/{CHAIN}/txs/{tx}", None),
        ("GET", "/v1/events", None),
        ("GET", "/v1/leases", None),
        ("GET", "/healthz", None),
        ("GET", "/metrics", None),
        ("POST", "/v1/settlements", {"chain": CHAIN, "tx_hash": tx}),
        ("POST", "/v1/deliveries/1/replay", {}),
    ]:
        response = seen(raw.request(method, path, json=body, headers=headers))
        assert_unauthenticated(response)
    # nothing was registered by the refused POST
    listed = seen(raw.get("/v1/settlements", headers=bearer(BACKEND))).json()
    assert tx not in {item["tx_hash"] for item in listed["items"]}


def test_a_body_that_is_not_json_is_401_before_422_without_a_token(raw: httpx.Client) -> None:
    # FastAPI refuses undecodable JSON before any dependency runs: a stranger must still get
    # the 401, not the route's validation answer; a caller with a token gets the 422.
    json_type = {"Content-Type": "application/json"}
    for path in ("/v1/settlements", "/v1/settlements/batch", "/v1/deliveries/1/replay"):
        refused = seen(raw.post(path, content=b'{"chain": ', headers=json_type))
        assert_unauthenticated(refused)
        with_token = seen(raw.post(path, content=b'{"chain": ', headers=json_type | bearer(OPS)))
        assert with_token.status_code in (403, 404, 422), with_token.text  # as the route says
    answered = seen(raw.post("/v1/settlements", content=b"[", headers=json_type | bearer(BACKEND)))
    assert answered.status_code == 422, answered.text


def test_a_register_only_token_registers_but_cannot_read(raw: httpx.Client, anvil: Anvil) -> None:
    tx = anvil.send()
    created = seen(
        raw.post("/v1/settlements", json={"chain": CHAIN, "tx_hash": tx}, headers=bearer(REGISTRAR))
    )
    assert created.status_code == 201, created.text  # the sha256-configured token works
    sid = created.json()["settlement_id"]
    refused = seen(raw.get(f"/v1/settlements/{sid}", headers=bearer(REGISTRAR)))
    assert refused.status_code == 403, refused.text
    assert "'read'" in refused.json()["error"] and "registrar" in refused.json()["error"]
    assert refused.json()["scope"] == "read"
    assert "www-authenticate" not in refused.headers


def test_scopes_are_separate(raw: httpx.Client) -> None:
    leases = seen(raw.get("/v1/leases", headers=bearer(BACKEND)))
    assert leases.status_code == 403 and "'admin'" in leases.json()["error"], leases.text
    assert seen(raw.get("/v1/leases", headers=bearer(OPS))).status_code == 200
    reading = seen(raw.get("/v1/chains", headers=bearer(OPS)))
    assert reading.status_code == 403 and "'read'" in reading.json()["error"]
    replay = seen(raw.post("/v1/deliveries/1/replay", json={}, headers=bearer(BACKEND)))
    assert replay.status_code == 403 and replay.json()["scope"] == "admin"
    missing = seen(raw.post("/v1/deliveries/999/replay", json={}, headers=bearer(OPS)))
    assert missing.status_code == 404, missing.text  # admin gets through to the route


def test_health_needs_read_when_so_configured(raw: httpx.Client) -> None:
    assert_unauthenticated(seen(raw.get("/healthz")))
    assert seen(raw.get("/healthz", headers=bearer(BACKEND))).status_code == 200
    assert seen(raw.get("/metrics", headers=bearer(BACKEND))).status_code == 200


def test_a_foreign_host_is_refused_even_with_a_token(raw: httpx.Client, guarded: Daemon) -> None:
    for host in ("evil.example", f"evil.example:{guarded.port}", "127.0.0.1.nip.io"):
        answer = seen(raw.get("/v1/chains", headers={**bearer(BACKEND), "Host": host}))
        assert answer.status_code == 421, answer.text
        assert answer.json()["fields"] == ["Host"] and host in answer.json()["error"]
    for host in ("finality.internal", f"localhost:{guarded.port}", f"[::1]:{guarded.port}"):
        answer = seen(raw.get("/v1/chains", headers={**bearer(BACKEND), "Host": host}))
        assert answer.status_code == 200, (host, answer.text)


def test_a_form_post_to_replay_is_415(raw: httpx.Client) -> None:
    for headers, data in [
        ({"Content-Type": "application/x-www-form-urlencoded"}, "x=1"),
        ({"Content-Type": "text/plain"}, "{}"),
        ({"Content-Type": "multipart/form-data; boundary=b"}, "--b--"),
        ({}, None),
    ]:
        answer = seen(
            raw.post("/v1/deliveries/1/replay", content=data, headers={**bearer(OPS), **headers})
        )
        assert answer.status_code == 415, answer.text
        assert answer.json()["fields"] == ["Content-Type"]


def test_the_cli_sends_the_token(guarded: Daemon, anvil: Anvil) -> None:
    tx = anvil.send()
    by_flag = run_cli("status", tx, "--api", guarded.url, "--token", BACKEND, "--json")
    assert by_flag.returncode == 0, by_flag.stderr
    by_env = cli_with_env({"FINALITY_TOKEN": BACKEND}, "chains", "--api", guarded.url, "--json")
    assert by_env.returncode == 0, by_env.stderr
    refused = run_cli("chains", "--api", guarded.url, "--token", WRONG)
    assert refused.returncode == 64, refused.stderr
    assert "Authorization" in refused.stderr
    scoped = run_cli("chains", "--api", guarded.url, "--token", REGISTRAR)
    assert scoped.returncode == 64 and "'read'" in scoped.stderr
    for run in (by_flag, by_env, refused, scoped):
        answers.extend([run.stdout, run.stderr])


def test_the_cli_reads_the_token_from_a_file(guarded: Daemon, tmp_path: Path) -> None:
    # A token in a file stays out of ps and the shell's history (first line, trailing newline).
    token_file = tmp_path / "token"
    token_file.write_text(BACKEND + "\n")
    by_file = run_cli("chains", "--api", guarded.url, "--token-file", str(token_file), "--json")
    assert by_file.returncode == 0, by_file.stderr
    by_env = cli_with_env(
        {"FINALITY_TOKEN_FILE": str(token_file)}, "chains", "--api", guarded.url, "--json"
    )
    assert by_env.returncode == 0, by_env.stderr
    missing = run_cli("chains", "--api", guarded.url, "--token-file", str(tmp_path / "none"))
    assert missing.returncode == 64
    assert "--token-file: cannot read" in missing.stderr and "none" in missing.stderr
    (tmp_path / "empty").write_text("\n" + BACKEND)  # the token is not on the first line
    empty = run_cli("chains", "--api", guarded.url, "--token-file", str(tmp_path / "empty"))
    assert empty.returncode == 64 and "holds no token" in empty.stderr
    both = run_cli("chains", "--api", guarded.url, "--token", BACKEND, "--token-file", "x")
    assert both.returncode == 64 and "not both" in both.stderr
    for run in (by_file, by_env, missing, empty, both):
        answers.extend([run.stdout, run.stderr])


def cli_with_env(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``finality ARGS`` with ``env`` added to the test environment."""
    return run_cli(*args, env=env, timeout=60)


def test_the_clients_send_the_token(guarded: Daemon, anvil: Anvil) -> None:
    tx = anvil.send()
    with FinalityClient(guarded.url, token=BACKEND) as client:
        view = client.register(CHAIN, tx)
        assert client.get(view["settlement_id"])["tx_hash"] == tx
    with FinalityClient(guarded.url, token=REGISTRAR) as client:
        with pytest.raises(Rejected) as info:
            client.get(view["settlement_id"])
        assert info.value.status == 403
        answers.append(str(info.value))
    with FinalityClient(guarded.url, token=OPS) as client:
        with pytest.raises(Rejected) as info:  # a body-less replay goes out as JSON: 404
            client.request("POST", "/v1/deliveries/999/replay")
        assert info.value.status == 404

    async def run() -> dict[str, Any]:
        async with AsyncFinalityClient(guarded.url, token=BACKEND) as client:
            return await client.get(view["settlement_id"])

    assert asyncio.run(run())["tx_hash"] == tx


def test_the_openapi_document_names_the_scopes(raw: httpx.Client) -> None:
    doc = raw.get("/openapi.json").json()
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    ops = doc["paths"]
    assert ops["/v1/settlements"]["post"]["security"] == [{"bearer": ["register"]}]
    assert ops["/v1/settlements/{settlement_id}"]["get"]["security"] == [{"bearer": ["read"]}]
    assert ops["/v1/leases"]["get"]["security"] == [{"bearer": ["admin"]}]
    assert {"401", "403"} <= set(ops["/v1/chains"]["get"]["responses"])


def test_zz_no_token_in_any_answer_or_log(guarded: Daemon) -> None:
    """Last in the module: everything above has been answered and logged."""
    assert answers, "the tests above recorded no answers"
    log = guarded.log()
    for token in TOKENS:
        assert token not in log
        assert not [a for a in answers if token in a]


# --- without tokens --------------------------------------------------------------------


def test_open_daemon_checks_host_and_json_too(module_daemon: Daemon) -> None:
    foreign = module_daemon.get("/v1/chains", headers={"Host": "rebound.example"})
    assert foreign.status_code == 421, foreign.text
    form = module_daemon.http.post(
        "/v1/deliveries/1/replay",
        content="x=1",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert form.status_code == 415, form.text
    assert module_daemon.get("/v1/chains", headers={"Host": "localhost"}).status_code == 200
    doc = module_daemon.get("/openapi.json").json()
    assert "security" not in doc["paths"]["/v1/settlements"]["post"]


def test_listening_beyond_loopback_without_tokens_refuses_to_start(
    module_anvil: Anvil, tmp_path: Path
) -> None:
    daemon = Daemon(tmp_path, module_anvil.url, start=False)
    text = daemon.config_path.read_text()
    daemon.config_path.write_text(text.replace('listen = "127.0.0.1:', 'listen = "0.0.0.0:'))
    run = run_cli("run", "--config", str(daemon.config_path), timeout=60)
    assert run.returncode == 78, run.stderr
    assert "api.listen: 0.0.0.0 is beyond loopback" in run.stderr
    assert "allow_open" in run.stderr
    daemon.close()


@pytest.fixture
def anvil(module_anvil: Anvil) -> Anvil:
    return module_anvil


def test_the_mcp_server_will_not_lend_its_token_beyond_loopback() -> None:
    run = cli_with_env(
        {"FINALITY_TOKEN": BACKEND},
        *("mcp", "--api", "http://127.0.0.1:1", "--http", "0.0.0.0:8720"),
    )
    assert run.returncode == 64, run.stderr
    assert "beyond loopback" in run.stderr and BACKEND not in run.stderr + run.stdout
