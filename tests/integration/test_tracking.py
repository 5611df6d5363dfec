"""A ChainWatcher driven in-process against a real anvil: what a user would notice.

Each test starts its own anvil, builds a watcher over a fresh store, and drives both by hand:
``anvil_mine`` / ``anvil_reorg`` on the node, ``poll()`` / ``catch_up()`` on the watcher, a
fake clock for deadlines. Nothing is mocked: the RPC goes to the node over HTTP.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from chains.rpc import Web3Transport
from tests.integration.helpers import LaggingTransport, random_tx_hash, wait_included
from tests.support.anvil import Anvil
from tests.support.rigs import CHAIN, Rig, RigFactory

pytestmark = pytest.mark.anvil

GWEI = 10**9

AWAITING = "AWAITING_FINALITY"
CONFIRMED = "FINALITY_CONFIRMED"
FAILED = "SETTLEMENT_FAILED"
TIMED_OUT = "TIMEOUT_TREATED_AS_FAILURE"


@pytest.fixture
def rig(anvil: Anvil, make_rig: RigFactory) -> Rig:
    """A watcher with N=3 by depth over an automining anvil, already at the node's head."""
    return make_rig(anvil, poll=True)


def block_hash(anvil: Anvil, number: int) -> str:
    return str(anvil.block(number)["hash"])


def verdicts_seen(rig: Rig, sid: str) -> set[str]:
    """Verdicts named by the settlement's lifecycle events."""
    return {e.payload.get("verdict") for e in rig.events(sid) if "verdict" in e.payload}


# -- 1. inclusion and depth ---------------------------------------------------------------


def test_depth_counts_up_and_confirms_exactly_at_n(rig: Rig) -> None:
    tx = rig.anvil.send()
    included = wait_included(rig.anvil, tx)
    sid = rig.register(tx).settlement_id

    rig.watcher.poll()
    view = rig.view(sid)
    assert view["verdict"] == AWAITING
    assert view["block_number"] == included
    assert view["block_hash"] == block_hash(rig.anvil, included)
    assert view["confirmations"] == 1
    assert view["required_confirmations"] == 3
    assert view["receipt"] is None

    rig.mine_and_poll(1)
    view = rig.view(sid)
    assert (view["verdict"], view["confirmations"]) == (AWAITING, 2)
    assert rig.events(sid, "settlement_confirmed") == []

    rig.mine_and_poll(1)
    view = rig.view(sid)
    assert (view["verdict"], view["confirmations"]) == (CONFIRMED, 3)
    assert view["head_number"] == included + 2 == rig.anvil.head()
    assert view["receipt"] is not None
    assert view["evidence"]["kind"] == "depth"
    assert view["evidence"]["facts"]["confirmations"] == 3
    assert view["evidence"]["facts"]["block_hash"] == block_hash(rig.anvil, included)
    confirmed = rig.events(sid, "settlement_confirmed")
    assert len(confirmed) == 1
    assert confirmed[0].payload["verdict"] == CONFIRMED

    rig.mine_and_poll(3)
    view = rig.view(sid)
    assert (view["verdict"], view["confirmations"]) == (CONFIRMED, 6)
    assert len(rig.events(sid, "settlement_confirmed")) == 1


# -- 2. a reorg drops the tx before depth N ----------------------------------------------


def test_reorg_that_drops_the_tx_is_recorded_and_never_confirms(rig: Rig) -> None:
    anvil = rig.anvil
    anvil.mine(2)
    tx = anvil.send()
    included = wait_included(anvil, tx)
    assert included == 3
    sid = rig.register(tx).settlement_id
    rig.watcher.poll()
    rig.mine_and_poll(1)
    assert rig.view(sid)["confirmations"] == 2
    old = {n: block_hash(anvil, n) for n in (2, 3, 4)}

    anvil.reorg(2)  # replaces blocks 3 and 4; anvil erases the tx
    assert anvil.rpc("eth_getTransactionByHash", tx) is None
    stats = rig.watcher.poll()

    assert stats.reorg is not None
    [reorg] = rig.store.reorgs(CHAIN)
    assert reorg.depth == 2
    assert reorg.ancestor_number == 2
    assert reorg.ancestor_hash == old[2] == block_hash(anvil, 2)
    assert (reorg.old_head_number, reorg.old_head_hash) == (4, old[4])
    assert (reorg.new_head_number, reorg.new_head_hash) == (4, block_hash(anvil, 4))
    assert reorg.touched == [sid]
    assert reorg.finality_violation is False
    assert [(r["number"], r["old_hash"], r["new_hash"]) for r in reorg.replaced] == [
        (3, old[3], block_hash(anvil, 3)),
        (4, old[4], block_hash(anvil, 4)),
    ]
    [event] = rig.events(kind="reorg")
    assert event.payload["touched"] == [sid]
    assert event.payload["common_ancestor"] == {"number": 2, "hash": old[2]}

    view = rig.view(sid)
    assert view["verdict"] == AWAITING
    assert view["block_number"] is None
    assert view["confirmations"] == 0
    assert view["reorg_count"] == 1
    assert rig.watcher.head is not None
    assert rig.watcher.head.hash == block_hash(anvil, 4)

    rig.mine_and_poll(5)
    assert rig.view(sid)["verdict"] == AWAITING
    assert rig.events(sid, "settlement_confirmed") == []


# -- 3. a reorg re-includes the tx at another height -------------------------------------


def test_reorg_that_reincludes_the_tx_higher_recomputes_depth(rig: Rig) -> None:
    anvil = rig.anvil
    anvil.mine(2)
    tx = anvil.send()
    assert wait_included(anvil, tx) == 3
    sid = rig.register(tx).settlement_id
    rig.watcher.poll()
    rig.mine_and_poll(1)
    old_hash_3 = block_hash(anvil, 3)
    raw = anvil.raw_tx(tx)

    anvil.reorg(2, [(raw, 1)])  # offset 1: the new block 4
    assert wait_included(anvil, tx) == 4
    rig.watcher.poll()

    view = rig.view(sid)
    assert view["block_number"] == 4
    assert view["block_hash"] == block_hash(anvil, 4)
    assert view["block_hash"] != old_hash_3
    assert view["confirmations"] == 1
    assert view["reorg_count"] == 1
    assert view["verdict"] == AWAITING
    [reorg] = rig.store.reorgs(CHAIN)
    assert reorg.touched == [sid]

    # At head 5 the old inclusion (block 3) would have had depth 3: it must not count.
    rig.mine_and_poll(1)
    view = rig.view(sid)
    assert (view["verdict"], view["confirmations"]) == (AWAITING, 2)

    rig.mine_and_poll(1)
    view = rig.view(sid)
    assert (view["verdict"], view["confirmations"]) == (CONFIRMED, 3)
    assert view["evidence"]["facts"]["block_number"] == 4
    assert view["evidence"]["facts"]["block_hash"] == block_hash(anvil, 4)


def test_reorg_that_reincludes_the_tx_at_the_same_height_takes_the_new_hash(rig: Rig) -> None:
    anvil = rig.anvil
    anvil.mine(2)
    tx = anvil.send()
    assert wait_included(anvil, tx) == 3
    sid = rig.register(tx).settlement_id
    rig.watcher.poll()
    rig.mine_and_poll(1)
    old_hash_3 = block_hash(anvil, 3)

    anvil.reorg(2, [(anvil.raw_tx(tx), 0)])  # offset 0: the new block 3
    assert wait_included(anvil, tx) == 3
    rig.watcher.poll()
    view = rig.view(sid)
    assert (view["block_number"], view["confirmations"], view["reorg_count"]) == (3, 2, 1)
    assert view["block_hash"] == block_hash(anvil, 3) != old_hash_3
    assert view["verdict"] == AWAITING

    rig.mine_and_poll(1)
    view = rig.view(sid)
    assert (view["verdict"], view["confirmations"]) == (CONFIRMED, 3)
    assert view["evidence"]["facts"]["block_hash"] == block_hash(anvil, 3)


# -- 4. a reverted tx --------------------------------------------------------------------


def test_reverted_tx_fails_at_depth_n_and_is_never_confirmed(rig: Rig) -> None:
    tx = rig.anvil.send_revert()
    assert int(rig.anvil.receipt(tx)["status"], 16) == 0
    sid = rig.register(tx).settlement_id

    seen = []
    rig.watcher.poll()
    seen.append((rig.view(sid)["verdict"], rig.view(sid)["confirmations"]))
    for _ in range(2):
        rig.mine_and_poll(1)
        seen.append((rig.view(sid)["verdict"], rig.view(sid)["confirmations"]))
    assert seen == [(AWAITING, 1), (AWAITING, 2), (FAILED, 3)]

    view = rig.view(sid)
    assert view["status"] == 0
    assert view["evidence"]["kind"] == "reverted"
    assert len(rig.events(sid, "settlement_failed")) == 1
    assert rig.events(sid, "settlement_confirmed") == []
    assert CONFIRMED not in verdicts_seen(rig, sid)

    rig.mine_and_poll(2)
    assert rig.view(sid)["verdict"] == FAILED


# -- 5. a replaced tx --------------------------------------------------------------------


def test_replaced_tx_fails_with_the_replacing_hash(
    start_anvil: Callable[..., Anvil], make_rig: RigFactory
) -> None:
    anvil = start_anvil("--no-mining")
    rig = make_rig(anvil)
    rig.watcher.poll()
    tip = hex(GWEI)
    a = anvil.send(to=1, value=1, maxFeePerGas=hex(3 * GWEI), maxPriorityFeePerGas=tip, nonce="0x0")
    sid = rig.register(a).settlement_id

    rig.watcher.poll()  # learns sender and nonce while A is pending
    rec = rig.settlement(sid)
    assert (rec.sender, rec.nonce) == (anvil.accounts[0].lower(), 0)

    # Same nonce, maxFeePerGas + 1 wei: replaces A in the pool.
    b = anvil.send(
        to=2, value=2, maxFeePerGas=hex(3 * GWEI + 1), maxPriorityFeePerGas=tip, nonce="0x0"
    )
    assert b != a
    assert anvil.rpc("eth_getTransactionByHash", a) is None
    anvil.mine(1)
    assert wait_included(anvil, b) == 1

    rig.watcher.poll()
    view = rig.view(sid)
    assert view["replaced_by"] == b
    assert view["verdict"] == AWAITING

    rig.mine_and_poll(1)
    assert rig.view(sid)["verdict"] == AWAITING
    rig.mine_and_poll(1)
    view = rig.view(sid)
    assert view["verdict"] == FAILED
    assert view["replaced_by"] == b
    assert view["evidence"]["kind"] == "replaced"
    assert view["evidence"]["facts"]["replaced_by"] == b
    assert view["evidence"]["facts"]["block_number"] == 1
    assert len(rig.events(sid, "settlement_failed")) == 1
    assert rig.events(sid, "settlement_confirmed") == []


# -- 6. a timeout ------------------------------------------------------------------------


def test_timeout_is_inclusive_of_the_deadline(rig: Rig) -> None:
    clock = rig.clock
    unknown = rig.register(random_tx_hash(), timeout_s=5)
    later = rig.register(random_tx_hash(), timeout_s=10)
    assert unknown.deadline == clock() + 5_000
    assert later.deadline == clock() + 10_000

    rig.watcher.poll()
    clock.now = unknown.deadline - 1
    rig.watcher.poll()
    assert rig.view(unknown.settlement_id)["verdict"] == AWAITING
    assert rig.events(unknown.settlement_id, "settlement_timed_out") == []

    clock.now = unknown.deadline  # exactly at the deadline: the budget is spent
    stats = rig.watcher.poll()
    assert stats.blocks == 0
    view = rig.view(unknown.settlement_id)
    assert view["verdict"] == TIMED_OUT
    assert view["receipt"] is not None
    [event] = rig.events(unknown.settlement_id, "settlement_timed_out")
    assert event.payload["verdict"] == TIMED_OUT
    assert event.created_at == unknown.deadline
    assert rig.view(later.settlement_id)["verdict"] == AWAITING

    # The other one reaches its deadline in a poll that also brings a new block.
    clock.now = later.deadline
    rig.anvil.mine(1)
    stats = rig.watcher.poll()
    assert stats.blocks == 1
    assert rig.view(later.settlement_id)["verdict"] == TIMED_OUT
    assert len(rig.events(later.settlement_id, "settlement_timed_out")) == 1
    assert len(rig.events(unknown.settlement_id, "settlement_timed_out")) == 1


# -- 7. finality by the finalized tag ----------------------------------------------------


def test_finalized_tag_confirms_before_depth(
    start_anvil: Callable[..., Anvil], make_rig: RigFactory
) -> None:
    anvil = start_anvil("--slots-in-an-epoch", "1")
    rig = make_rig(anvil, confirmations=50, finality="finalized")
    rig.watcher.poll()
    anvil.mine(3)
    tx = anvil.send()
    included = wait_included(anvil, tx)
    sid = rig.register(tx).settlement_id

    rig.watcher.poll()
    assert rig.view(sid)["verdict"] == AWAITING
    rig.mine_and_poll(1)
    assert int(anvil.block("finalized")["number"], 16) == included - 1
    assert rig.view(sid)["verdict"] == AWAITING

    rig.mine_and_poll(1)
    assert int(anvil.block("finalized")["number"], 16) == included
    view = rig.view(sid)
    assert view["verdict"] == CONFIRMED
    assert view["required_confirmations"] == 50
    assert view["confirmations"] == 3
    assert view["finality_mode"] == "finalized"
    assert view["evidence"]["kind"] == "finalized"
    assert view["evidence"]["facts"]["finalized_number"] == included
    assert rig.store.chain(CHAIN).finalized_number == included  # type: ignore[union-attr]
    assert len(rig.events(sid, "settlement_confirmed")) == 1


# -- 8. restart and catch-up -------------------------------------------------------------


def assert_headers_contiguous_to_head(rig: Rig) -> None:
    anvil = rig.anvil
    head = anvil.head()
    stored = rig.store.headers(CHAIN)
    numbers = [n for n, _, _, _ in stored]
    assert numbers == list(range(numbers[0], head + 1))
    for (_, below, _, _), (_, _, parent, _) in itertools.pairwise(stored):
        assert parent == below
    for n, h, _, _ in stored:
        assert h == block_hash(anvil, n), f"stored header {n} is not the node's"
    record = rig.store.chain(CHAIN)
    assert record is not None
    assert (record.head_number, record.head_hash) == (head, block_hash(anvil, head))


def test_restart_catches_up_without_skipping_a_block(anvil: Anvil, make_rig: RigFactory) -> None:
    rig = make_rig(anvil, max_blocks_per_poll=20)
    rig.watcher.poll()
    tx1 = anvil.send()
    assert wait_included(anvil, tx1) == 1
    sid1 = rig.register(tx1).settlement_id
    rig.watcher.poll()
    assert rig.view(sid1)["confirmations"] == 1

    # Down: blocks go by, and a tx is sent and registered meanwhile (by the API, say).
    anvil.mine(30)
    tx2 = anvil.send()
    included2 = wait_included(anvil, tx2)
    sid2 = rig.register(tx2).settlement_id
    anvil.mine(30)
    head = anvil.head()
    assert head == included2 + 30

    watcher = rig.restart()
    stats = watcher.catch_up()
    assert stats.behind == 0
    assert watcher.head is not None
    assert watcher.head.number == head
    assert watcher.polls >= 4  # 61 blocks at 20 per poll
    assert_headers_contiguous_to_head(rig)
    assert len(rig.store.headers(CHAIN)) == min(head + 1, rig.config.resolved_header_window)

    view1 = rig.view(sid1)
    assert (view1["verdict"], view1["confirmations"]) == (CONFIRMED, head)
    view2 = rig.view(sid2)
    assert view2["verdict"] == CONFIRMED
    assert view2["block_number"] == included2
    assert view2["block_hash"] == block_hash(anvil, included2)
    assert view2["confirmations"] == 31
    assert rig.store.reorgs() == []
    assert len(rig.events(kind="settlement_confirmed")) == 2


def test_restart_detects_a_reorg_that_happened_while_down(
    anvil: Anvil, make_rig: RigFactory, store_url: str
) -> None:
    rig = make_rig(anvil, store_url=store_url, max_blocks_per_poll=5)
    rig.watcher.poll()
    anvil.mine(1)
    # One block each: anvil's automine puts every tx that is pending when it mines into one
    # block, so a second send before the first is mined can share its block (seen in CI).
    tx1 = anvil.send()
    assert wait_included(anvil, tx1) == 2
    tx2 = anvil.send()
    assert wait_included(anvil, tx2) == 3
    sid1 = rig.register(tx1).settlement_id
    sid2 = rig.register(tx2).settlement_id
    rig.mine_and_poll(1)  # head 4: tx1 at depth 3 (confirmed), tx2 at depth 2
    assert rig.view(sid1)["verdict"] == CONFIRMED
    assert rig.view(sid2)["verdict"] == AWAITING
    old = {n: block_hash(anvil, n) for n in (2, 3, 4)}

    # Down: a reorg replaces blocks 3 and 4 (erasing tx2), then the chain moves on.
    anvil.reorg(2)
    anvil.mine(12)
    head = anvil.head()
    assert head == 16

    watcher = rig.restart()
    stats = watcher.catch_up()
    assert stats.behind == 0
    assert watcher.head is not None
    assert watcher.head.number == head
    assert_headers_contiguous_to_head(rig)

    [reorg] = rig.store.reorgs(CHAIN)
    assert reorg.depth == 2
    assert (reorg.ancestor_number, reorg.ancestor_hash) == (2, old[2])
    assert (reorg.old_head_number, reorg.old_head_hash) == (4, old[4])
    assert reorg.touched == [sid2]
    assert reorg.finality_violation is False
    assert [(r["number"], r["old_hash"]) for r in reorg.replaced] == [(3, old[3]), (4, old[4])]

    view1 = rig.view(sid1)
    assert (view1["verdict"], view1["confirmations"], view1["reorg_count"]) == (
        CONFIRMED,
        head - 1,
        0,
    )
    view2 = rig.view(sid2)
    assert (view2["verdict"], view2["block_number"], view2["reorg_count"]) == (AWAITING, None, 1)
    assert rig.events(kind="finality_violation") == []


# -- 9. late finality --------------------------------------------------------------------


def test_final_after_timeout_keeps_the_timeout_and_alerts(rig: Rig) -> None:
    tx = rig.anvil.send()
    included = wait_included(rig.anvil, tx)
    rec = rig.register(tx, timeout_s=5)
    sid = rec.settlement_id
    rig.watcher.poll()
    assert rig.view(sid)["confirmations"] == 1

    rig.clock.now = rec.deadline
    rig.watcher.poll()
    assert rig.view(sid)["verdict"] == TIMED_OUT
    assert len(rig.events(sid, "settlement_timed_out")) == 1

    rig.mine_and_poll(2)
    view = rig.view(sid)
    assert view["confirmations"] == 3
    assert view["verdict"] == TIMED_OUT
    [late] = rig.events(sid, "late_finality")
    assert late.severity == "critical"
    assert late.payload["tx_hash"] == tx
    assert late.payload["finality"]["kind"] == "depth"
    assert late.payload["finality"]["facts"]["block_number"] == included
    assert rig.events(sid, "settlement_confirmed") == []

    rig.mine_and_poll(2)
    assert rig.view(sid)["verdict"] == TIMED_OUT
    assert len(rig.events(sid, "late_finality")) == 1


def test_deadline_and_finality_reached_in_the_same_poll(rig: Rig) -> None:
    tx = rig.anvil.send()
    wait_included(rig.anvil, tx)  # anvil's automine may mine after the send has returned
    rec = rig.register(tx, timeout_s=5)
    sid = rec.settlement_id
    rig.watcher.poll()
    assert rig.view(sid)["confirmations"] == 1

    rig.clock.now = rec.deadline  # depth N is first seen at the deadline: too late
    rig.mine_and_poll(2)
    view = rig.view(sid)
    assert (view["verdict"], view["confirmations"]) == (TIMED_OUT, 3)
    kinds = [e.kind for e in rig.events(sid)]
    assert kinds == ["settlement_timed_out", "late_finality"]
    [late] = rig.events(sid, "late_finality")
    assert late.payload["finality"]["kind"] == "depth"
    assert late.payload["finality"]["facts"]["confirmations"] == 3


# -- 10. a reorg deeper than a confirmed settlement --------------------------------------


def test_reorg_below_a_confirmed_settlement_is_a_finality_violation(
    anvil: Anvil, make_rig: RigFactory, store_url: str
) -> None:
    rig = make_rig(anvil, store_url=store_url, confirmations=2)
    rig.watcher.poll()
    anvil.mine(2)
    tx = anvil.send()
    assert wait_included(anvil, tx) == 3
    sid = rig.register(tx).settlement_id
    rig.watcher.poll()
    rig.mine_and_poll(1)
    assert rig.view(sid)["verdict"] == CONFIRMED
    old_1 = block_hash(anvil, 1)

    anvil.reorg(3)  # replaces 2, 3, 4: deeper than the confirmation
    stats = rig.watcher.poll()
    assert stats.reorg is not None

    [reorg] = rig.store.reorgs(CHAIN)
    assert reorg.finality_violation is True
    assert reorg.depth == 3
    assert (reorg.ancestor_number, reorg.ancestor_hash) == (1, old_1)
    assert reorg.touched == [sid]
    [violation] = rig.events(sid, "finality_violation")
    assert violation.severity == "critical"
    assert violation.payload["previous"]["verdict"] == CONFIRMED
    [reorg_event] = rig.events(kind="reorg")
    assert reorg_event.severity == "critical"

    view = rig.view(sid)
    assert view["verdict"] != CONFIRMED
    assert view["verdict"] == AWAITING
    assert view["block_number"] is None
    assert view["reorg_count"] == 1

    rig.mine_and_poll(3)
    assert rig.view(sid)["verdict"] == AWAITING


def test_confirmed_tx_reincluded_in_the_first_block_of_the_new_branch_is_followed(
    anvil: Anvil, make_rig: RigFactory
) -> None:
    """A reversed confirmation whose tx comes back in the branch's very first block is found
    there (it was not in the watch index while confirmed) and confirmed again on the new
    block, after a finality violation was raised for the old one."""
    rig = make_rig(anvil, confirmations=2)
    rig.watcher.poll()
    anvil.mine(2)
    tx = anvil.send()
    assert wait_included(anvil, tx) == 3
    raw = anvil.raw_tx(tx)
    sid = rig.register(tx).settlement_id
    rig.watcher.poll()
    rig.mine_and_poll(1)
    assert rig.view(sid)["verdict"] == CONFIRMED
    old_hash = rig.view(sid)["block_hash"]

    anvil.reorg(3, [(raw, 0)])  # replaces 2, 3, 4; the tx comes back in the new block 2
    rig.watcher.poll()
    assert rig.events(sid, "finality_violation")
    view = rig.view(sid)
    assert view["block_number"] == 2
    assert view["block_hash"] == block_hash(anvil, 2) != old_hash
    # Reversed at the branch's first block (depth 1), confirmed again at depth 2.
    assert view["verdict"] == CONFIRMED
    assert view["evidence"]["facts"]["block_hash"] == block_hash(anvil, 2)
    assert len(rig.events(sid, "settlement_confirmed")) == 2


# -- 11. a lagging node ------------------------------------------------------------------


def test_lagging_node_is_not_a_reorg(anvil: Anvil, make_rig: RigFactory) -> None:
    transport = LaggingTransport(Web3Transport(anvil.url))
    rig = make_rig(anvil, transport=transport)
    rig.watcher.poll()
    anvil.mine(2)
    tx = anvil.send()
    assert wait_included(anvil, tx) == 3
    sid = rig.register(tx).settlement_id
    anvil.mine(2)
    rig.watcher.catch_up()
    assert rig.watcher.head is not None
    assert rig.watcher.head.number == 5
    assert rig.view(sid)["confirmations"] == 3

    transport.lag_to = 2  # a node three blocks behind, on the same chain
    for _ in range(2):
        stats = rig.watcher.poll()
        assert stats.lagging is True
        assert stats.reorg is None
        assert stats.blocks == 0
        assert rig.watcher.lagging is True
    assert rig.store.reorgs() == []
    assert rig.events(kind="reorg") == []
    assert rig.watcher.head.number == 5
    assert rig.store.chain(CHAIN).head_number == 5  # type: ignore[union-attr]
    view = rig.view(sid)
    assert (view["verdict"], view["block_number"], view["reorg_count"]) == (CONFIRMED, 3, 0)

    transport.lag_to = None
    anvil.mine(1)
    stats = rig.watcher.poll()
    assert (stats.lagging, stats.blocks, stats.reorg) == (False, 1, None)
    assert rig.watcher.lagging is False
    assert rig.store.reorgs() == []
    assert rig.view(sid)["confirmations"] == 4


# -- 12. steady-state cost ---------------------------------------------------------------


def test_steady_state_is_one_rpc_call_per_block(rig: Rig) -> None:
    ids = [rig.register(random_tx_hash()).settlement_id for _ in range(200)]
    stats = rig.watcher.poll()
    assert stats.probes == 200  # looked up once while new
    assert len(rig.watcher.index.by_id) == 200

    for _ in range(5):
        rig.clock.advance(0.5)
        before = sum(rig.client.calls.values())
        rig.anvil.mine(1)
        stats = rig.watcher.poll()
        assert stats.blocks == 1
        assert stats.probes == 0
        assert sum(rig.client.calls.values()) - before == 1, dict(rig.client.calls)
    assert rig.watcher.head is not None
    assert rig.watcher.head.number == rig.anvil.head()
    assert {rig.settlement(i).verdict for i in ids} == {AWAITING}


# -- registration after inclusion --------------------------------------------------------


def test_registering_an_already_deep_tx_confirms_without_a_new_block(rig: Rig) -> None:
    tx = rig.anvil.send()
    included = wait_included(rig.anvil, tx)
    rig.mine_and_poll(4)  # the watcher saw the block before anyone registered the tx
    sid = rig.register(tx).settlement_id

    stats = rig.watcher.poll()
    assert stats.blocks == 0
    view = rig.view(sid)
    assert view["block_number"] == included
    assert view["confirmations"] == 5
    assert view["verdict"] == CONFIRMED
    assert len(rig.events(sid, "settlement_confirmed")) == 1


def test_first_start_finds_a_tx_included_before_the_first_head(
    anvil: Anvil, make_rig: RigFactory
) -> None:
    tx = anvil.send()
    included = wait_included(anvil, tx)
    anvil.mine(1)
    rig = make_rig(anvil)
    sid = rig.register(tx).settlement_id

    rig.watcher.poll()  # the very first poll: the window starts at the node's head
    rig.watcher.poll()
    view = rig.view(sid)
    assert view["block_number"] == included
    assert view["confirmations"] == 2
    rig.mine_and_poll(1)
    assert rig.view(sid)["verdict"] == CONFIRMED
