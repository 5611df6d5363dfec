"""The payment tables on SQLite and PostgreSQL: registration with and without an idempotency
key, the spec and transfer reads, and the engine's writes inside a block transaction."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from guard.payment import NATIVE, PAYMENT_KIND, PaymentSpec
from tests.support.rigs import START_MS
from watcher.config.chains import ChainConfig
from watcher.engine.payment_registration import PaymentRegistration, new_payment
from watcher.store import Store
from watcher.store.listing_store import listing
from watcher.store.payment_records import NewTransfer
from watcher.store.payments_store import (
    PaymentConflict,
    add_transfers,
    drop_transfers_above,
    payments_due,
)

CHAIN = ChainConfig.model_validate(
    {"name": "local", "chain_id": 31337, "rpc": ["http://127.0.0.1:1"], "confirmations": 3}
)
TO = "0x" + "ab" * 20
SPEC = PaymentSpec(to=TO, asset=NATIVE, amount=1000)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    st = Store.open(store_url)
    st.ensure_chain("local", 31337, START_MS)
    yield st
    st.close()


def _transfer(sid: str, block: int, value: int, log_index: int | None = None) -> NewTransfer:
    return NewTransfer(
        settlement_id=sid,
        tx_hash="0x" + f"{block:02x}" * 32,
        block_number=block,
        block_hash="0x" + f"{block + 100:02x}" * 32,
        tx_index=0,
        log_index=log_index,
        sender="0x" + "cd" * 20,
        value=str(value),
    )


def test_two_payments_of_the_same_amount_are_two_settlements(store: Store) -> None:
    reg = PaymentRegistration(chain=CHAIN, spec=SPEC)
    a, created_a = store.register_payment(*new_payment(reg, START_MS, 7))
    b, created_b = store.register_payment(*new_payment(reg, START_MS, 7))
    assert created_a and created_b and a.settlement_id != b.settlement_id
    assert a.kind == PAYMENT_KIND and a.tx_hash == a.settlement_id
    spec = store.payment_spec(a.settlement_id)
    assert (spec.to_address, spec.asset, spec.amount, spec.after_block) == (TO, NATIVE, "1000", 7)
    assert store.payment_transfers(a.settlement_id) == []
    # Never probed by hash, never in the tx index.
    assert store.due_probes("local", START_MS + 10**9, 100) == []
    assert store.watch_entries("local") == []
    assert [w.settlement_id for w in store.payment_watches("local")] == [
        a.settlement_id,
        b.settlement_id,
    ]


def test_a_reference_makes_a_repeat_the_same_payment_and_refuses_another(store: Store) -> None:
    reg = PaymentRegistration(chain=CHAIN, spec=SPEC, reference="order-17")
    a, created = store.register_payment(*new_payment(reg, START_MS, None))
    again, created_again = store.register_payment(*new_payment(reg, START_MS + 5, None))
    assert created and not created_again and again == a
    other = replace(reg, spec=replace(SPEC, amount=999))
    with pytest.raises(PaymentConflict, match="amount"):
        store.register_payment(*new_payment(other, START_MS, None))
    # Another owner's same reference is its own payment.
    theirs, created_theirs = store.register_payment(
        *new_payment(replace(reg, owner="bob"), START_MS, None)
    )
    assert created_theirs and theirs.settlement_id != a.settlement_id


def test_transfers_are_counted_per_block_and_dropped_by_a_reorg(store: Store) -> None:
    rec, _ = store.register_payment(*new_payment(PaymentRegistration(CHAIN, SPEC), START_MS, 1))
    sid = rec.settlement_id
    with store.block_txn("local", START_MS) as txn:
        add_transfers(txn, 2, [_transfer(sid, 2, 400)])
        add_transfers(txn, 3, [_transfer(sid, 3, 100, log_index=4)])
        add_transfers(txn, 3, [_transfer(sid, 3, 100, log_index=4)])  # a re-scan: once
        assert [r.settlement_id for r in payments_due(txn, 0, 3)] == [sid]
    got = store.payment_transfers(sid)
    assert [(t.block_number, t.value, t.log_index) for t in got] == [
        (2, "400", None),
        (3, "100", 4),
    ]
    with store.block_txn("local", START_MS) as txn:
        dropped = drop_transfers_above(txn, 2)
    assert [t.block_number for t in dropped] == [3]
    assert [t.block_number for t in store.payment_transfers(sid)] == [2]


def test_a_batch_stores_payments_with_their_specs_in_its_transaction(store: Store) -> None:
    new, spec = new_payment(PaymentRegistration(CHAIN, SPEC, reference="b-1"), START_MS, 3)
    other, other_spec = new_payment(PaymentRegistration(CHAIN, SPEC), START_MS, 3)
    out = listing(store).register_batch(
        [new, new, other], {new.settlement_id: spec, other.settlement_id: other_spec}
    )
    assert [created for _, created in out] == [True, False, True]
    assert store.payment_spec(new.settlement_id).reference == "b-1"
    assert store.payment_spec(other.settlement_id).after_block == 3
    assert store.due_probes("local", START_MS + 10**9, 100) == []  # never probed by hash
