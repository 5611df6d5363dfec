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
