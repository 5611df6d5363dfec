"""The one redaction (chains/redact.py): what a configured URL and an error text may show."""

from __future__ import annotations

import pytest

from chains.errors import ChainIdMismatch, RpcUnavailable
from chains.redact import redact_text, redact_url

KEYED = "https://user:pa55word@eth.example:8443/v2/PATHKEY0123456789?apikey=QUERYKEY0123456#frag"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (KEYED, "https://eth.example:8443/…"),
        ("http://127.0.0.1:8545", "http://127.0.0.1:8545"),
        ("http://127.0.0.1:8545/", "http://127.0.0.1:8545"),
        ("wss://node.example/ws/WSKEY0123456789", "wss://node.example/…"),
        ("http://u:p@[fd00::1]:80/x", "http://[fd00::1]:80/…"),
        ("postgresql://app:s3cret@db.example/finality", "postgresql://db.example/…"),
        ("http://host:notaport/KEY", "http://…"),
        ("not a url", "…"),
    ],
)
def test_redact_url_keeps_scheme_host_and_port_only(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_redact_url_without_the_mark_names_the_origin() -> None:
    assert redact_url(KEYED, mark=False) == "https://eth.example:8443"


def test_redact_text_scrubs_a_configured_url_whole_and_in_pieces() -> None:
    requests_text = (
        "HTTPSConnectionPool(host='eth.example', port=8443): Max retries exceeded with url: "
        "/v2/PATHKEY0123456789?apikey=QUERYKEY0123456 (Caused by user:pa55word) "
        f"while calling {KEYED}."
    )
    shown = redact_text(requests_text, [KEYED])
    for secret in ("PATHKEY0123456789", "QUERYKEY0123456", "pa55word", "frag"):
        assert secret not in shown
    assert "https://eth.example:8443/…." in shown  # the sentence's full stop is kept
    assert "host='eth.example', port=8443" in shown


def test_redact_text_redacts_an_unconfigured_url_with_a_path_or_credentials() -> None:
    text = "GET http://a:b@other.example/KEY123?x=1 failed; sqlite:///var/lib/finality.db"
    assert redact_text(text) == "GET http://other.example/… failed; sqlite:///var/lib/finality.db"


def test_short_pieces_are_not_scrubbed_from_ordinary_words() -> None:
    assert redact_text("rpc_unhealthy", ["http://n.example/rpc"]) == "rpc_unhealthy"


def test_chain_errors_are_redacted_where_they_are_made() -> None:
    detail = (
        "ConnectionError: HTTPSConnectionPool: url: /v2/PATHKEY0123456789?apikey=QUERYKEY0123456"
    )
    error = RpcUnavailable(KEYED, "eth_blockNumber", detail)
    assert "KEY0123" not in str(error) and "pa55word" not in str(error)
    assert str(error).startswith("https://eth.example:8443/…: eth_blockNumber: ")
    assert error.endpoint == KEYED  # kept for routing
    mismatch = ChainIdMismatch("main", KEYED, 1, 5)
    assert "KEY0123" not in str(mismatch) and "eth.example:8443" in str(mismatch)


def test_a_configured_url_without_secrets_stays_readable() -> None:
    url = "http://127.0.0.1:38519"
    text = f"endpoint {url} serves chain id 5"
    assert redact_text(text, [url, "sk_live_0123456789"]) == text
    assert redact_text("key sk_live_0123456789 used", ["sk_live_0123456789"]) == "key … used"


def test_a_user_name_beside_a_password_is_not_a_secret() -> None:
    url = "postgresql://postgres:pgpassword@db.example/finality"
    shown = redact_text("store postgresql://db.example/… as postgres: pgpassword", [url])
    assert shown == "store postgresql://db.example/… as postgres: [redacted]"
