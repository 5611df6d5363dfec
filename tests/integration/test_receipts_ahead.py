"""Inclusion proofs cut and checked while the tx waits for depth N (watcher/receipts/ahead.py).

Real anvil, a ChainWatcher driven by hand, the receipts component run as the daemon runs it
after a poll. A receipt built from proofs made ahead must be the receipt built from scratch,
byte for byte; and a reorg that moves the tx to another block before finality must never get
a receipt carrying the old block's proof.
"""

from __future__ import annotations

import pytest

from guard.canonical import canonical_json
from guard.verify import verify_receipt
from tests.integration.receipts_helpers import TxFactory, receipts_for
from tests.support.anvil import Anvil
from tests.support.rigs import Rig, RigFactory
from watcher.receipts.builder import ReceiptBuilder

pytestmark = pytest.mark.anvil


@pytest.fixture
def rig(anvil: Anvil, make_rig: RigFactory) -> Rig:
    return make_rig(anvil, confirmations=3, poll=True)


def _builder(rig: Rig, receipts: object) -> ReceiptBuilder:
    builder = receipts.issuer.builders[rig.config.name]  # type: ignore[attr-defined]
    assert isinstance(builder, ReceiptBuilder)
    return builder


def test_a_receipt_from_proofs_made_ahead_is_the_receipt_made_from_scratch(
    anvil: Anvil, rig: Rig
) -> None:
    factories = [TxFactory(anvil, account) for account in range(3)]
    anvil.rpc("evm_setAutomine", False)
    try:
        hashes = [factories[i % 3].send(factories[i % 3].dynamic()) for i in range(12)]
        ids = [rig.register(h).settlement_id for h in hashes]
        anvil.mine(1)
    finally:
        anvil.rpc("evm_setAutomine", True)
    receipts = receipts_for(rig)  # the daemon's issuer exists before the block comes
    rig.watcher.poll()  # the block and its watched txs' receipts
    ahead = _builder(rig, receipts)
    assert ahead.prepare() >= len(ids)  # the block's tries, and every watched tx's proofs
    rig.mine_and_poll(2)
    records = receipts.store.settlements(ids)
    assert all(r.verdict == "FINALITY_CONFIRMED" for r in records.values())

    scratch = _builder(rig, receipts_for(rig))  # nothing prepared: cut from the tries
    now = rig.clock()
    for sid in ids:
        made_ahead = ahead.decision_body(records[sid], now)
        made_now = scratch.decision_body(records[sid], now)
        assert canonical_json(made_ahead) == canonical_json(made_now)
        block_hash = records[sid].block_hash
        assert block_hash is not None
        assert ahead.ahead.take(block_hash, records[sid].tx_hash) is None  # it was used

    receipts.run(rig)  # signed and self-checked as the daemon does
    for sid in ids:
        verified = verify_receipt(receipts.latest(sid), trusted_signers=[receipts.signer.address])
        assert verified.facts.block_hash == records[sid].block_hash


def test_a_reorg_before_finality_never_serves_the_old_blocks_proof(anvil: Anvil, rig: Rig) -> None:
    receipts = receipts_for(rig)
    builder = _builder(rig, receipts)
    anvil.mine(1)
    tx = anvil.send()
    anvil.receipt(tx)
    raw = anvil.raw_tx(tx)
    sid = rig.register(tx).settlement_id
    rig.watcher.poll()
    first = rig.settlement(sid).block_hash
    assert first is not None
    assert builder.prepare() >= 1  # the tx's proof in its first block, made ahead

    other = "0x" + TxFactory(anvil, 2).dynamic().hex()  # so the new block's tries differ
    anvil.reorg(1, [(other, 0), (raw, 0)])  # the block replaced; the tx in the new one
    rig.watcher.poll()  # the tracker follows the reorg; nothing is prepared again
    moved = rig.settlement(sid).block_hash
    assert moved is not None and moved != first
    rig.mine_and_poll(2)
    assert rig.settlement(sid).verdict == "FINALITY_CONFIRMED"
    assert rig.settlement(sid).block_hash == moved

    receipts.issuer.issue(rig.config.name)
    verified = verify_receipt(receipts.latest(sid), trusted_signers=[receipts.signer.address])
    assert verified.facts.block_hash == moved  # the re-included block, proven from its tries
    assert builder.ahead.take(first, tx) is not None  # the old block's proof was never used
