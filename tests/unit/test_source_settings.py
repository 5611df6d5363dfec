"""A source kind declares its own settings: a plugin does it as the built-ins do.

A real distribution (a ``.dist-info`` directory on ``sys.path``) registers two kinds: one
whose factory names a ``settings_model`` (keys of its own, checked when the file is
loaded), and one whose module cannot be imported (a missing dependency, as for a built-in
kind whose extra is not installed). Both are judged when the configuration is read, not
when the daemon builds the source.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from watcher.config.errors import ConfigError
from watcher.config.loading import parse_config
from watcher.config.source_kinds import ENTRY_POINT_GROUP
from watcher.sources.registry import build_source

PLUGIN = """
from pydantic import Field

from guard.source import Snapshot, SourceObservation, SourceStatus
from watcher.config.sources import SourceConfig


class VaultSettings(SourceConfig):
    vault_url: str
    batch_size: int = Field(default=10, ge=1)


class VaultSource:
    kind = "vault_entry"
    reversible = False
    settings_model = VaultSettings

    def __init__(self, config):
        settings = VaultSettings.narrow(config)
        self.name = settings.name
        self.url = settings.vault_url
        self.batch_size = settings.batch_size

    def check_ref(self, ref):
        return ref

    def fetch(self, ref, now):
        return Snapshot(ref, now, {})

    def observe(self, ref, snapshot, previous, now):
        from guard.settlement import Evidence

        return SourceObservation(ref, SourceStatus.FINAL, Evidence.of("posted", now, ref=ref))

    def close(self):
        pass
"""

BROKEN = "import fw_no_such_dependency_for_the_test  # noqa: F401\n"

CHAIN = '[[chains]]\nname = "local"\nchain_id = 31337\nrpc = ["http://127.0.0.1:8545"]\n'


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Install the two kinds' distribution into a directory on ``sys.path``."""
    module = f"fw_vault_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{module}.py").write_text(PLUGIN)
    (tmp_path / f"{module}_broken.py").write_text(BROKEN)
    info = tmp_path / "fw_vault_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fw-vault-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\n"
        f"vault_entry = {module}:VaultSource\n"
        f"broken_entry = {module}_broken:Source\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield module
    sys.modules.pop(module, None)


def _problems(table: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(CHAIN + "[[sources]]\n" + table)
    return list(caught.value.problems)


def test_a_plugin_kind_reads_its_own_keys(plugin: str) -> None:
    config = parse_config(
        CHAIN + '[[sources]]\nname = "vault"\nkind = "vault_entry"\n'
        'vault_url = "https://vault.example"\nbatch_size = 5\n'
    )
    source = build_source(config.sources[0])
    assert (getattr(source, "url", None), getattr(source, "batch_size", None)) == (
        "https://vault.example",
        5,
    )


def test_a_plugin_kinds_keys_are_checked_when_the_file_is_read(plugin: str) -> None:
    base = 'name = "vault"\nkind = "vault_entry"\n'
    assert _problems(base) == ["sources[0].vault_url: is required"]
    assert _problems(base + 'vault_url = "u"\nbatch_size = 0\n') == [
        "sources[0].batch_size: must be >= 1 (got 0)"
    ]
    assert _problems(base + 'vault_url = "u"\nbatch_sise = 2\n') == [
        "sources[0].batch_sise: unknown key (did you mean 'batch_size'?)"
    ]
    assert _problems(base + 'vault_url = "u"\nredis_url = "redis://h/0"\n') == [
        "sources[0].redis_url: is a setting of kind rq_job, not vault_entry"
    ]
    assert _problems(base + 'vault_url = "u"\noptions = { a = "b" }\n') == [
        "sources[0].options: kind vault_entry takes no options"
    ]


def test_a_kind_whose_module_cannot_be_imported_is_a_configuration_error(plugin: str) -> None:
    (problem,) = _problems('name = "b"\nkind = "broken_entry"\n')
    assert problem.startswith(
        "sources[0].kind: kind broken_entry cannot be loaded (No module named"
    )
    assert "fw_no_such_dependency_for_the_test" in problem
