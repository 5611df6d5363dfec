"""``GET /v1/settlements/{id}/receipt`` answers the stored bytes of the receipt.

A daemon as a process, a real anvil: the answer is the ``receipts.body`` text of the store,
byte for byte (no decoding and encoding again on the way out), in the encoding the route
always answered (pydantic's JSON of the document), served as ``application/json``; written
to a file as received, it passes ``finality verify``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from tests.e2e.test_verify_cli import confirmed_receipt
from tests.support.anvil import Anvil
from tests.support.daemon import Daemon, run_cli

pytestmark = pytest.mark.anvil


@pytest.fixture(scope="module")
def anvil(module_anvil: Anvil) -> Anvil:
    return module_anvil


@pytest.fixture(scope="module")
def daemon(anvil: Anvil, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    daemon = Daemon(tmp_path_factory.mktemp("bytes"), anvil.url, confirmations=2)
    yield daemon
    daemon.close()


def test_the_receipt_answered_is_the_stored_bytes(
    daemon: Daemon, anvil: Anvil, tmp_path: Path
) -> None:
    sid, _ = confirmed_receipt(daemon, anvil)
    answer = daemon.get(f"/v1/settlements/{sid}/receipt")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/json"
    [(stored,)] = daemon.query(
        "SELECT body FROM receipts WHERE settlement_id = ? AND kind = ?",
        sid,
        "settlement_finality_receipt",
    )
    assert answer.content == stored.encode()
    assert answer.content == TypeAdapter(dict[str, Any]).dump_json(answer.json())

    path = tmp_path / "receipt.json"
    path.write_bytes(answer.content)
    done = run_cli("verify", str(path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("valid: settlement_finality_receipt")
    assert json.loads(path.read_text())["settlement_id"] == sid


@pytest.mark.postgres
def test_on_postgresql_the_receipt_route_answers_the_stored_bytes(
    anvil: Anvil, tmp_path: Path, pg_url: str
) -> None:
    """The route's one read on the other store: not terminal yet is a 404 saying so (not
    pending), an unknown id a 404 naming it, the confirmed one the stored bytes."""
    daemon = Daemon(tmp_path / "pg", anvil.url, store_url=pg_url, confirmations=2)
    try:
        unknown = daemon.get("/v1/settlements/" + "0" * 64 + "/receipt")
        assert unknown.status_code == 404, unknown.text
        assert unknown.json()["fields"] == ["settlement_id"]

        tx = anvil.send()
        anvil.receipt(tx)
        waiting = daemon.register(tx)["settlement_id"]
        early = daemon.get(f"/v1/settlements/{waiting}/receipt")  # one block deep of two
        assert early.status_code == 404, early.text
        assert early.json()["pending"] is False, early.text

        sid, _ = confirmed_receipt(daemon, anvil)
        answer = daemon.get(f"/v1/settlements/{sid}/receipt")
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] == "application/json"
        [(stored,)] = daemon.query(
            "SELECT CAST(body AS TEXT) FROM receipts WHERE settlement_id = ? AND kind = ?",
            sid,
            "settlement_finality_receipt",
        )
        assert answer.content == stored.encode()
        assert answer.content == TypeAdapter(dict[str, Any]).dump_json(answer.json())
    finally:
        daemon.close()
