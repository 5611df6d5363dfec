"""The HTTP API of a real daemon process, against a real anvil (one daemon for the module)."""

from __future__ import annotations

import re
import socket
from typing import Any

import pytest

from tests.e2e.helpers import unknown_hash
from tests.support.anvil import Anvil
from tests.support.daemon import CHAIN, Daemon, wait_for

pytestmark = pytest.mark.anvil

VIEW_FIELDS = {
    "settlement_id",
    "chain",
    "tx_hash",
    "verdict",
    "block_number",
    "block_hash",
    "confirmations",
    "required_confirmations",
    "reorg_count",
    "receipt",
}


@pytest.fixture(scope="module")
def anvil(module_anvil: Anvil) -> Anvil:
    return module_anvil


@pytest.fixture(scope="module")
def daemon(module_daemon: Daemon) -> Daemon:
    return module_daemon


@pytest.fixture(scope="module")
def registered() -> set[str]:
    """Every settlement id this module registered successfully (201)."""
    return set()


@pytest.fixture(scope="module")
def victim(anvil: Anvil) -> str:
    """A real, mined tx hash that only bad requests ever name: it must never be stored."""
    tx = anvil.send(value=7)
    anvil.receipt(tx)
    return tx


def register(
    daemon: Daemon, registered: set[str], tx_hash: str, **fields: Any
) -> tuple[int, dict[str, Any]]:
    answer = daemon.post("/v1/settlements", {"chain": CHAIN, "tx_hash": tx_hash, **fields})
    assert answer.status_code in (200, 201), answer.text
    view: dict[str, Any] = answer.json()
    if answer.status_code == 201:
        registered.add(view["settlement_id"])
    return answer.status_code, view


def stored_ids(daemon: Daemon) -> set[str]:
    return {view["settlement_id"] for view in daemon.settlements()}


def metric_total(daemon: Daemon, name: str) -> float:
    text = daemon.get("/metrics").text
    values = re.findall(rf"^{name}\{{[^}}]*\}} (\S+)$", text, flags=re.MULTILINE)
    return sum(float(v) for v in values)


# -- registration ------------------------------------------------------------------------------


def test_register_then_repeat_gives_same_settlement(
    daemon: Daemon, anvil: Anvil, registered: set[str]
) -> None:
    tx = anvil.send()
    first = daemon.post("/v1/settlements", {"chain": CHAIN, "tx_hash": tx})
    assert first.status_code == 201, first.text
    registered.add(first.json()["settlement_id"])
    again = daemon.post("/v1/settlements", {"chain": CHAIN, "tx_hash": tx})
    assert again.status_code == 200, again.text
    assert again.json()["settlement_id"] == first.json()["settlement_id"]
    # The same hash in upper case is the same settlement (hashes are compared lower-cased).
    upper = daemon.post("/v1/settlements", {"chain": CHAIN, "tx_hash": "0x" + tx[2:].upper()})
    assert upper.status_code == 200, upper.text
    assert upper.json()["settlement_id"] == first.json()["settlement_id"]


def test_view_has_the_contract_fields(daemon: Daemon, anvil: Anvil, registered: set[str]) -> None:
    tx = anvil.send()
    status, view = register(daemon, registered, tx, confirmations=40)
    assert status == 201
    assert view.keys() >= VIEW_FIELDS, VIEW_FIELDS - view.keys()
    assert view["settlement_id"]
    assert view["chain"] == CHAIN
    assert view["tx_hash"] == tx.lower()
    assert view["verdict"] == "AWAITING_FINALITY"
    assert view["required_confirmations"] == 40
    assert view["reorg_count"] == 0
    assert view["receipt"] is None
    assert isinstance(view["confirmations"], int)
    if view["block_number"] is None:
        assert view["confirmations"] == 0
    fetched = daemon.settlement(view["settlement_id"])
    assert fetched.keys() >= VIEW_FIELDS
    assert fetched["settlement_id"] == view["settlement_id"]
    # The default N comes from the chain config.
    _, default = register(daemon, registered, anvil.send())
    assert default["required_confirmations"] == 3


def test_followed_to_finality_then_receipt(
    daemon: Daemon, anvil: Anvil, registered: set[str]
) -> None:
    tx = anvil.send()
    mined = anvil.receipt(tx)
    status, view = register(daemon, registered, tx)
    assert status == 201
    sid = view["settlement_id"]
    block = int(mined["blockNumber"], 16)

    def included() -> dict[str, Any] | None:
        current = daemon.settlement(sid)
        return current if current["block_number"] is not None else None

    view = wait_for(included, 10, what="inclusion seen by the daemon")
    assert view["block_number"] == block
    assert view["block_hash"] == mined["blockHash"]
    assert view["verdict"] == "AWAITING_FINALITY"
    assert view["receipt"] is None

    def confirmed() -> dict[str, Any] | None:
        current = daemon.settlement(sid)
        if current["verdict"] == "FINALITY_CONFIRMED":
            return current
        anvil.mine()
        return None

    final = wait_for(confirmed, 15, interval=0.2, what="FINALITY_CONFIRMED")
    assert final["confirmations"] >= 3
    assert final["required_confirmations"] == 3
    assert final["block_number"] == block
    assert final["receipt"] is not None
    assert final["receipt"]["verdict"] == "FINALITY_CONFIRMED"

    answer = daemon.get(f"/v1/settlements/{sid}/receipt")
    assert answer.status_code == 200, answer.text
    receipt = answer.json()
    assert receipt["verdict"] == "FINALITY_CONFIRMED"
    assert receipt["settlement_id"] == sid
    assert receipt["digest"]
    assert receipt["evidence"], receipt


def test_receipt_before_terminal_is_404_naming_the_verdict(
    daemon: Daemon, anvil: Anvil, registered: set[str]
) -> None:
    _, view = register(daemon, registered, anvil.send(), confirmations=60)
    answer = daemon.get(f"/v1/settlements/{view['settlement_id']}/receipt")
    assert answer.status_code == 404, answer.text
    assert "AWAITING_FINALITY" in answer.json()["error"]
    assert answer.json()["verdict"] == "AWAITING_FINALITY"


# -- bad input ---------------------------------------------------------------------------------

HEADER_WINDOW = 67  # max(2 N, N + 64) for N = 3

BAD_REGISTRATIONS: list[tuple[str, dict[str, Any], int, str]] = [
    ("hash-short", {"tx_hash": "0x12"}, 422, "tx_hash"),
    ("hash-empty", {"tx_hash": ""}, 422, "tx_hash"),
    ("hash-no-prefix", {"tx_hash": "ab" * 32}, 422, "tx_hash"),
    ("hash-not-hex", {"tx_hash": "0x" + "g" * 64}, 422, "tx_hash"),
    ("hash-too-long", {"tx_hash": "0x" + "a" * 66}, 422, "tx_hash"),
    ("hash-space", {"tx_hash": " 0x" + "a" * 64}, 422, "tx_hash"),
    ("hash-number", {"tx_hash": 12345}, 422, "tx_hash"),
    ("hash-null", {"tx_hash": None}, 422, "tx_hash"),
    ("chain-unknown", {"chain": "nope"}, 422, "chain"),
    ("confirmations-0", {"confirmations": 0}, 422, "confirmations"),
    ("confirmations-neg", {"confirmations": -1}, 422, "confirmations"),
    ("confirmations-text", {"confirmations": "abc"}, 422, "confirmations"),
    ("confirmations-window", {"confirmations": HEADER_WINDOW}, 422, "confirmations"),
    ("confirmations-huge", {"confirmations": 10**9}, 422, "confirmations"),
    ("confirmations-bool", {"confirmations": True}, 422, "confirmations"),
    ("confirmations-numeric-text", {"confirmations": "3"}, 422, "confirmations"),
    ("timeout-0", {"timeout_s": 0}, 422, "timeout_s"),
    ("timeout-neg", {"timeout_s": -5}, 422, "timeout_s"),
    ("extra-field", {"colour": "blue"}, 422, "colour"),
    ("state-list", {"dependent_state": [1, 2, 3]}, 422, "dependent_state"),
    ("state-huge", {"dependent_state": {"blob": "x" * (64 * 1024 + 1)}}, 413, "dependent_state"),
    ("commit-url-ftp", {"commit_url": "ftp://x"}, 422, "commit_url"),
]


def _bad_body(victim: str, update: dict[str, Any]) -> dict[str, Any]:
    return {"chain": CHAIN, "tx_hash": victim, **update}


@pytest.mark.parametrize(
    ("update", "status", "field"),
    [case[1:] for case in BAD_REGISTRATIONS],
    ids=[case[0] for case in BAD_REGISTRATIONS],
)
def test_bad_registration_names_the_field(
    daemon: Daemon, victim: str, update: dict[str, Any], status: int, field: str
) -> None:
    answer = daemon.post("/v1/settlements", _bad_body(victim, update))
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert isinstance(error, str)
    assert field in error, error
    assert "\n" not in error


def test_unknown_chain_lists_the_known_ones(daemon: Daemon, victim: str) -> None:
    answer = daemon.post("/v1/settlements", {"chain": "nope", "tx_hash": victim})
    assert answer.status_code == 422, answer.text
    assert "'local'" in answer.json()["error"] or "local" in answer.json()["error"]
    assert "nope" in answer.json()["error"]


def test_missing_fields_and_non_json_body(daemon: Daemon, victim: str) -> None:
    answer = daemon.post("/v1/settlements", {"chain": CHAIN})
    assert answer.status_code == 422 and "tx_hash" in answer.json()["error"], answer.text
    answer = daemon.post("/v1/settlements", {"tx_hash": victim})
    assert answer.status_code == 422 and "chain" in answer.json()["error"], answer.text
    answer = daemon.http.post(
        "/v1/settlements", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert 400 <= answer.status_code < 500, answer.text
    assert answer.json()["error"]


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ('"timeout_s": Infinity', "timeout_s"),
        ('"timeout_s": "inf"', "timeout_s"),
        ('"timeout_s": NaN', "timeout_s"),
        ('"dependent_state": {"x": NaN}', "dependent_state"),
        ('"dependent_state": {"x": [1, -Infinity]}', "dependent_state"),
    ],
)
def test_non_finite_numbers_are_refused(
    daemon: Daemon, victim: str, extra: str, field: str
) -> None:
    body = f'{{"chain": "{CHAIN}", "tx_hash": "{victim}", {extra}}}'
    answer = daemon.http.post(
        "/v1/settlements", content=body.encode(), headers={"content-type": "application/json"}
    )
    assert answer.status_code == 422, answer.text
    assert field in answer.json()["error"]


def test_huge_timeout_is_capped_at_the_max_wait(
    daemon: Daemon, anvil: Anvil, registered: set[str]
) -> None:
    status, view = register(daemon, registered, anvil.send(), timeout_s=1e308)
    assert status == 201
    assert view["deadline"] - view["initiated_at"] == 86_400_000  # max_wait_s default
    assert daemon.settlement(view["settlement_id"])["verdict"] == "AWAITING_FINALITY"


def test_unknown_settlement_is_404(daemon: Daemon) -> None:
    answer = daemon.get("/v1/settlements/unknown")
    assert answer.status_code == 404, answer.text
    assert "settlement_id" in answer.json()["error"]
    answer = daemon.get("/v1/settlements/unknown/receipt")
    assert answer.status_code == 404, answer.text


def test_tx_on_unknown_chain_is_404_listing_known_chains(daemon: Daemon) -> None:
    answer = daemon.get(f"/v1/chains/nope/txs/{unknown_hash(1)}")
    assert answer.status_code == 404, answer.text
    body = answer.json()
    assert "local" in body["error"]
    assert body["known_chains"] == ["local"]


def test_malformed_tx_in_path_is_422(daemon: Daemon) -> None:
    answer = daemon.get("/v1/chains/local/txs/0x12")
    assert answer.status_code == 422, answer.text
    assert "tx_hash" in answer.json()["error"]


# -- live answers ------------------------------------------------------------------------------


def test_unregistered_tx_is_answered_live_and_not_registered(daemon: Daemon, anvil: Anvil) -> None:
    tx = anvil.send(value=3)
    block = int(anvil.receipt(tx)["blockNumber"], 16)
    before = stored_ids(daemon)
    answer = daemon.get(f"/v1/chains/local/txs/{tx}")
    assert answer.status_code == 200, answer.text
    view = answer.json()
    assert view["registered"] is False
    assert view["tx_hash"] == tx
    assert view["block_number"] == block
    assert view["verdict"] == "AWAITING_FINALITY"
    assert view["confirmations"] == anvil.head() - block + 1

    anvil.mine(5)
    view = daemon.get(f"/v1/chains/local/txs/{tx}").json()
    assert view["registered"] is False
    assert view["confirmations"] == anvil.head() - block + 1
    assert view["verdict"] == "FINALITY_CONFIRMED"
    deeper = daemon.get(f"/v1/chains/local/txs/{tx}", params={"confirmations": 50}).json()
    assert deeper["verdict"] == "AWAITING_FINALITY"
    assert deeper["required_confirmations"] == 50
    for bad in ("0", "-1", "abc", str(10**23)):
        answer = daemon.get(f"/v1/chains/local/txs/{tx}", params={"confirmations": bad})
        assert answer.status_code == 422, (bad, answer.text)
        assert "confirmations" in answer.json()["error"]

    assert stored_ids(daemon) == before
    assert daemon.settlements_of(tx) == []
    assert daemon.get(f"/v1/chains/local/txs/{tx}").json()["registered"] is False


def test_unknown_hash_live_is_no_settlement(daemon: Daemon) -> None:
    answer = daemon.get(f"/v1/chains/local/txs/{unknown_hash(2)}")
    assert answer.status_code == 200, answer.text
    view = answer.json()
    assert view["verdict"] == "NO_SETTLEMENT"
    assert view["registered"] is False
    assert view["block_number"] is None
    assert view["confirmations"] == 0


def test_registered_tx_by_hash_is_the_stored_settlement(
    daemon: Daemon, anvil: Anvil, registered: set[str]
) -> None:
    tx = anvil.send()
    _, view = register(daemon, registered, tx)
    by_hash = daemon.get(f"/v1/chains/local/txs/{tx.upper().replace('0X', '0x')}").json()
    assert by_hash["registered"] is True
    assert by_hash["settlement_id"] == view["settlement_id"]


def test_bad_requests_store_nothing(daemon: Daemon, victim: str, registered: set[str]) -> None:
    before = stored_ids(daemon)
    for _, update, status, _ in BAD_REGISTRATIONS:
        answer = daemon.post("/v1/settlements", _bad_body(victim, update))
        assert answer.status_code == status, answer.text
    daemon.get("/v1/chains/local/txs/0x12")
    daemon.get(f"/v1/chains/nope/txs/{victim}")
    stored = stored_ids(daemon)
    assert stored == before
    assert stored == registered, stored ^ registered
    assert daemon.settlements_of(victim) == []
    assert metric_total(daemon, "finality_settlements") == len(registered)


# -- operations --------------------------------------------------------------------------------


def test_health_metrics_docs_openapi(daemon: Daemon) -> None:
    health = daemon.get("/healthz")
    assert health.status_code == 200, health.text
    assert health.json()["ok"] is True
    metrics = daemon.get("/metrics")
    assert metrics.status_code == 200
    assert re.search(r'^finality_head_block\{chain="local"\} \d', metrics.text, re.MULTILINE)
    docs = daemon.get("/docs")
    assert docs.status_code == 200
    assert "html" in docs.headers["content-type"]
    spec = daemon.get("/openapi.json")
    assert spec.status_code == 200
    paths = spec.json()["paths"]
    for path in (
        "/v1/settlements",
        "/v1/settlements/{settlement_id}",
        "/v1/settlements/{settlement_id}/receipt",
        "/v1/chains/{chain}/txs/{tx_hash}",
        "/v1/chains",
        "/v1/reorgs",
    ):
        assert path in paths, sorted(paths)


def test_chains_lists_local(daemon: Daemon, anvil: Anvil) -> None:
    anvil.mine()
    daemon.wait_head(anvil.head())
    info = daemon.chain_info()
    assert info["chain_id"] == 31337
    assert info["confirmations"] == 3
    assert info["healthy"] is True
    assert info["head_number"] >= anvil.head() - 1


def test_reorg_is_listed_with_ancestor_and_touched_settlement(
    daemon: Daemon, anvil: Anvil, registered: set[str]
) -> None:
    tx = anvil.send()
    block = int(anvil.receipt(tx)["blockNumber"], 16)
    _, view = register(daemon, registered, tx, confirmations=20)
    sid = view["settlement_id"]
    wait_for(lambda: daemon.settlement(sid)["block_number"] == block, 10, what="inclusion recorded")
    anvil.mine()
    top = anvil.block()
    assert int(top["number"], 16) == block + 1
    daemon.wait_head(block + 1, top["hash"])
    ancestor = anvil.block(block - 1)
    raw = anvil.raw_tx(tx)
    already = {r["id"] for r in daemon.get("/v1/reorgs").json()}

    anvil.reorg(2, [(raw, 0)])

    def new_reorg() -> dict[str, Any] | None:
        fresh = [r for r in daemon.get("/v1/reorgs").json() if r["id"] not in already]
        return fresh[0] if fresh else None

    reorg = wait_for(new_reorg, 10, what="the reorg listed")
    assert reorg["chain"] == CHAIN
    assert reorg["depth"] == 2
    assert reorg["common_ancestor"] == {"number": block - 1, "hash": ancestor["hash"]}
    assert sid in reorg["touched"]
    assert reorg["finality_violation"] is False
    # Re-included at the same height on the new branch: followed there.
    new_block = anvil.block(block)
    wait_for(
        lambda: daemon.settlement(sid)["block_hash"] == new_block["hash"],
        10,
        what="inclusion on the new branch",
    )
    assert daemon.settlement(sid)["reorg_count"] >= 1
    reorgs = daemon.get("/v1/reorgs", params={"chain": "local"})
    assert reorgs.status_code == 200
    assert daemon.get("/v1/reorgs", params={"chain": "nope"}).status_code == 404


def test_the_api_explorer_loads_nothing_from_off_the_host(daemon: Daemon) -> None:
    """/docs and /redoc work offline: every script, stylesheet and image they name is served
    by the daemon itself (a path on this host), and no URL in the pages points elsewhere."""
    for page, marker in (("/docs", "SwaggerUIBundle"), ("/redoc", "<redoc")):
        html = daemon.get(page)
        assert html.status_code == 200 and marker in html.text
        assert not re.search(r"(https?:)?//[a-z]", html.text, re.IGNORECASE), html.text
        assets = re.findall(r"""(?:src|href)=["']([^"']+)["']|url: ?["']([^"']+)["']""", html.text)
        urls = [a or b for a, b in assets] + re.findall(r"spec-url=\"([^\"]+)\"", html.text)
        assert urls, html.text
        for url in urls:
            assert url.startswith("/"), f"{page} loads {url} from off the host"
            fetched = daemon.get(url)
            assert fetched.status_code == 200 and len(fetched.content) > 100, url


def test_an_idle_connection_outlives_the_clients_own_idle_expiry(daemon: Daemon) -> None:
    """httpx drops a pooled connection idle for 5 s; the API must not close it first (it
    did, at 5 s too: a client's next request could race the close and get "Server
    disconnected without sending a response"). One connection, idle 6 s (a read that
    would see the server's close), then a second request on it."""
    host, port = daemon.url.removeprefix("http://").rsplit(":", 1)
    request = f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(request)
        assert _response(conn).startswith(b"HTTP/1.1 200")
        conn.settimeout(6.0)
        with pytest.raises(TimeoutError):  # the server kept it open
            assert conn.recv(1) != b"", "the server closed the idle connection"
        conn.settimeout(10)
        conn.sendall(request)
        assert _response(conn).startswith(b"HTTP/1.1 200")


def _response(conn: socket.socket) -> bytes:
    """One whole HTTP response read from ``conn`` (headers and a Content-Length body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        assert chunk, "the server closed the connection"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
    while len(body) < length:
        chunk = conn.recv(65536)
        assert chunk, "the server closed the connection"
        body += chunk
    return head + b"\r\n\r\n" + body
