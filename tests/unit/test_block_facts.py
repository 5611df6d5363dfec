"""Compact headers kept by :class:`chains.block_facts.BlockFacts`, made on first read.

Over real public-chain blocks (tests/vectors/real-blocks, provenance in its README): a block
parsed is kept unhashed, and its compact header, asked for, is exactly what hashing it at
once gave; a block whose fields do not hash to its hash still gets none; a header the client
re-hashed to check it is kept from that check, byte for byte the same.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chains.block_facts import BlockFacts, compact_header, header_from_compact
from chains.header_hash import rehashed

REAL = Path(__file__).resolve().parents[1] / "vectors" / "real-blocks"
NAMES = ["eth-18000000", "opsep-26207960", "opsep-26207961"]


def _block(name: str) -> dict[str, Any]:
    block: dict[str, Any] = json.loads((REAL / f"{name}.json").read_text())["block"]
    return block


@pytest.mark.parametrize("name", NAMES)
def test_a_compact_header_made_on_read_is_the_one_made_at_once(name: str) -> None:
    block = _block(name)
    facts = BlockFacts()
    facts.offer_block(block)
    compact = facts.header(block["hash"])
    assert compact is not None and compact == compact_header(block)
    assert header_from_compact(compact)["hash"] == block["hash"]
    assert facts.header(block["hash"]) is compact  # made once, then kept


def test_a_block_whose_fields_do_not_hash_to_its_hash_gets_no_compact_header() -> None:
    block = {**_block("eth-18000000"), "stateRoot": "0x" + "11" * 32}
    facts = BlockFacts()
    facts.offer_block(block)
    assert facts.header(block["hash"]) is None
    assert facts.tx_hashes(block["hash"]) is not None  # the block is still known


@pytest.mark.parametrize("name", NAMES)
def test_a_header_rehashed_by_the_client_is_kept_from_its_check(name: str) -> None:
    block = _block(name)
    checked = rehashed(block)
    assert checked is not None
    facts = BlockFacts()
    facts.offer_rehashed(*checked)
    facts.offer_block(block)  # as the client calls them: the check first
    assert facts.header(block["hash"]) == compact_header(block)


def test_a_lazy_header_is_replaced_by_the_checked_one() -> None:
    block = _block("opsep-26207961")
    facts = BlockFacts()
    facts.offer_block(block)
    checked = rehashed(block)
    assert checked is not None
    facts.offer_rehashed(*checked)
    assert facts.header(block["hash"]) == compact_header(block)
