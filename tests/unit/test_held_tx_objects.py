"""Which held tx objects a lookup may take as the node's answer (watcher/engine/probes.py).

A registration by hash of a tx in a block the tracker fetched whole costs no call: the
block's tx object is what ``eth_getTransactionByHash`` would answer. Only where the block is
the chain the engine follows (its hash at its height in the window), and only an object
that names the block that carried it. Real ``BlockFacts`` and ``HeaderWindow``, no node.
"""

from __future__ import annotations

from typing import Any

from chains.block_facts import BlockFacts
from chains.models import BlockHeader
from chains.tracker import HeaderWindow
from guard.types import BlockHash, BlockNumber
from watcher.engine.probes import held_tx_objects

PARENT = "0x" + "aa" * 32
CANONICAL = "0x" + "bb" * 32
ORPHAN = "0x" + "cc" * 32
TX = "0x" + "01" * 32
OTHER_TX = "0x" + "02" * 32


def _tx(tx_hash: str, block_hash: str, number: str = "0x8") -> dict[str, Any]:
    return {"hash": tx_hash, "blockHash": block_hash, "blockNumber": number, "nonce": "0x0"}


def _window() -> HeaderWindow:
    window = HeaderWindow(16)
    window.push(BlockHeader(BlockNumber(7), BlockHash(PARENT), BlockHash("0x" + "00" * 32), 1))
    window.push(BlockHeader(BlockNumber(8), BlockHash(CANONICAL), BlockHash(PARENT), 2))
    return window


def _facts(*blocks: tuple[str, list[Any]]) -> BlockFacts:
    facts = BlockFacts()
    for block_hash, txs in blocks:
        facts.offer_block({"hash": block_hash, "number": "0x8", "transactions": txs})
    return facts


def test_a_tx_in_a_canonical_block_is_taken_from_it() -> None:
    facts = _facts((CANONICAL, [_tx(TX, CANONICAL), _tx(OTHER_TX, CANONICAL)]))
    held = held_tx_objects(facts, _window(), [TX, "0x" + "03" * 32])
    assert list(held) == [TX] and held[TX]["blockHash"] == CANONICAL


def test_a_tx_seen_only_in_a_block_the_window_does_not_hold_is_asked() -> None:
    facts = _facts((ORPHAN, [_tx(TX, ORPHAN)]))  # height 8 is CANONICAL in the window
    assert held_tx_objects(facts, _window(), [TX]) == {}


def test_an_object_naming_another_block_than_its_carrier_is_asked() -> None:
    wrong_block = _facts((CANONICAL, [_tx(TX, ORPHAN)]))
    wrong_height = _facts((CANONICAL, [_tx(TX, CANONICAL, number="0x9")]))
    assert held_tx_objects(wrong_block, _window(), [TX]) == {}
    assert held_tx_objects(wrong_height, _window(), [TX]) == {}


def test_a_block_whose_tx_objects_are_not_held_is_asked() -> None:
    facts = _facts((CANONICAL, [TX]))  # a block fetched with hashes only
    assert facts.located(TX) == (8, CANONICAL)
    assert held_tx_objects(facts, _window(), [TX]) == {}
