"""Bounded input, never a 5xx: oversized and malformed probes against the daemon as a process.

Body sizes are capped before parsing, per route (a 100 MB body refused with the daemon's
memory staying flat, by ``Content-Length`` and chunked); ``timeout_s`` down to 1 s; the depth
and key count of ``dependent_state``; integers past 2**63; lone surrogates; bodies that are
not JSON. Every refusal is a 4xx in the error shape, naming the field.
"""

from __future__ import annotations

import json
import select
import socket
import sqlite3
import time
from typing import Any

import pytest

from tests.support.daemon import CHAIN, Daemon

pytestmark = pytest.mark.anvil

MB = 1024 * 1024


def unknown_hash(tag: int) -> str:
    """A well-formed tx hash no node knows, distinct for every tag."""
    return "0x" + f"{tag:064x}".replace("0", "e", 1)


HUGE = 100 * MB
RSS_GROWTH_MB = 40
"""Generous bound on the daemon's peak RSS growth while refusing a 100 MB body (it parsed
the whole body before: +100 MB at least)."""


def _peak_rss_mb(daemon: Daemon) -> float:
    """The daemon's peak resident set (VmHWM) in MB: any growth while a body arrived shows."""
    assert daemon.proc is not None
    with open(f"/proc/{daemon.proc.pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc/PID/status")


def _send_huge(daemon: Daemon, chunked: bool) -> tuple[int, dict[str, Any], float]:
    """POST a 100 MB registration body over a raw socket, a MB at a time, until the daemon
    answers; returns (status, JSON body, MB sent before the answer)."""
    head = f"POST /v1/settlements HTTP/1.1\r\nHost: 127.0.0.1:{daemon.port}\r\n"
    head += "Content-Type: application/json\r\n"
    head += "Transfer-Encoding: chunked\r\n\r\n" if chunked else f"Content-Length: {HUGE}\r\n\r\n"
    piece = b'{"pad": "' + b"x" * (MB - 20) + b'"'
    chunk = f"{len(piece):x}\r\n".encode() + piece + b"\r\n" if chunked else piece
    sent = 0
    with socket.create_connection(("127.0.0.1", daemon.port), timeout=30) as sock:
        sock.sendall(head.encode())
        while sent < HUGE:
            readable, _, _ = select.select([sock], [], [], 0.05)
            if readable:
                break
            try:
                sock.sendall(chunk)
            except OSError:
                break
            sent += len(piece)
        answer = b""
        while b"\r\n\r\n" not in answer or not _complete(answer):
            data = sock.recv(65536)
            if not data:
                break
            answer += data
    head_text, _, body = answer.partition(b"\r\n\r\n")
    status = int(head_text.split()[1])
    return status, json.loads(body), sent / MB


def _complete(answer: bytes) -> bool:
    """Whether a response with a Content-Length arrived whole."""
    head, _, body = answer.partition(b"\r\n\r\n")
    for line in head.decode("latin-1").split("\r\n"):
        if line.lower().startswith("content-length:"):
            return len(body) >= int(line.split(":")[1])
    return False


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_100_mb_body_is_refused_413_without_reading_it(
    module_daemon: Daemon, chunked: bool
) -> None:
    before = _peak_rss_mb(module_daemon)
    status, body, sent_mb = _send_huge(module_daemon, chunked)
    grew = _peak_rss_mb(module_daemon) - before

    assert status == 413, body
    assert body["fields"] == ["body"] and body["limit"] == MB, body
    assert "POST /v1/settlements" in body["error"], body
    assert sent_mb < 20, f"{sent_mb:.0f} MB went in before the 413"
    assert grew < RSS_GROWTH_MB, f"peak RSS grew {grew:.0f} MB refusing the body"
    assert module_daemon.get("/healthz").status_code == 200  # and it still serves


def test_each_route_has_its_own_cap(module_daemon: Daemon) -> None:
    just_over = {"chain": CHAIN, "tx_hash": unknown_hash(10), "pad": "x" * MB}
    refused = module_daemon.post("/v1/settlements", just_over)
    assert refused.status_code == 413, refused.text

    state = {"note": "y" * 6000}  # 300 items of ~6 KB: 1.8 MB, over one registration's cap
    items = [
        {"chain": CHAIN, "tx_hash": unknown_hash(1000 + i), "dependent_state": state}
        for i in range(300)
    ]
    batch = module_daemon.post("/v1/settlements/batch", {"items": items}, timeout=60)
    assert batch.status_code == 200, batch.text[:300]
    assert {r["status"] for r in batch.json()["results"]} == {201}

    small = module_daemon.post("/v1/deliveries/1/replay", {"pad": "z" * (100 * 1024)})
    assert small.status_code == 413, small.text  # every other route: 64 KiB


def _post(daemon: Daemon, raw: bytes, path: str = "/v1/settlements") -> Any:
    return daemon.http.post(path, content=raw, headers={"content-type": "application/json"})


def _refused(answer: Any, field: str, status: int = 422) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    body: dict[str, Any] = answer.json()
    assert body["error"].startswith(f"{field}: "), body
    assert field in body["fields"], body
    return body


@pytest.mark.parametrize("timeout_s", [1e-300, 0.0004, 0.5, 0])
def test_a_timeout_below_one_second_is_a_422_naming_it(
    module_daemon: Daemon, timeout_s: float
) -> None:
    body = {"chain": CHAIN, "tx_hash": unknown_hash(20), "timeout_s": timeout_s}
    _refused(module_daemon.post("/v1/settlements", body), "timeout_s")


def test_a_timeout_of_one_second_is_valid(module_daemon: Daemon) -> None:
    view = module_daemon.register(unknown_hash(21), timeout_s=1)
    assert view["deadline"] - view["initiated_at"] == 1000


@pytest.mark.parametrize(
    ("method", "path", "field"),
    [
        ("GET", f"/v1/deliveries/{2**63}", "delivery_id"),
        ("POST", f"/v1/deliveries/{2**64}/replay", "delivery_id"),
        ("GET", f"/v1/handoffs/{2**63}", "handoff_id"),
        ("GET", f"/v1/events?after={2**63}", "after"),
        ("GET", f"/v1/deliveries?after={2**63}", "after"),
        ("GET", f"/v1/settlements?limit={2**63}", "limit"),
        ("GET", f"/v1/reorgs?limit={2**63}", "limit"),
        ("GET", f"/v1/chains/{CHAIN}/txs/{unknown_hash(1)}?confirmations={2**63}", "confirmations"),
    ],
)
def test_integers_past_64_bits_are_a_422_naming_them(
    module_daemon: Daemon, method: str, path: str, field: str
) -> None:
    headers = {"content-type": "application/json"}
    _refused(module_daemon.http.request(method, path, content=b"{}", headers=headers), field)


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def test_dependent_state_32_deep_is_stored_and_reads_back(module_daemon: Daemon) -> None:
    state = _nested(32)
    view = module_daemon.register(unknown_hash(30), dependent_state=state)
    assert module_daemon.settlement(view["settlement_id"])["dependent_state"] == state


@pytest.mark.parametrize(
    ("depth", "field", "problem"),
    [
        (33, "dependent_state", "nested deeper than 32"),
        (100, "dependent_state", "nested deeper than 32"),
        (255, "body", "nested deeper than 128"),  # refused before it is parsed
        (5000, "body", "nested deeper than 128"),
    ],
)
def test_dependent_state_deeper_than_32_is_a_422(
    module_daemon: Daemon, depth: int, field: str, problem: str
) -> None:
    state = '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)  # as text: no client recursion
    raw = f'{{"chain": "{CHAIN}", "tx_hash": "{unknown_hash(31)}", "dependent_state": {state}}}'
    answer = _post(module_daemon, raw.encode())
    assert problem in _refused(answer, field)["error"]


def test_dependent_state_with_more_than_10000_keys_is_a_422(module_daemon: Daemon) -> None:
    state = {f"g{g}": {str(k): 0 for k in range(101)} for g in range(99)}  # 99 + 9,999 keys
    body = {"chain": CHAIN, "tx_hash": unknown_hash(32), "dependent_state": state}
    answer = module_daemon.post("/v1/settlements", body)
    assert "more than 10000 keys" in _refused(answer, "dependent_state")["error"]


def test_a_body_nested_past_any_parser_is_a_422(module_daemon: Daemon) -> None:
    for body in (b"[" * 500_000 + b"]" * 500_000, b'{"a":' * 100_000 + b"1" + b"}" * 100_000):
        answer = _post(module_daemon, body)
        assert "nested deeper than 128" in _refused(answer, "body")["error"]
    assert module_daemon.get("/healthz").status_code == 200  # it killed the daemon before


def test_a_body_that_is_not_utf8_json_is_a_422(module_daemon: Daemon) -> None:
    _refused(_post(module_daemon, b"\x13\xff\xfe"), "body")
    _refused(_post(module_daemon, b'{"chain": '), "body")


SURROGATE = "\\udc00"
"""A lone surrogate as JSON writes it: valid JSON text, no UTF-8 string."""


@pytest.mark.parametrize(
    ("field", "template"),
    [
        ("commit_url", '{"chain": "local", "tx_hash": "TX", "commit_url": "http://x/S"}'),
        ("chain", '{"chain": "S", "tx_hash": "TX"}'),
        ("dependent_state", '{"chain": "local", "tx_hash": "TX", "dependent_state": {"S": 1}}'),
        ("dependent_state", '{"chain": "local", "tx_hash": "TX", "dependent_state": {"k": "S"}}'),
        ("ref", '{"kind": "rq_job", "ref": "S"}'),
    ],
)
def test_a_lone_surrogate_is_a_422_naming_the_field(
    module_daemon: Daemon, field: str, template: str
) -> None:
    raw = template.replace("TX", unknown_hash(40)).replace("S", SURROGATE)
    _refused(_post(module_daemon, raw.encode()), field)


def test_a_lone_surrogate_in_a_batch_item_is_that_items_422(module_daemon: Daemon) -> None:
    ok = f'{{"chain": "local", "tx_hash": "{unknown_hash(41)}"}}'
    bad = (
        f'{{"chain": "local", "tx_hash": "{unknown_hash(42)}", "commit_url": "http://{SURROGATE}"}}'
    )
    answer = _post(module_daemon, f'{{"items": [{ok}, {bad}]}}'.encode(), "/v1/settlements/batch")
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [r["status"] for r in results] == [201, 422]
    assert results[1]["fields"] == ["commit_url"]


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_a_non_finite_number_in_dependent_state_is_a_422(
    module_daemon: Daemon, literal: str
) -> None:
    # Python's JSON parser takes these literals (no JSON text holds them): stored, the state
    # could never be answered again (JSON encoders refuse them, or turn them into null).
    tx = unknown_hash(43 + ["NaN", "Infinity", "-Infinity"].index(literal))
    raw = f'{{"chain": "local", "tx_hash": "{tx}", "dependent_state": {{"p": [1, {literal}]}}}}'
    _refused(_post(module_daemon, raw.encode()), "dependent_state")
    listed = module_daemon.get("/v1/settlements", params={"limit": 500}).json()["items"]
    assert tx not in {item["tx_hash"] for item in listed}


def test_framework_errors_answer_the_error_shape(module_daemon: Daemon) -> None:
    missing = module_daemon.get("/v1/no-such-route")
    assert missing.status_code == 404 and missing.json()["fields"] == ["path"], missing.text
    wrong = module_daemon.http.put(
        "/v1/settlements", content=b"{}", headers={"content-type": "application/json"}
    )
    assert wrong.status_code == 405, wrong.text
    assert set(wrong.headers["allow"].split(", ")) == {"GET", "POST"}
    assert "error" in wrong.json()


def test_a_dependent_state_stored_before_the_bound_still_reads_back(
    module_daemon: Daemon,
) -> None:
    view = module_daemon.register(unknown_hash(50), dependent_state={"small": True})
    deep = _nested(300)  # written straight into the store, as an older version accepted it
    conn = sqlite3.connect(module_daemon.db_path, timeout=10)
    try:
        conn.execute(
            "UPDATE settlements SET dependent_state = ? WHERE settlement_id = ?",
            (json.dumps(deep), view["settlement_id"]),
        )
        conn.commit()
    finally:
        conn.close()
    started = time.monotonic()
    answer = module_daemon.get(f"/v1/settlements/{view['settlement_id']}")
    assert answer.status_code == 200, answer.text[:300]
    assert answer.json()["dependent_state"] == deep
    page = module_daemon.get("/v1/settlements", params={"limit": 500})
    assert page.status_code == 200, page.text[:300]
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("nonce", [2**63, 2**64 - 1])
def test_a_nonce_past_64_bits_signed_is_a_422(module_daemon: Daemon, nonce: int) -> None:
    body = {"chain": CHAIN, "tx_hash": unknown_hash(60), "sender": "0x" + "11" * 20}
    _refused(module_daemon.post("/v1/settlements", {**body, "nonce": nonce}), "nonce")
    assert module_daemon.get("/healthz").status_code == 200  # a bad value is no outage


def test_every_path_answers_an_undeclared_method_405_with_its_documented_allow(
    module_daemon: Daemon,
) -> None:
    paths = module_daemon.get("/openapi.json").json()["paths"]
    wrong: list[str] = []
    for template, item in paths.items():
        documented = {m.upper() for m in item}
        method = next(m for m in ("PUT", "PATCH", "DELETE") if m not in documented)
        path = template.replace("{chain}", CHAIN).replace("{tx_hash}", unknown_hash(70))
        path = path.replace("{source}", "stripe")
        for name in ("settlement_id", "delivery_id", "handoff_id"):
            path = path.replace("{" + name + "}", "1")
        answer = module_daemon.http.request(method, path)  # no Content-Type: still a 405
        allow = set(answer.headers.get("allow", "").split(", "))
        if answer.status_code != 405 or allow != documented or "error" not in answer.json():
            wrong.append(f"{method} {path}: {answer.status_code} Allow {allow}: {answer.text}")
    assert not wrong, "\n".join(wrong)
