"""A block's new deposits of one subscription are written as rows copied from its first one
(watcher/store/deposits_store.py ``deposit_rows_alike``): each copy must be exactly the row
the deposit gets registered on its own (``awaiting_row``), its id and first decision its own."""

from __future__ import annotations

import pytest

from guard.payment import DEPOSIT_KIND
from guard.settlement import decision_as_json
from guard.types import SettlementId
from watcher.config.chains import ChainConfig
from watcher.settlements import Awaiting, awaiting_row, first_decisions_of
from watcher.store.deposits_store import deposit_row, deposit_rows_alike

pytestmark = pytest.mark.fast

CONFIG = ChainConfig.model_validate(
    {"name": "dev", "chain_id": 31337, "rpc": ["http://127.0.0.1:9"], "confirmations": 3}
)


@pytest.mark.parametrize("confirmations, commit_url", [(None, None), (7, "https://x.test/c")])
def test_a_copied_deposit_row_is_the_row_registered_alone(
    confirmations: int | None, commit_url: str | None
) -> None:
    now = 1_700_000_000_000
    ids = [SettlementId(f"dep_{i:024x}") for i in range(3)]
    firsts = first_decisions_of(Awaiting(CONFIG, None, None, None, None), ids, now)
    awaiting = Awaiting(CONFIG, confirmations, None, None, commit_url)

    def alone(i: int) -> dict[str, object]:
        new = awaiting_row(awaiting, ids[i], ids[i], "alice", now, firsts[i], kind=DEPOSIT_KIND)
        return deposit_row(new, 41)

    first = alone(0)
    copies = deposit_rows_alike(
        first, [(ids[i], firsts[i].digest, decision_as_json(firsts[i])) for i in (1, 2)]
    )
    assert copies == [alone(1), alone(2)]
    assert len({c["digest"] for c in [first, *copies]}) == 3
    # The keys a block finds it by when it may be final: its block, and (a depth rule) the
    # height at which it is deep enough.
    required = confirmations or 3
    assert {(c["transfer_block"], c["confirm_height"]) for c in [first, *copies]} == {
        (41, 41 + required - 1)
    }
