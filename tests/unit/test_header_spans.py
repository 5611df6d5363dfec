"""A watched block's header span kept for its receipt (watcher/receipts/spans.py).

Over two consecutive real public-chain blocks (tests/vectors/real-blocks): the span gives
back the headers exactly as the store's compact headers would, and gives nothing (the
caller then asks the node, as before) when a kept header does not re-hash, does not link,
or is not the decision's head, or when the head lies above the span and the store does not
hold it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chains.block_facts import compact_header, header_from_compact
from watcher.receipts.spans import HeaderSpans

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


def _never(_head: tuple[int, str]) -> bool:
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


def test_a_head_above_the_span_needs_the_store_to_hold_it() -> None:
    spans = _spans(LOW, HIGH)
    head = (FIRST + 5, "0x" + "44" * 32)
    assert spans.chain(FIRST, 2, LOW["hash"], head, _never) is None
    assert spans.chain(FIRST, 2, LOW["hash"], head, lambda h: h == head) is not None


def test_a_block_outside_every_span_is_not_kept() -> None:
    spans = HeaderSpans(depth=1)
    spans.open(LOW["hash"], FIRST)
    spans.offer_block(HIGH)  # above the span of one header
    assert spans.chain(FIRST + 1, 1, HIGH["hash"], (FIRST + 1, HIGH["hash"]), _never) is None
