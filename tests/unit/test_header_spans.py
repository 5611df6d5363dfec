"""A watched block's header span kept for its receipt (watcher/receipts/spans.py).

Over two consecutive real public-chain blocks (tests/vectors/real-blocks): the span gives
back the headers exactly as the store's compact headers would, and gives nothing (the
caller then asks the node, as before) when a kept header does not re-hash, does not link,
or is not the decision's head, or when the head lies above the span and the store's window
does not hold it linked, height after height, down to the span's last header (a real SQLite
store's header rows).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from chains.block_facts import compact_header, header_from_compact
from watcher.receipts.headers import head_linked
from watcher.receipts.spans import HeaderSpans
from watcher.store import Store

REAL = Path(__file__).resolve().parents[1] / "vectors" / "real-blocks"


def _block(name: str) -> dict[str, Any]:
    block: dict[str, Any] = json.loads((REAL / f"{name}.json").read_text())["block"]
    return block


LOW, HIGH = _block("opsep-26207960"), _block("opsep-26207961")
FIRST = int(LOW["number"], 16)


def _spans(*blocks: dict[str, Any]) -> HeaderSpans:
    spans = HeaderSpans(depth=2)
    spans.offer_block(blocks[0])  # parsed before the watched block's receipts are checked
    spans.open(LOW["hash"], FIRST)
    for block in blocks[1:]:
        spans.offer_block(block)  # parsed after
    return spans


def _never(_top: tuple[int, str], _head: tuple[int, str]) -> bool:
    return False


def test_a_span_gives_the_headers_the_store_would() -> None:
    spans = _spans(LOW, HIGH)
    chain = spans.chain(FIRST, 2, LOW["hash"], (FIRST + 1, HIGH["hash"]), _never)
    wanted = [header_from_compact(compact_header(b) or b"") for b in (LOW, HIGH)]
    assert chain == wanted


def test_a_kept_header_that_does_not_rehash_gives_nothing() -> None:
    forged = {**HIGH, "stateRoot": "0x" + "11" * 32}
    spans = _spans(LOW, forged)
    assert spans.chain(FIRST, 2, LOW["hash"], (FIRST + 1, HIGH["hash"]), _never) is None


def test_another_head_or_a_first_block_of_another_branch_gives_nothing() -> None:
    spans = _spans(LOW, HIGH)
    assert spans.chain(FIRST, 2, LOW["hash"], (FIRST + 1, "0x" + "22" * 32), _never) is None
    assert spans.chain(FIRST, 2, "0x" + "33" * 32, (FIRST + 1, HIGH["hash"]), _never) is None


def test_a_head_above_the_span_needs_the_store_to_link_it() -> None:
    spans = _spans(LOW, HIGH)
    head = (FIRST + 5, "0x" + "44" * 32)
    top = (FIRST + 1, HIGH["hash"])
    assert spans.chain(FIRST, 2, LOW["hash"], head, _never) is None
    linked = spans.chain(FIRST, 2, LOW["hash"], head, lambda t, h: (t, h) == (top, head))
    assert linked is not None


CHAIN = "local"
HEAD = "0x" + "77" * 32


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store.open(f"sqlite:///{tmp_path / 'spans.db'}")
    store.ensure_chain(CHAIN, 31337, 0)
    try:
        yield store
    finally:
        store.close()


def _stored(store: Store, rows: list[tuple[int, str, str]]) -> None:
    """Header rows as the engine stores them (number, hash, parent hash)."""
    with store.block_txn(CHAIN, 1_000) as txn:
        for number, block_hash, parent in rows:
            txn.put_header(number, block_hash, parent, 1_700_000_000 + number, keep=64)


def _one_header_span() -> HeaderSpans:
    spans = HeaderSpans(depth=1)
    spans.open(LOW["hash"], FIRST)
    spans.offer_block(LOW)
    return spans


def test_a_head_above_the_span_linked_through_the_store_gives_the_span(store: Store) -> None:
    _stored(store, [(FIRST + 1, HIGH["hash"], LOW["hash"]), (FIRST + 2, HEAD, HIGH["hash"])])
    linked = partial(head_linked, store.compact_headers, CHAIN)
    chain = _one_header_span().chain(FIRST, 1, LOW["hash"], (FIRST + 2, HEAD), linked)
    assert chain == [header_from_compact(compact_header(LOW) or b"")]


def test_a_stored_head_that_does_not_descend_from_the_span_gives_nothing(store: Store) -> None:
    # The decision's head is in the store under its hash, but the block below it there is
    # not the span's last one's child: the span is of another branch than the head.
    other = "0x" + "55" * 32
    _stored(store, [(FIRST + 1, other, "0x" + "66" * 32), (FIRST + 2, HEAD, other)])
    linked = partial(head_linked, store.compact_headers, CHAIN)
    assert _one_header_span().chain(FIRST, 1, LOW["hash"], (FIRST + 2, HEAD), linked) is None


def test_a_stored_head_with_a_height_missing_below_it_gives_nothing(store: Store) -> None:
    _stored(store, [(FIRST + 2, HEAD, HIGH["hash"])])  # FIRST + 1 not in the window
    linked = partial(head_linked, store.compact_headers, CHAIN)
    assert _one_header_span().chain(FIRST, 1, LOW["hash"], (FIRST + 2, HEAD), linked) is None
    assert (
        _one_header_span().chain(FIRST, 1, LOW["hash"], (FIRST + 2, "0x" + "88" * 32), linked)
        is None
    )


def test_a_block_outside_every_span_is_not_kept() -> None:
    spans = HeaderSpans(depth=1)
    spans.open(LOW["hash"], FIRST)
    spans.offer_block(HIGH)  # above the span of one header
    assert spans.chain(FIRST + 1, 1, HIGH["hash"], (FIRST + 1, HIGH["hash"]), _never) is None
