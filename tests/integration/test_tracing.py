"""OpenTelemetry spans from the daemon's real parts, caught by the SDK's in-memory exporter.

The service runs in this process (tests/support/sources_app.py) over a real anvil, with the
API on loopback and a real receiver for the commit: an HTTP registration, polls, the block
commits, the receipt build and the delivery each leave their span, with the chain and the
settlement ids as attributes and no secret anywhere. Without the ``opentelemetry`` package
(hidden in a subprocess) tracing is a shared no-op and the API gets no middleware.
"""

from __future__ import annotations

import base64
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.support.anvil import ROOT, Anvil
from tests.support.daemon import config_text, toml_value, wait_for
from tests.support.ports import free_port
from tests.support.receiver import Receiver
from tests.support.sources_app import LiveApp

pytestmark = pytest.mark.anvil

SECRET = "whsec_" + base64.b64encode(b"tracing-secret-24-bytes!").decode()


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    """An in-memory exporter on the process's SDK provider (set once per process)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield memory
    memory.shutdown()


def live_config(tmp: Path, anvil: Anvil) -> Path:
    chain = {"name": "local", "chain_id": 31337, "rpc": [anvil.url], "confirmations": 2}
    text = config_text(f"sqlite:///{tmp}/f.db", f"127.0.0.1:{free_port()}", chain)
    text += f"\n[signing]\ndev_key_file = {toml_value(str(tmp / 'k'))}\n"
    text += f"\n[delivery]\nsecret = {toml_value(SECRET)}\nreceipt_wait_s = 5.0\n"
    path = tmp / "finality.toml"
    path.write_text(text)
    return path


def named(spans: tuple[ReadableSpan, ...], name: str) -> list[dict[str, object]]:
    return [dict(s.attributes or {}) for s in spans if s.name == name]


def test_a_settlement_leaves_a_span_at_every_step_without_secrets(
    anvil: Anvil, tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    with Receiver(SECRET) as receiver, LiveApp(live_config(tmp_path, anvil)) as app:
        app.service.start_chain("local")
        app.start_components()
        tx = anvil.send()
        anvil.receipt(tx)
        body = {"chain": "local", "tx_hash": tx, "dependent_state": {"order": "A-1"}}
        answer = httpx.post(
            f"{app.url}/v1/settlements", json={**body, "commit_url": receiver.url("/commit")}
        )
        assert answer.status_code == 201, answer.text
        sid = answer.json()["settlement_id"]

        def committed() -> bool:
            anvil.mine(1)
            app.service.poll_chain("local")
            return any(e.body.get("settlement_id") == sid for e in receiver.applied.values())

        wait_for(committed, 60, 0.2, "the commit delivered")
    spans = exporter.get_finished_spans()

    [request] = [a for a in named(spans, "finality.api_request") if a["http.method"] == "POST"]
    assert request == {
        "http.method": "POST",
        "url.path": "/v1/settlements",
        "http.status_code": 201,
    }
    assert {"finality.chain": "local"} in named(spans, "finality.poll")
    blocks = named(spans, "finality.block_commit")
    assert blocks and all(b["finality.chain"] == "local" for b in blocks)
    assert {"finality.chain": "local", "finality.settlement_id": sid} in named(
        spans, "finality.receipt_build"
    )
    [delivery] = [
        d for d in named(spans, "finality.delivery") if d["finality.delivery_kind"] == "commit"
    ]
    assert delivery["finality.settlement_id"] == sid and delivery["http.status_code"] == 200
    values = [str(v) for s in spans for v in (s.attributes or {}).values()]
    for secret in (SECRET, SECRET.removeprefix("whsec_"), receiver.url("/commit"), "A-1"):
        assert not any(secret in v for v in values), secret


def test_without_the_package_tracing_is_a_shared_no_op() -> None:
    probe = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "from watcher import otel_tracing\n"
        "assert not otel_tracing.enabled()\n"
        "assert otel_tracing.span('a', {}) is otel_tracing.span('b', {'x': 1})\n"
        "print('off')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0 and done.stdout == "off\n", done.stderr
