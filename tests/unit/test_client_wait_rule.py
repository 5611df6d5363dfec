"""The rule both clients' ``wait()`` follow (watcher.client.common.wait_step and wait_over):
which frame makes a waiting client read its settlement again, which only moves its depth, and
when the wait is over. The clients themselves are tested against a real daemon
(tests/integration/test_clients_*.py)."""

from __future__ import annotations

from watcher.client.common import View, wait_over, wait_step

VIEW: View = {
    "settlement_id": "stl_1",
    "chain": "local",
    "verdict": "AWAITING_FINALITY",
    "block_number": 100,
    "confirmations": 2,
}


def test_the_opened_stream_and_the_settlements_own_events_read_it_again() -> None:
    assert wait_step({"opened": True}, None).read
    assert wait_step({"id": 7, "settlement_id": "stl_1", "kind": "reorg"}, VIEW).read
    assert wait_step({"id": 8, "chain": "local", "kind": "reorg"}, VIEW).read


def test_a_head_frame_moves_the_depth_without_a_read() -> None:
    step = wait_step({"kind": "head", "chain": "local", "head_number": 104}, VIEW)
    assert not step.read
    assert step.shown == {**VIEW, "confirmations": 5}


def test_a_head_frame_reads_a_settlement_not_in_a_block_yet() -> None:
    """No stored event marks an inclusion: a new head is when a pending tx may be in one."""
    pending = {**VIEW, "block_number": None, "confirmations": 0, "head_number": 100}
    assert wait_step({"kind": "head", "chain": "local", "head_number": 101}, pending).read
    assert not wait_step({"kind": "head", "chain": "other", "head_number": 101}, pending).read
    # the head it was read at, or an older one: nothing the read did not already see
    assert not wait_step({"kind": "head", "chain": "local", "head_number": 100}, pending).read
    failed = {**pending, "verdict": "TIMEOUT_TREATED_AS_FAILURE"}
    assert not wait_step({"kind": "head", "chain": "local", "head_number": 101}, failed).read


def test_other_frames_change_nothing() -> None:
    for event in (
        {"id": 9, "settlement_id": "stl_2", "chain": "local", "kind": "settlement_confirmed"},
        {"id": 10, "chain": "other", "kind": "reorg"},
        {"kind": "head", "chain": "local", "head_number": 101},  # no deeper than shown
        {"kind": "head", "chain": "other", "head_number": 500},
    ):
        step = wait_step(event, VIEW)
        assert not step.read and step.shown is None, event
    assert wait_step({"kind": "head", "chain": "local", "head_number": 104}, None).shown is None


def test_a_wait_ends_on_a_terminal_verdict_or_at_its_deadline() -> None:
    assert not wait_over(VIEW, None, 1e9)
    assert not wait_over(None, 10.0, 9.99)
    assert wait_over(None, 10.0, 10.0)
    assert wait_over({**VIEW, "verdict": "TIMEOUT_TREATED_AS_FAILURE"}, None, 0.0)
    assert wait_over({**VIEW, "verdict": "FINALITY_CONFIRMED"}, 10.0, 0.0)
