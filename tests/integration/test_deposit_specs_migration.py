"""Migration 0021 on SQLite and PostgreSQL: a deposit stored before it (its spec in
``payment_specs``) keeps its amount and sender in its own row after it, and the store reads
its spec as before; a payment's spec stays where it was; the downgrade writes the deposit's
spec row back."""

from __future__ import annotations

from tests.integration.helpers import migrate, run_sql
from tests.support.rigs import START_MS
from watcher.store import Store

SETTLEMENT = (
    "INSERT INTO settlements (settlement_id, chain, tx_hash, required_confirmations,"
    " finality_mode, timeout_ms, initiated_at, deadline, verdict, watching, reorg_count,"
    " digest, decision, probe_count, created_at, updated_at, owner, kind, provisional)"
    " VALUES ('{sid}', 'local', '{sid}', 3, 'depth', 1000, {t}, {t}, 'AWAITING_FINALITY',"
    " true, 0, 'd', '{{}}', 0, {t}, {t}, 'anonymous', '{kind}', false)"
)
SPEC = (
    "INSERT INTO payment_specs (settlement_id, chain, to_address, asset, amount, sender,"
    " after_block) VALUES ('{sid}', 'local', '0x{to}', 'native', '{amount}', '0x{sender}', 41)"
)


def test_a_deposit_keeps_its_spec_across_0021_and_back(store_url: str) -> None:
    migrate(store_url, "upgrade", "0020_partial_indexes")
    dep, pay = "dep_" + "a1" * 12, "pay_" + "b2" * 12
    for sid, kind in ((dep, "evm_deposit"), (pay, "evm_payment")):
        run_sql(store_url, SETTLEMENT.format(sid=sid, t=START_MS, kind=kind))
    run_sql(store_url, SPEC.format(sid=dep, to="d1" * 20, amount="12345", sender="5e" * 20))
    run_sql(store_url, SPEC.format(sid=pay, to="e1" * 20, amount="777", sender="5f" * 20))
    run_sql(
        store_url,
        "INSERT INTO deposits (settlement_id, subscription_id, chain, tx_hash, ordinal,"
        f" address, asset) VALUES ('{dep}', 'sub_x', 'local', '0x{'11' * 32}', 0,"
        f" '0x{'d1' * 20}', 'native')",
    )
    run_sql(
        store_url,
        "INSERT INTO payment_transfers (settlement_id, chain, tx_hash, block_number,"
        f" block_hash, tx_index, sender, value) VALUES ('{dep}', 'local', '0x{'11' * 32}', 42,"
        f" '0x{'22' * 32}', 0, '0x{'5e' * 20}', '12345')",
    )

    store = Store.open(store_url)  # migrates to the head
    try:
        spec = store.payment_spec(dep)
        assert (spec.to_address, spec.asset, spec.amount, spec.sender) == (
            "0x" + "d1" * 20,
            "native",
            "12345",
            "0x" + "5e" * 20,
        )
        assert store.payment_spec(pay).amount == "777"
    finally:
        store.close()
    assert run_sql(
        store_url, f"SELECT amount, sender FROM deposits WHERE settlement_id = '{dep}'"
    ) == [("12345", "0x" + "5e" * 20)]
    specs = run_sql(store_url, "SELECT settlement_id FROM payment_specs")
    assert specs == [(pay,)]

    migrate(store_url, "downgrade", "0020_partial_indexes")
    back = run_sql(
        store_url,
        "SELECT to_address, amount, sender, after_block FROM payment_specs"
        f" WHERE settlement_id = '{dep}'",
    )
    assert back == [("0x" + "d1" * 20, "12345", "0x" + "5e" * 20, 41)]
