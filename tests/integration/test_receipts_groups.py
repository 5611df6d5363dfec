"""A tick's receipts are stored in groups as they are built (watcher/receipts/component.py).

Real anvil, a ChainWatcher driven by hand, the receipts component over the rig's real store,
which notes the size of each transaction of receipts it is given. A block's receipts used to
be stored in one transaction at the end of the tick, so the first of a block of a hundred
waited for the last: now the first group is stored (and its waiting readers answered) while
the rest are built, and every receipt still verifies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from guard.verify import verify_receipt
from tests.integration.receipts_helpers import receipts_for, registered_in_one_block
from tests.support.anvil import Anvil
from tests.support.rigs import Rig, RigFactory
from watcher.receipts.component import STORED_TOGETHER
from watcher.store.receipts_store import ReceiptStore
from watcher.store.records import ReceiptRecord

pytestmark = pytest.mark.anvil


class NotedStore(ReceiptStore):
    """The rig's receipt store, noting how many receipts each ``add_many`` stores."""

    def __init__(self, rig: Rig) -> None:
        super().__init__(rig.store.writer, rig.store.reader)
        self.groups: list[int] = []

    def add_many(
        self, receipts: Sequence[dict[str, Any]], now: int, fence: tuple[str, str, int] | None
    ) -> list[ReceiptRecord]:
        self.groups.append(len(receipts))
        return super().add_many(receipts, now, fence)


def test_a_blocks_receipts_are_stored_in_groups_as_they_are_built(
    anvil: Anvil, make_rig: RigFactory
) -> None:
    rig: Rig = make_rig(anvil, confirmations=3, poll=True)
    count = STORED_TOGETHER + 5
    ids = registered_in_one_block(rig, count)
    rig.watcher.poll()
    rig.mine_and_poll(2)

    store = NotedStore(rig)
    receipts = receipts_for(rig, store)
    assert receipts.issuer.issue(rig.config.name) == count  # one tick: the block's receipts

    assert store.groups == [STORED_TOGETHER, count - STORED_TOGETHER]
    for sid in ids:
        record = store.latest(sid)
        assert record is not None
        verify_receipt(record.body, trusted_signers=[receipts.signer.address])
