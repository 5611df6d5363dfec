"""``[api]`` callers and hosts: ``[[api.tokens]]`` rules, the loopback rule for an
open API, and which ``Host`` names the guards accept. Problems never quote a token."""

from __future__ import annotations

import hashlib

import pytest

from watcher.api.guards import HostPolicy, host_name
from watcher.config.api import ApiConfig
from watcher.config.errors import ConfigError
from watcher.config.loading import parse_config

CHAIN = '[[chains]]\nname = "local"\nchain_id = 31337\nrpc = ["http://127.0.0.1:8545"]\n'
SECRET = "s3cret-token-value-0123456789"


def config(api: str) -> str:
    return f"[api]\n{api}\n{CHAIN}"


def problems(api: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(config(api))
    return str(info.value)


def test_tokens_from_env_digest_and_literal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BACKEND_TOKEN", SECRET)
    digest = hashlib.sha256(b"another-token-0123456789").hexdigest()
    api = parse_config(
        config(
            'listen = "0.0.0.0:8710"\n'
            '[[api.tokens]]\nname = "backend"\ntoken = "${BACKEND_TOKEN}"\n'
            'scopes = ["read", "register"]\n'
            f'[[api.tokens]]\nname = "ops"\nsha256 = "{digest}"\nscopes = ["admin"]\n'
        )
    ).api
    assert [t.name for t in api.tokens] == ["backend", "ops"]
    assert api.tokens[0].digest == hashlib.sha256(SECRET.encode()).digest()
    assert api.tokens[1].digest.hex() == digest


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        (
            'name = "a"\nscopes = ["read"]',
            "api.tokens[0].token: give exactly one of token or sha256",
        ),
        (
            f'name = "a"\ntoken = "{SECRET}"\nsha256 = "{"0" * 64}"\nscopes = ["read"]',
            "give exactly one",
        ),
        ('name = "a"\ntoken = "short-secret"\nscopes = ["read"]', "at least 16 characters"),
        ('name = "a"\nsha256 = "ABC"\nscopes = ["read"]', "api.tokens[0].sha256: must be 64"),
        (f'name = "a"\ntoken = "{SECRET}"\nscopes = ["write"]', "api.tokens[0].scopes[0]"),
        (f'name = "a"\ntoken = "{SECRET}"\nscopes = []', "api.tokens[0].scopes"),
    ],
)
def test_bad_tokens_are_named_without_their_value(table: str, expected: str) -> None:
    text = problems(f"[[api.tokens]]\n{table}\n")
    assert expected in text
    assert "short-secret" not in text and SECRET not in text


def test_duplicate_names_and_tokens() -> None:
    text = problems(
        f'[[api.tokens]]\nname = "a"\ntoken = "{SECRET}"\nscopes = ["read"]\n'
        f'[[api.tokens]]\nname = "a"\ntoken = "{SECRET}"\nscopes = ["admin"]\n'
    )
    assert "api.tokens[1].name: duplicate token name 'a'" in text
    assert "api.tokens[1].token: the same token as tokens[0]" in text
    assert SECRET not in text


def test_an_unset_token_variable_is_named() -> None:
    text = problems(
        '[[api.tokens]]\nname = "a"\ntoken = "${NO_SUCH_TOKEN_VAR}"\nscopes = ["read"]\n'
    )
    assert "api.tokens[0].token: environment variable NO_SUCH_TOKEN_VAR is not set" in text


@pytest.mark.parametrize("listen", ["0.0.0.0:8710", "[::]:8710", "10.0.0.5:8710", "example.com:1"])
def test_open_beyond_loopback_is_refused_unless_allowed(listen: str) -> None:
    text = problems(f'listen = "{listen}"')
    assert "api.listen:" in text and "beyond loopback" in text and "allow_open" in text
    assert parse_config(config(f'listen = "{listen}"\nallow_open = true')).api.allow_open


@pytest.mark.parametrize("listen", ["127.0.0.1:8710", "127.0.0.2:1", "[::1]:8710", "localhost:9"])
def test_open_on_loopback_is_fine(listen: str) -> None:
    assert ApiConfig(listen=listen).tokens == []


@pytest.mark.parametrize(
    ("header", "name"),
    [("Example.COM:8710", "example.com"), ("[::1]:8710", "::1"), ("host.", "host"), ("::1", "::1")],
)
def test_host_name(header: str, name: str) -> None:
    assert host_name(header) == name


def test_host_policy() -> None:
    loopback = HostPolicy(ApiConfig(listen="127.0.0.1:8710"))
    assert all(loopback.allows(h) for h in ("127.0.0.1:8710", "localhost", "[::1]:1"))
    assert not any(loopback.allows(h) for h in ("evil.example", "10.0.0.1", "localhost.evil"))
    named = HostPolicy(ApiConfig(listen="10.0.0.5:8710", allow_open=True, allowed_hosts=["fw.lan"]))
    assert named.allows("10.0.0.5:8710") and named.allows("FW.lan:8710")
    assert not named.allows("localhost") and not named.allows("10.0.0.6")
    wildcard = HostPolicy(ApiConfig(listen="0.0.0.0:8710", allow_open=True))
    assert wildcard.allows("192.168.1.4:8710") and wildcard.allows("localhost")
    assert not wildcard.allows("rebound.example")
    anything = HostPolicy(ApiConfig(listen="127.0.0.1:1", allowed_hosts=["*"]))
    assert anything.allows("whatever.example")
