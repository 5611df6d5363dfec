"""Migration 0022 on SQLite and PostgreSQL: a watched deposit stored before it gets its block
keys from its counted transfers (``transfer_block``, and ``confirm_height`` under a rule
with a depth basis), so the read of the deposits a block may make final finds it by them;
one with no transfer left gets none (nothing of it can be final), a final one is left as
it was; the downgrade takes them away."""

from __future__ import annotations

from tests.integration.helpers import migrate, run_sql
from tests.support.rigs import START_MS
from watcher.store import Store
from watcher.store.deposits_ripe import ripe_deposits

SETTLEMENT = (
    "INSERT INTO settlements (settlement_id, chain, tx_hash, required_confirmations,"
    " finality_mode, timeout_ms, initiated_at, deadline, verdict, watching, reorg_count,"
    " digest, decision, probe_count, created_at, updated_at, owner, kind, provisional)"
    " VALUES ('{sid}', 'local', '{sid}', 3, '{mode}', 1000, {t}, {t}, '{verdict}',"
    " {watching}, 0, 'd', '{{}}', 0, {t}, {t}, 'anonymous', 'evm_deposit', false)"
)
DEPOSIT = (
    "INSERT INTO deposits (settlement_id, subscription_id, chain, tx_hash, ordinal, address,"
    " asset, amount, sender) VALUES ('{sid}', 'sub_x', 'local', '0x{tx}', 0, '0x{to}',"
    " 'native', '5', '0x{sender}')"
)
TRANSFER = (
    "INSERT INTO payment_transfers (settlement_id, chain, tx_hash, block_number, block_hash,"
    " tx_index, sender, value) VALUES ('{sid}', 'local', '0x{tx}', {block}, '0x{hash}', 0,"
    " '0x{sender}', '5')"
)
KEYS = "SELECT transfer_block, confirm_height FROM settlements WHERE settlement_id = '{sid}'"


def test_watched_deposits_get_their_block_keys_across_0022_and_back(store_url: str) -> None:
    migrate(store_url, "upgrade", "0021_deposit_specs")
    deep, tagged, gone, final = (f"dep_{c * 24}" for c in "abcd")
    rows = {  # id: (rule, verdict, watching, block of its transfer or None)
        deep: ("depth", "AWAITING_FINALITY", "true", 42),
        tagged: ("finalized", "AWAITING_FINALITY", "true", 50),
        gone: ("depth", "AWAITING_FINALITY", "true", None),  # a reorg took its transfer
        final: ("depth", "FINALITY_CONFIRMED", "false", 30),
    }
    for n, (sid, (mode, verdict, watching, block)) in enumerate(rows.items()):
        values = {"sid": sid, "t": START_MS, "mode": mode, "verdict": verdict}
        run_sql(store_url, SETTLEMENT.format(watching=watching, **values))
        tx, who = f"{n + 1:064x}", f"{n + 1:040x}"
        run_sql(store_url, DEPOSIT.format(sid=sid, tx=tx, to="d1" * 20, sender=who))
        if block is not None:
            run_sql(
                store_url,
                TRANSFER.format(sid=sid, tx=tx, block=block, hash=f"{block:064x}", sender=who),
            )

    store = Store.open(store_url)  # migrates to the head
    try:
        assert run_sql(store_url, KEYS.format(sid=deep)) == [(42, 44)]
        assert run_sql(store_url, KEYS.format(sid=tagged)) == [(50, None)]
        assert run_sql(store_url, KEYS.format(sid=gone)) == [(None, None)]
        assert run_sql(store_url, KEYS.format(sid=final)) == [(None, None)]
        with store.block_txn("local", START_MS - 1) as txn:
            assert [d.settlement_id for d in ripe_deposits(txn, 43)] == []
            assert [d.settlement_id for d in ripe_deposits(txn, 44)] == [deep]
            found = ripe_deposits(txn, 44, finalized=50)
            assert [d.settlement_id for d in found] == [deep, tagged]
    finally:
        store.close()

    migrate(store_url, "downgrade", "0021_deposit_specs")
    assert run_sql(
        store_url, f"SELECT confirm_height FROM settlements WHERE settlement_id = '{deep}'"
    ) == [(None,)]
