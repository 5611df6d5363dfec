"""A store that cannot be written, seen from outside: the daemon (a real process) on the
machine's PostgreSQL through a TCP proxy the test cuts (the server unreachable) and restores.

Registrations answer 503 naming the reason at once (not a bare ``Internal Server Error``),
``/healthz`` says the same at once (not 12 s later, not ``last_error: null``), the log gets
one clear line instead of a traceback a second, and everything works again once the store
is reachable.
"""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.e2e.helpers import unknown_hash
from tests.support.anvil import Anvil
from tests.support.daemon import CHAIN, Daemon, wait_for
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.anvil

OUTAGE_S = 3.0
"""How long the test keeps the store cut while it watches answers and the log."""


def _through(url: str, port: int) -> str:
    """``url`` with its port replaced by ``port`` (the proxy's)."""
    parts = urlsplit(url)
    host = parts.netloc.rsplit(":", 1)[0] if ":" in parts.netloc else parts.netloc
    return urlunsplit(parts._replace(netloc=f"{host}:{port}"))


def test_an_unreachable_store_is_a_503_naming_it_at_once_and_recovers(
    tmp_path: Path, anvil: Anvil, pg_url: str
) -> None:
    upstream = urlsplit(pg_url).port or 5432
    with TcpProxy(upstream) as proxy:
        daemon = Daemon(tmp_path / "d", anvil.url, store_url=_through(pg_url, proxy.port))
        try:
            first = daemon.post("/v1/settlements", {"chain": CHAIN, "tx_hash": unknown_hash(1)})
            assert first.status_code == 201, first.text
            log_before = len(daemon.log())

            proxy.cut()
            started = time.monotonic()
            refused = daemon.post(
                "/v1/settlements", {"chain": CHAIN, "tx_hash": unknown_hash(2)}, timeout=10
            )
            health = daemon.get("/healthz", timeout=10)
            took = time.monotonic() - started

            assert refused.status_code == 503, refused.text
            assert refused.json()["error"].startswith("store: unavailable: the database server")
            assert health.status_code == 503, health.text
            assert "database server" in str(health.json().get("store_error")), health.text
            assert took < 5.0, f"the 503s took {took:.1f} s"

            deadline = time.monotonic() + OUTAGE_S
            while time.monotonic() < deadline:  # callers keep trying, probes keep probing
                assert (
                    daemon.post(
                        "/v1/settlements", {"chain": CHAIN, "tx_hash": unknown_hash(3)}
                    ).status_code
                    == 503
                )
                assert daemon.get("/healthz").status_code == 503
                time.sleep(0.2)
            outage_log = daemon.log()[log_before:]
            assert "Traceback" not in outage_log, outage_log[-3000:]
            assert outage_log.count("store: writes fail") == 1, outage_log[-3000:]

            proxy.restore()
            wait_for(
                lambda: daemon.get("/healthz").status_code == 200,
                timeout=20,
                what="/healthz 200 after the store came back",
            )
            again = daemon.post("/v1/settlements", {"chain": CHAIN, "tx_hash": unknown_hash(2)})
            assert again.status_code == 201, again.text
            assert "store: writes succeed again" in daemon.log()
        finally:
            daemon.close()
