"""A poll reads the head and commits its blocks before it looks registrations up by hash.

Against a real anvil, through a transport that records every method sent (batch elements
included): the look-ups of a burst of registrations (a thousand by hash, hundreds of
milliseconds) used to run before the head was read, so each block's verdicts waited for
them, and the poll pacer, which takes the poll's start for the moment the chain was read,
took blocks that came during the look-ups for blocks already there. A tx the new block
includes is recorded by the block scan and is then not looked up at all; one included in a
block processed before its registration is found after the head, in that block's tx objects
(no lookup call: the tracker fetched the block whole), and decided at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from chains.rpc import Web3Transport
from tests.integration.helpers import wait_included
from tests.support.anvil import Anvil
from tests.support.rigs import Rig, RigFactory

CONFIRMED = "FINALITY_CONFIRMED"


class RecordingTransport:
    """A real transport that notes each method it sends, in order."""

    def __init__(self, inner: Web3Transport) -> None:
        self.inner = inner
        self.endpoint = inner.endpoint
        self.methods: list[str] = []

    def request(self, method: str, params: Sequence[Any]) -> Mapping[str, Any]:
        self.methods.append(method)
        return self.inner.request(method, params)

    def batch(self, calls: Sequence[tuple[str, Sequence[Any]]]) -> list[Mapping[str, Any]]:
        self.methods.extend(method for method, _ in calls)
        return self.inner.batch(calls)


def _recorded_rig(
    start_anvil: Callable[..., Anvil], make_rig: RigFactory
) -> tuple[Anvil, RecordingTransport, Rig, str, int]:
    """A polled rig whose calls are recorded, and one tx mined: (anvil, recording, rig, tx
    hash, its block)."""
    anvil = start_anvil()
    recording = RecordingTransport(Web3Transport(anvil.url))
    rig = make_rig(anvil, transport=recording, poll=True)
    tx = anvil.send()
    return anvil, recording, rig, tx, wait_included(anvil, tx)


def test_the_head_is_read_first_and_a_tx_in_the_new_block_is_not_looked_up(
    start_anvil: Callable[..., Anvil], make_rig: RigFactory
) -> None:
    _, recording, rig, tx, included = _recorded_rig(start_anvil, make_rig)
    sid = rig.register(tx).settlement_id

    recording.methods.clear()
    rig.watcher.poll()

    assert recording.methods[0] == "eth_getBlockByNumber", recording.methods
    assert "eth_getTransactionByHash" not in recording.methods, recording.methods
    assert rig.view(sid)["block_number"] == included


def test_a_tx_in_a_block_processed_before_its_registration_is_decided_after_the_head(
    start_anvil: Callable[..., Anvil], make_rig: RigFactory
) -> None:
    anvil, recording, rig, tx, included = _recorded_rig(start_anvil, make_rig)
    anvil.mine(2)  # depth 3: final as soon as it is known
    rig.watcher.poll()
    sid = rig.register(tx).settlement_id

    recording.methods.clear()
    rig.watcher.poll()

    methods = recording.methods
    assert methods[0] == "eth_getBlockByNumber", methods
    assert "eth_getTransactionByHash" not in methods, methods  # its block's tx object is held
    assert methods.index("eth_getBlockReceipts") > 0, methods  # its status, after the head
    view = rig.view(sid)
    assert (view["verdict"], view["block_number"]) == (CONFIRMED, included)
