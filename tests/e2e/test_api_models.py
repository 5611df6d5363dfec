"""What ``/openapi.json`` of a real daemon says about bodies and errors, and that the shared
pydantic models (``watcher.api.models``) read its live answers without changing them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.helpers import unknown_hash
from tests.support.daemon import CHAIN, Daemon
from watcher.api.models.settlements import SettlementView
from watcher.api.models.views import ChainView, TxView

pytestmark = pytest.mark.anvil


@pytest.fixture(scope="module")
def spec(module_daemon: Daemon) -> dict[str, Any]:
    answer = module_daemon.get("/openapi.json")
    assert answer.status_code == 200
    doc: dict[str, Any] = answer.json()
    return doc


def test_every_error_is_documented_as_the_shape_the_api_answers(spec: dict[str, Any]) -> None:
    assert "HTTPValidationError" not in json.dumps(spec), "FastAPI's {detail} is not our shape"
    error = spec["components"]["schemas"]["ErrorBody"]
    assert set(error["required"]) == {"error"} and "fields" in error["properties"]
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            for status, response in operation["responses"].items():
                if status.startswith(("4", "5")) and path != "/healthz":  # 503: the health body
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (
                        f"{method} {path} {status}"
                    )


def test_the_registration_body_and_view_are_described(spec: dict[str, Any]) -> None:
    create = spec["paths"]["/v1/settlements"]["post"]
    chain_body, source_body, payment_body = create["requestBody"]["content"]["application/json"][
        "schema"
    ]["anyOf"]
    assert chain_body["properties"]["chain"]["enum"] == [CHAIN]
    assert set(chain_body["required"]) == {"chain", "tx_hash"}
    assert chain_body["additionalProperties"] is False
    assert set(source_body["required"]) == {"kind", "ref"}
    assert set(payment_body["required"]) == {"kind", "chain", "to", "asset", "amount"}
    assert payment_body["properties"]["chain"]["enum"] == [CHAIN]
    created = create["responses"]["201"]["content"]["application/json"]["schema"]
    assert created == {"$ref": "#/components/schemas/SettlementView"}
    view = spec["components"]["schemas"]["SettlementView"]["properties"]
    assert {"verdict", "directive", "confirmations", "receipt", "binding"} <= set(view)
    listing = spec["paths"]["/v1/settlements"]["get"]
    params = {p["name"]: p for p in listing["parameters"]}
    assert params["limit"]["schema"]["maximum"] == 500
    assert set(params) == {"chain", "verdict", "kind", "cursor", "limit"}


def test_the_models_read_live_answers_and_the_answers_keep_their_keys(
    module_daemon: Daemon,
) -> None:
    tx = unknown_hash(0x5EED)
    created = module_daemon.post("/v1/settlements", {"chain": CHAIN, "tx_hash": tx}).json()
    read = module_daemon.settlement(created["settlement_id"])
    assert set(read) == set(created), "GET answers the keys POST answers (none added)"
    assert "kind" not in read and "ref" not in read
    assert SettlementView.model_validate(read).settlement_id == created["settlement_id"]
    live = module_daemon.get(f"/v1/chains/{CHAIN}/txs/{unknown_hash(0x5EEE)}").json()
    assert TxView.model_validate(live).registered is False
    assert "initiated_at" not in live
    chains = module_daemon.get("/v1/chains").json()
    assert isinstance(chains, list)
    assert ChainView.model_validate(chains[0]).name == CHAIN
