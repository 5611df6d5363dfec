"""The daemon's service and HTTP API in the test process, on a real loopback port.

The source tests need what ``finality run`` runs (the store, the sources component, the
delivery sender, the API under uvicorn) but not the chain pollers: :class:`LiveApp` builds
the real daemon (:func:`watcher.app.build.build`) from a real config file, serves
:func:`watcher.api.server.create_app` with uvicorn on a free port, and starts the
components on the service's own scheduler. Requests go over real HTTP; only the process boundary is saved.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from tests.support.anvil import free_port
from tests.support.daemon import config_text, toml_value
from watcher.app.build import build
from watcher.config.loading import load_config

UNUSED_RPC = "http://127.0.0.1:9"
"""The one chain a config must have; nothing polls it here."""


def source_config_file(
    tmp: Path,
    sources: list[dict[str, Any]],
    delivery: dict[str, Any] | None = None,
    port: int | None = None,
) -> Path:
    """Write a config with a SQLite store, the API on ``port``, the unused chain, a dev
    signing key in ``tmp``, ``[delivery]`` settings and one ``[[sources]]`` per dict."""
    chain = {"name": "local", "chain_id": 31337, "rpc": [UNUSED_RPC], "confirmations": 1}
    text = config_text(f"sqlite:///{tmp}/finality.db", f"127.0.0.1:{port or free_port()}", chain)
    text += f"\n[signing]\ndev_key_file = {toml_value(str(tmp / 'dev-key'))}\n"
    if delivery:
        text += "\n[delivery]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in delivery.items())
    for table in sources:
        text += "\n[[sources]]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in table.items())
    path = tmp / "finality.toml"
    path.write_text(text)
    return path


def token_tables(registrar: str, reader: str, registrar_name: str = "backend") -> str:
    """``[[api.tokens]]`` tables to append to a config: ``registrar`` holding read and
    register (named ``registrar_name``), ``reader`` holding read alone (named ``reader``)."""
    return f"""
[[api.tokens]]
name = "{registrar_name}"
token = "{registrar}"
scopes = ["read", "register"]

[[api.tokens]]
name = "reader"
token = "{reader}"
scopes = ["read"]
"""


class LiveApp:
    """A service and its API on loopback (see the module doc). Use as a context manager.

    ``clock`` (Unix ms) is the service's clock: give a test's controllable clock when it
    looks at a state that lasts only a while (a finality window), so a slow machine cannot
    let the state pass before the test sees it."""

    def __init__(
        self,
        config_path: Path,
        start_components: bool = False,
        clock: Callable[[], int] | None = None,
    ) -> None:
        from watcher.api.server import create_app

        self.config = load_config(config_path)
        self.service = build(self.config) if clock is None else build(self.config, clock)
        app = create_app(self.service)
        self.url = f"http://127.0.0.1:{self.config.api.port}"
        self.server = uvicorn.Server(
            uvicorn.Config(
                app,
                host="127.0.0.1",
                port=self.config.api.port,
                log_config=None,
                access_log=False,
                lifespan="off",
                ws="none",  # no websockets routes; importing them warns under -W error
            )
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        self.http = httpx.Client(base_url=self.url, timeout=10.0)
        if start_components:
            self.start_components()

    def start_components(self) -> None:
        """What ``App.start_polling`` does, without the chain jobs."""
        self.service.scheduler.start()
        for component in self.service.components:
            component.start()

    def close(self) -> None:
        """Stop the API, the scheduler and the components; close the store."""
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.http.close()
        self.service.stop()

    def __enter__(self) -> LiveApp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def register(self, **body: Any) -> dict[str, Any]:
        """Register a source settlement as ``POST /v1/settlements`` will (the function the
        route calls); it must succeed."""
        from watcher.api.deps import deps_of
        from watcher.api.source_settlements import register_source_settlement

        view, status = register_source_settlement(deps_of(self.service), body)
        assert status in (200, 201), view
        return view

    def settlement(self, settlement_id: str) -> dict[str, Any]:
        """The stored view of a source settlement."""
        from watcher.api.deps import deps_of
        from watcher.api.source_settlements import source_view

        view = source_view(deps_of(self.service), self.service.store.settlement(settlement_id))
        assert view is not None
        return view

    def events(self, settlement_id: str) -> list[str]:
        """Kinds of the events stored for a settlement, in order."""
        return [e.kind for e in self.service.store.events(settlement_id=settlement_id)]

    def wait_verdict(
        self, settlement_id: str, verdict: str, timeout: float = 15.0
    ) -> dict[str, Any]:
        """Wait until the settlement has ``verdict``; returns its view."""
        deadline = time.monotonic() + timeout
        while True:
            view = self.settlement(settlement_id)
            if view["verdict"] == verdict:
                return view
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{settlement_id}: still {view['verdict']} after {timeout} s, not {verdict}: "
                    f"{view['evidence']}"
                )
            time.sleep(0.05)


@contextlib.contextmanager
def chain_app(tmp: Path) -> Iterator[LiveApp]:
    """A :class:`LiveApp` over :func:`source_config_file` (no sources) whose chain ``local``
    is recorded in the store, as after its first poll: the API's reads and registrations
    then work as on a daemon that follows its chain, with no node behind it. Its clock is
    held still: a view says the time it is answered, and these tests compare answers."""
    still = int(time.time() * 1000)
    with LiveApp(source_config_file(tmp, []), clock=lambda: still) as app:
        app.service.store.ensure_chain("local", 31337, app.service.clock())
        yield app
