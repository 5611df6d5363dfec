"""The EVM chain behind the source protocol: one transaction through a real anvil, seen as
unknown, accepted (included, shallow), final (deep enough), or failed (reverted)."""

from __future__ import annotations

import pytest

from chains.rpc import connect
from guard.source import InvalidRef, SourceObservation, SourceStatus, SourceUnavailable
from guard.types import UnixMillis
from tests.integration.helpers import random_tx_hash
from tests.support.anvil import Anvil
from tests.support.rigs import chain_config
from watcher.sources.evm_source import EvmSource

pytestmark = pytest.mark.anvil

NOW = UnixMillis(1_700_000_000_000)


def look(source: EvmSource, tx: str) -> SourceObservation:
    return source.observe(tx, source.fetch(tx, NOW), None, NOW)


def test_a_transaction_from_unknown_to_final(anvil: Anvil) -> None:
    source = EvmSource(chain_config(anvil, confirmations=3), connect(anvil.url))
    assert look(source, random_tx_hash()).status is SourceStatus.UNKNOWN
    tx = anvil.send()
    anvil.receipt(tx)
    accepted = look(source, tx)
    assert accepted.status is SourceStatus.ACCEPTED and accepted.evidence is not None
    assert (accepted.evidence.kind, dict(accepted.evidence.facts)["confirmations"]) == (
        "included",
        1,
    )
    anvil.mine(2)
    final = look(source, tx)
    assert final.status is SourceStatus.FINAL and final.evidence is not None
    facts = dict(final.evidence.facts)
    assert (final.evidence.kind, facts["confirmations"], facts["source_kind"]) == (
        "depth",
        3,
        "evm_tx",
    )


def test_a_reverted_transaction_fails_at_finality(anvil: Anvil) -> None:
    source = EvmSource(chain_config(anvil, confirmations=1), connect(anvil.url))
    tx = anvil.send_revert()
    anvil.receipt(tx)
    failed = look(source, tx)
    assert failed.status is SourceStatus.FAILED and failed.evidence is not None
    assert failed.evidence.kind == "reverted"


def test_refs_and_outages(anvil: Anvil) -> None:
    source = EvmSource(chain_config(anvil), connect(anvil.url))
    tx = random_tx_hash()
    assert source.check_ref(tx.upper().replace("0X", "0x")) == tx
    with pytest.raises(InvalidRef, match="ref"):
        source.check_ref("0x1234")
    down = EvmSource(chain_config(anvil), connect("http://127.0.0.1:9", timeout_s=1))
    with pytest.raises(SourceUnavailable):
        down.fetch(tx, NOW)
