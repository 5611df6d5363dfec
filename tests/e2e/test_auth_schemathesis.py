"""The live ``/openapi.json`` of a daemon with ``[[api.tokens]]`` checked against its answers:
the same schemathesis run as tests/e2e/test_schemathesis.py, with a token holding
every scope, fewer examples per operation. Schemathesis' auth check also sends each request
without the token and requires a 401 (every guarded operation documents it)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
import schemathesis

from tests.e2e.test_auth import bearer, with_api_keys
from tests.e2e.test_schemathesis import IDLE_POLL_S, _failure
from tests.support.anvil import Anvil
from tests.support.daemon import Daemon

pytestmark = pytest.mark.anvil

TOKEN = "fw-all-" + secrets.token_hex(16)
EXAMPLES = 6
"""Requests per operation: the open run covers the bodies; this one the tokens."""


@pytest.fixture(scope="module")
def token_daemon(module_anvil: Anvil, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    daemon = Daemon(
        tmp_path_factory.mktemp("auth-st"),
        module_anvil.url,
        start=False,
        poll_interval_s=IDLE_POLL_S,
    )
    with_api_keys(
        daemon,
        f'[[api.tokens]]\nname = "all"\ntoken = "{TOKEN}"\nscopes = ["read", "register", "admin"]\n',
    )
    daemon.start()
    yield daemon
    daemon.close()


def test_every_route_answers_as_documented_with_tokens(token_daemon: Daemon) -> None:
    base = token_daemon.url
    schema = schemathesis.openapi.from_url(f"{base}/openapi.json")
    failures = [
        _failure(result.ok(), base, bearer(TOKEN), EXAMPLES)  # type: ignore[union-attr]
        for result in schema.get_all_operations()
    ]
    assert not any(failures), "\n\n".join(f for f in failures if f)
    assert TOKEN not in token_daemon.log()
