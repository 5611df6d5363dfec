"""``[delivery] allow_destinations`` and the alert URLs checked at config load."""

from __future__ import annotations

import pytest

from watcher.config.errors import ConfigError
from watcher.config.loading import parse_config


def config(alert_url: str, chain_id: int = 31337, allow: list[str] | None = None) -> str:
    allow_line = "" if allow is None else f"allow_destinations = {allow!r}".replace("'", '"')
    return f"""
[delivery]
{allow_line}

[[alerts]]
type = "webhook"
url = "{alert_url}"

[[chains]]
name = "c"
chain_id = {chain_id}
rpc = ["http://127.0.0.1:8545"]
"""


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://169.254.169.254/latest", "link-local"),
        ("http://10.0.0.1:6379/", "private"),
        ("http://[fd00::1]/", "private"),
        ("http://0.0.0.0:9/", "unspecified"),
        ("http://[::ffff:10.0.0.1]/", "private"),
    ],
)
def test_an_alert_url_at_an_inner_address_is_a_config_error(url: str, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(config(url))
    assert "alerts[0].url" in str(caught.value) and reason in str(caught.value)


def test_an_alert_url_with_credentials_is_refused_without_showing_them() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(config("http://ops:HUNTER2secret@127.0.0.1:9/alerts"))
    assert "credentials" in str(caught.value)
    assert "HUNTER2secret" not in str(caught.value)


def test_loopback_alerts_are_allowed_on_dev_chains_only_unless_listed() -> None:
    assert parse_config(config("http://127.0.0.1:9/alerts")).alerts[0].url
    with pytest.raises(ConfigError, match="loopback"):
        parse_config(config("http://127.0.0.1:9/alerts", chain_id=1))
    listed = parse_config(config("http://127.0.0.1:9/alerts", chain_id=1, allow=["127.0.0.1"]))
    assert listed.delivery.allow_destinations == ["127.0.0.1"]
    assert not listed.local_dev_only


def test_the_allow_list_admits_what_it_names() -> None:
    ok = config("http://10.1.2.3:8443/a", chain_id=1, allow=["10.1.0.0/16", "hooks.internal:8443"])
    assert parse_config(ok).destinations().entries


def test_an_unreadable_allow_list_entry_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(config("http://127.0.0.1:9/", allow=["hooks.internal:http"]))
    assert "delivery.allow_destinations" in str(caught.value) and "port" in str(caught.value)
