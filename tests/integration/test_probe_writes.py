"""What a poll's by-hash lookups write, and in how many statements (performance under
load): a poll that looks up hundreds of new txs records each one's next probe time
(and the sender, nonce and signed bytes of those the node holds pending) in a couple of
statements, not one or two per settlement: under batch registration those per-row UPDATEs
were a third of the poller's time. The rows hold what they held before, and the in-memory
index still follows every probed settlement.

Real parts: anvil without automining (a sent tx stays pending), a SQLite store, the chain
watcher driven by hand with a fake clock; statements counted at the store's writer engine.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import event

from tests.integration.helpers import random_tx_hash
from tests.support.anvil import Anvil
from tests.support.rigs import make_watcher
from watcher.settlements import Registration, new_settlement
from watcher.store import Store
from watcher.store.listing_store import listing

GWEI = 10**9


class Updates:
    """The UPDATE statements the store's writer runs while counting (a context manager);
    an executemany counts once."""

    def __init__(self, store: Store) -> None:
        self.engine = store.writer.engine
        self.seen: list[str] = []

    def _seen(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("UPDATE"):
            self.seen.append(statement)

    def __enter__(self) -> Updates:
        event.listen(self.engine, "before_cursor_execute", self._seen)
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(self.engine, "before_cursor_execute", self._seen)


def test_a_poll_probing_300_new_txs_writes_them_in_a_few_statements(
    start_anvil: Callable[..., Anvil], tmp_path: Path
) -> None:
    anvil = start_anvil("--no-mining")
    rig = make_watcher(anvil, f"sqlite:///{tmp_path}/finality.db")
    rig.watcher.poll()
    fee, tip = hex(3 * GWEI), hex(GWEI)
    pending = anvil.send(maxFeePerGas=fee, maxPriorityFeePerGas=tip, nonce="0x0")  # held pending
    unknown = [random_tx_hash() for _ in range(300)]  # never sent: the node knows nothing
    news = [
        new_settlement(Registration(rig.config, h.lower()), rig.clock())
        for h in [pending, *unknown]
    ]
    stored = listing(rig.store).register_batch(news)
    ids = [rec.settlement_id for rec, created in stored if created]
    assert len(ids) == 301

    probed_at = rig.clock.advance(1)
    with Updates(rig.store) as updates:
        stats = rig.watcher.poll()
    assert stats.probes == 301
    # Before: one UPDATE per settlement probed, one more for the pending tx's sender.
    assert len(updates.seen) <= 3, len(updates.seen)

    rows = {sid: rig.store.settlement(sid) for sid in ids}
    sent = rows[ids[0]]
    assert (sent.sender, sent.nonce) == (anvil.accounts[0].lower(), 0)
    assert sent.raw_tx is not None and sent.raw_tx.startswith("0x")
    assert (sent.probe_count, sent.next_probe_at, sent.updated_at) == (
        1,
        probed_at + 5_000,
        probed_at,
    )
    for sid in ids[1:]:
        rec = rows[sid]
        assert (rec.sender, rec.nonce, rec.raw_tx) == (None, None, None)
        assert (rec.probe_count, rec.next_probe_at) == (1, probed_at + 5_000)
        assert rec.updated_at == probed_at
    index = rig.watcher.index
    assert set(ids) <= set(index.by_id)
    assert index.by_id[ids[0]].sender == anvil.accounts[0].lower()
    assert index.by_sender_nonce[(anvil.accounts[0].lower(), 0)] == {ids[0]}

    # A minute on: the budget of re-probes (6 a minute) asks some never-seen txs again, with a
    # doubled backoff; the pending tx's sender is known, so it is not asked again.
    again_at = rig.clock.advance(60)
    stats = rig.watcher.poll()
    assert 0 < stats.probes <= 6
    after = {sid: rig.store.settlement(sid) for sid in ids}
    asked = [sid for sid in ids if after[sid].probe_count == 2]
    assert len(asked) == stats.probes and ids[0] not in asked
    assert {after[sid].next_probe_at for sid in asked} == {again_at + 10_000}
    assert all(after[sid] == rows[sid] for sid in ids if sid not in asked)
