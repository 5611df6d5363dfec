"""Every request body that names a ``commit_url`` or an amount checks it by the one rule
(watcher.api.models: ``checked_commit_url``, ``checked_amount``): a subscription or an invoice
refuses, when it is given, the URL a settlement or a payment refuses, for the same reason."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from watcher.api.models.deposits import InvoiceRequest, SubscriptionRequest
from watcher.api.models.payments import PaymentRequest
from watcher.api.models.settlements import SettlementRequest

ADDRESS = "0x" + "11" * 20

BODIES: list[tuple[type[BaseModel], dict[str, Any]]] = [
    (SettlementRequest, {"chain": "local", "tx_hash": "0x" + "ab" * 32}),
    (
        PaymentRequest,
        {"kind": "evm_payment", "chain": "local", "to": ADDRESS, "asset": "native", "amount": "5"},
    ),
    (SubscriptionRequest, {"chain": "local", "addresses": [ADDRESS], "assets": ["native"]}),
    (
        InvoiceRequest,
        {"chain": "local", "asset": "native", "amount": "5", "expires_in_s": 600.0},
    ),
]
NAMES = [model.__name__ for model, _ in BODIES]


@pytest.mark.parametrize(("model", "body"), BODIES, ids=NAMES)
@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://example.com/a\r\nX-Injected: 1", "control character"),
        ("http://example.com/" + "a" * 65_536, "longer than 65536 bytes"),
        ("ftp://example.com/", "http:// or https://"),
    ],
)
def test_every_body_refuses_a_commit_url_that_cannot_be_sent(
    model: type[BaseModel], body: dict[str, Any], url: str, reason: str
) -> None:
    model.model_validate({**body, "commit_url": "https://example.com/hook"})
    with pytest.raises(ValidationError, match=reason) as caught:
        model.model_validate({**body, "commit_url": url})
    assert [e["loc"] for e in caught.value.errors()] == [("commit_url",)]


@pytest.mark.parametrize(("model", "body"), [b for b in BODIES if "amount" in b[1]], ids=str)
def test_amounts_are_read_alike(model: type[BaseModel], body: dict[str, Any]) -> None:
    assert model.model_validate({**body, "amount": "0005"}).model_dump()["amount"] == "5"
    with pytest.raises(ValidationError) as caught:
        model.model_validate({**body, "amount": "1.5"})
    assert [e["loc"] for e in caught.value.errors()] == [("amount",)]
