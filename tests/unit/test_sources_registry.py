"""Adding a source is one module plus an entry point: a real installed distribution (a
``.dist-info`` directory on ``sys.path``) is found, configured and built, and cannot take
over a built-in kind."""

from __future__ import annotations

import importlib.metadata
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from guard.source import SettlementSource
from watcher.config.loading import parse_config
from watcher.config.sources import SourceConfig
from watcher.sources.registry import (
    ENTRY_POINT_GROUP,
    UnknownSourceKind,
    build_source,
    factory,
    known_kinds,
)
from watcher.sources.rq_source import RqSource
from watcher.sources.stripe_source import StripeSource

PLUGIN = '''
from guard.source import SourceObservation, SourceStatus, Snapshot


class LedgerSource:
    """A plugin source: every ref is final (enough to prove the plumbing)."""

    kind = "ledger_entry"
    reversible = False

    def __init__(self, config):
        self.name = config.name
        self.options = dict(config.options)

    def check_ref(self, ref):
        return ref

    def fetch(self, ref, now):
        return Snapshot(ref, now, {"entry": ref})

    def observe(self, ref, snapshot, previous, now):
        from guard.settlement import Evidence

        return SourceObservation(ref, SourceStatus.FINAL, Evidence.of("posted", now, ref=ref))

    def close(self):
        pass


def wrong_kind(config):
    source = LedgerSource(config)
    source.kind = "something_else"
    return source
'''


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Install a plugin distribution into a directory on ``sys.path``."""
    module = f"fw_plugin_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(PLUGIN)
    info = tmp_path / "fw_ledger_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fw-ledger-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\n"
        f"ledger_entry = {module}:LedgerSource\n"
        f"mislabelled = {module}:wrong_kind\n"
        f"rq_job = {module}:LedgerSource\n"
        f"Bad-Name = {module}:LedgerSource\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield module
    sys.modules.pop(module, None)


def test_the_built_in_kinds() -> None:
    assert {"evm_tx", "stripe_payment_intent", "rq_job", "celery_task"} <= set(known_kinds())
    assert factory("stripe_payment_intent") is StripeSource
    with pytest.raises(UnknownSourceKind, match="unknown source kind 'kafka'"):
        factory("kafka")


def test_a_plugin_kind_is_found_configured_and_built(plugin: str) -> None:
    assert "ledger_entry" in known_kinds()
    config = parse_config(
        '[[chains]]\nname = "local"\nchain_id = 31337\nrpc = ["http://127.0.0.1:8545"]\n'
        '[[sources]]\nname = "ledger"\nkind = "ledger_entry"\noptions = { book = "main" }\n'
    )
    source: SettlementSource = build_source(config.sources[0])
    assert (source.kind, source.name) == ("ledger_entry", "ledger")
    assert getattr(source, "options", None) == {"book": "main"}


def test_a_plugin_cannot_replace_a_built_in_kind(
    plugin: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="finality.sources"):
        kinds = known_kinds()
    assert "Bad-Name" not in kinds
    assert "is a built-in kind" in caplog.text and "Bad-Name" in caplog.text
    rq = SourceConfig.model_validate(
        {"name": "jobs", "kind": "rq_job", "redis_url": "redis://127.0.0.1:1/0"}
    )
    assert isinstance(build_source(rq), RqSource)


def test_a_factory_that_builds_the_wrong_kind_is_refused(plugin: str) -> None:
    config = SourceConfig.model_validate({"name": "odd", "kind": "mislabelled"})
    with pytest.raises(TypeError, match="built a 'something_else' source"):
        build_source(config)


def test_entry_points_are_read_from_installed_metadata(plugin: str) -> None:
    names = {ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    assert {"ledger_entry", "mislabelled"} <= names
