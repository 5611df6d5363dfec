"""Block matching is a pure function of (block txs, watch index): what a block holds for the
watched settlements, with no node and no store (watcher/engine/matching.py)."""

from __future__ import annotations

from chains.models import BlockTx
from guard.types import Address, TxHash
from watcher.engine.index import WatchIndex
from watcher.engine.matching import match_block, reanchor_of
from watcher.store.records import WatchEntry

ALICE = Address("0x" + "a1" * 20)
BOB = Address("0x" + "b2" * 20)


def tx(n: int, sender: Address = ALICE, nonce: int = 0) -> BlockTx:
    return BlockTx(TxHash("0x" + f"{n:064x}"), sender, nonce)


def index_of(*entries: WatchEntry) -> WatchIndex:
    index = WatchIndex()
    for entry in entries:
        index.add(entry)
    return index


def test_a_watched_tx_in_the_block_is_matched_and_others_are_not() -> None:
    watched = tx(1, ALICE, 7)
    index = index_of(WatchEntry(1, "s-1", watched.hash, None, None, None))
    found = match_block([tx(9, BOB, 0), watched, tx(10, BOB, 1)], index)
    assert found.matched == [("s-1", watched)]
    assert found.replacing == []
    assert found.ids == {"s-1"}


def test_another_tx_with_the_watched_sender_and_nonce_replaces_it() -> None:
    watched, other = tx(1, ALICE, 7), tx(2, ALICE, 7)
    index = index_of(WatchEntry(1, "s-1", watched.hash, ALICE, 7, None))
    found = match_block([tx(3, ALICE, 6), other], index)
    assert found.matched == []
    assert found.replacing == [("s-1", other)]
    # the watched tx itself is an inclusion, not its own replacement
    assert match_block([watched], index).replacing == []


def test_after_a_reorg_a_confirmed_settlement_no_longer_watched_is_found_again() -> None:
    confirmed, rival = tx(1, ALICE, 3), tx(2, BOB, 5)
    index = index_of()  # a confirmed settlement is not in the watch index
    reanchor = reanchor_of([(confirmed.hash, "s-1", ALICE, 3), (tx(4).hash, "s-2", BOB, 5)], index)
    found = match_block([confirmed, rival], index, reanchor)
    assert found.matched == [("s-1", confirmed)]  # re-included in the new branch
    assert found.replacing == [("s-2", rival)]  # its nonce taken by another tx there
    assert match_block([confirmed, rival], index).ids == set()  # not without the reorg


def test_one_tx_watched_by_two_settlements_concerns_both() -> None:
    """Two callers registered one tx: its inclusion and its replacement reach
    both settlements; forgetting one keeps the other indexed."""
    watched, other = tx(1, ALICE, 7), tx(2, ALICE, 7)
    index = index_of(
        WatchEntry(1, "s-a", watched.hash, ALICE, 7, None),
        WatchEntry(2, "s-b", watched.hash, ALICE, 7, None),
    )
    assert match_block([watched], index).matched == [("s-a", watched), ("s-b", watched)]
    assert match_block([other], index).replacing == [("s-a", other), ("s-b", other)]
    index.remove("s-a")
    assert match_block([watched], index).matched == [("s-b", watched)]
    assert match_block([other], index).replacing == [("s-b", other)]
    reanchor = reanchor_of([(watched.hash, "s-a", ALICE, 7)], index)
    assert match_block([watched], index, reanchor).matched == [("s-a", watched), ("s-b", watched)]
