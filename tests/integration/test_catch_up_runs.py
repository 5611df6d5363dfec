"""A catch-up after downtime commits runs of quiet blocks together, with the same outcome
as a transaction per block: every header stored, and a settlement that reaches its depth
inside a run is decided at the block where it did (its evidence says depth N, not the
run's end), through the API view a user reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.helpers import wait_included
from tests.support.anvil import Anvil
from tests.support.rigs import CHAIN, make_watcher
from watcher.engine.pipeline import QUIET_RUN

pytestmark = pytest.mark.anvil


def test_a_settlement_final_inside_a_quiet_run_is_decided_at_its_depth(
    anvil: Anvil, tmp_path: Path
) -> None:
    rig = make_watcher(anvil, f"sqlite:///{tmp_path}/runs.db", max_blocks_per_poll=1000)
    try:
        rig.watcher.poll()
        tx = anvil.send()
        included = wait_included(anvil, tx)
        sid = rig.register(tx).settlement_id
        rig.watcher.poll()  # the inclusion is recorded; the run starts after it
        anvil.mine(QUIET_RUN + 50)  # more than one run, ending mid-run
        stats = rig.watcher.catch_up()
        head = anvil.head()
        assert stats.behind == 0 and rig.watcher.head is not None
        assert rig.watcher.head.number == head
        record = rig.store.chain(CHAIN)
        assert record is not None and record.head_number == head
        window = rig.config.resolved_header_window
        stored = [n for n, _, _, _ in rig.store.headers(CHAIN)]
        assert stored == list(range(head - min(window, head + 1) + 1, head + 1))
        view = rig.view(sid)
        assert (view["verdict"], view["block_number"]) == ("FINALITY_CONFIRMED", included)
        facts = rig.settlement(sid).decision["evidence"]["facts"]
        assert facts["confirmations"] == rig.config.resolved_confirmations
    finally:
        rig.store.close()
