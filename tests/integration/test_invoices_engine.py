"""Invoices on a real anvil: each at its own address derived from an xpub (BIP-32 test
vector 1's m/0H/1/2H/2), paid with real native transfers and a real ERC-20; the states a
shop reads (new, paid_partial, processing, settled, paid_over, expired, paid_late,
invalid), each change an event; the settled invoice's receipt verifies offline.

One anvil serves the module; each test has its own store (so its own indexes) and watcher.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from guard.payment import NATIVE
from guard.verify import verify_receipt
from tests.e2e.test_payments_receipts_engine import issuer
from tests.integration.deposit_helpers import event_kinds, pay
from tests.support.anvil import Anvil
from tests.support.erc20 import deploy_token
from tests.support.rigs import FakeClock, Rig, RigFactory
from watcher.config.sections import PaymentsConfig
from watcher.engine.invoice_issuing import InvoiceTerms, issue_invoice
from watcher.invoices.xpub import derive_address, parse_extended_public_key, parse_template
from watcher.store.invoices_store import InvoiceRecord

pytestmark = pytest.mark.anvil
N = 3
XPUB = (
    "xpub6FHa3pjLCk84BayeJxFW2SP4XRrFd1JYnxeLeU8EqN3vDfZmbqBqaGJAyiLjTAwm6ZLRQUMv1ZACTj37sR62"
    "cfN7fe5JnJ7dh8zL4fiyLHV"
)


@pytest.fixture(scope="module")
def node() -> Iterator[Anvil]:
    anvil = Anvil()
    yield anvil
    anvil.stop()


@pytest.fixture
def rig(node: Anvil, make_rig: RigFactory) -> Rig:
    start = int(node.block()["timestamp"], 16) * 1000
    r = make_rig(node, clock=FakeClock(start), confirmations=N)
    r.watcher.catch_up()
    return r


def invoice(rig: Rig, amount: int, asset: str = NATIVE, expires_in_s: float = 600) -> InvoiceRecord:
    head = rig.store.chain(rig.config.name)
    terms = InvoiceTerms(rig.config, asset, amount, expires_in_s)
    return issue_invoice(
        rig.store,
        PaymentsConfig(xpub=XPUB),
        terms,
        "anonymous",
        rig.clock(),
        head.head_number if head else None,
    )


def state(rig: Rig, inv: InvoiceRecord) -> str:
    return rig.store.invoice(inv.invoice_id).state


def states(rig: Rig, inv: InvoiceRecord) -> list[str]:
    return [
        k.removeprefix("invoice_")
        for k in event_kinds(rig, inv.settlement_id)
        if k.startswith("invoice_")
    ]


def test_addresses_are_derived_in_order_and_never_twice(rig: Rig) -> None:
    first, second = invoice(rig, 1), invoice(rig, 1)
    steps = parse_template("m/0/{index}")
    key = parse_extended_public_key(XPUB)
    assert (first.derivation_index, second.derivation_index) == (0, 1)
    assert first.address == derive_address(key, steps, 0) != second.address
    rig.restart()  # a restart (or another instance on the store) goes on from the store
    assert invoice(rig, 1).derivation_index == 2


def test_exact_then_settled_with_a_receipt_that_verifies(rig: Rig) -> None:
    inv = invoice(rig, 1000)
    assert state(rig, inv) == "new"
    pay(rig, 1, inv.address, 1000)
    rig.watcher.catch_up()
    assert state(rig, inv) == "processing"
    rig.mine_and_poll(N)
    assert state(rig, inv) == "settled"
    assert states(rig, inv) == ["processing", "settled"]
    receipts = issuer(rig)
    receipts.run(rig)
    receipt = receipts.latest(inv.settlement_id)
    verify_receipt(receipt)
    assert receipt["payment"]["to"] == inv.address and receipt["payment"]["paid"] == "1000"


def test_partial_then_completed(rig: Rig) -> None:
    inv = invoice(rig, 1000)
    pay(rig, 1, inv.address, 400)
    rig.mine_and_poll(N)
    assert state(rig, inv) == "paid_partial"
    pay(rig, 2, inv.address, 600)
    rig.mine_and_poll(N)
    assert states(rig, inv) == ["paid_partial", "processing", "settled"]


def test_over_is_paid_over_and_confirmed(rig: Rig) -> None:
    inv = invoice(rig, 1000)
    pay(rig, 1, inv.address, 1500)
    rig.mine_and_poll(N)
    assert state(rig, inv) == "paid_over"
    assert rig.store.settlement(inv.settlement_id).verdict == "FINALITY_CONFIRMED"


def test_expired_then_paid_late_stays_expired_until_accepted(rig: Rig) -> None:
    inv = invoice(rig, 1000, expires_in_s=60)
    rig.clock.advance(seconds=61)
    rig.mine_and_poll(1)
    assert state(rig, inv) == "expired"
    assert rig.store.settlement(inv.settlement_id).verdict == "TIMEOUT_TREATED_AS_FAILURE"
    pay(rig, 1, inv.address, 1000)
    rig.mine_and_poll(N)
    assert state(rig, inv) == "paid_late"
    assert rig.store.settlement(inv.settlement_id).verdict == "TIMEOUT_TREATED_AS_FAILURE"
    assert "late_finality" in event_kinds(rig, inv.settlement_id)


def test_an_unpaid_partial_at_expiry_is_paid_partial(rig: Rig) -> None:
    inv = invoice(rig, 1000, expires_in_s=60)
    pay(rig, 1, inv.address, 100)
    rig.mine_and_poll(N)
    rig.clock.advance(seconds=61)
    rig.mine_and_poll(1)
    assert rig.store.settlement(inv.settlement_id).verdict == "TIMEOUT_TREATED_AS_FAILURE"
    assert state(rig, inv) == "paid_partial"


def test_two_invoices_paid_in_one_block_each_to_its_own_address(rig: Rig, node: Anvil) -> None:
    token = deploy_token(node)
    token.mint(node.accounts[1], 10_000)
    rig.watcher.catch_up()
    a, b = invoice(rig, 300, token.address.lower()), invoice(rig, 500, token.address.lower())
    token.transfer_many(1, [(a.address, 300), (b.address, 500)])  # one tx, one block
    rig.mine_and_poll(N)
    assert (state(rig, a), state(rig, b)) == ("settled", "settled")
    paid = [rig.store.payment_transfers(i.settlement_id) for i in (a, b)]
    assert [[t.value for t in p] for p in paid] == [["300"], ["500"]]
    assert paid[0][0].tx_hash == paid[1][0].tx_hash


def test_a_settled_invoice_reorged_out_is_invalid(rig: Rig) -> None:
    inv = invoice(rig, 1000)
    pay(rig, 1, inv.address, 1000)
    rig.mine_and_poll(N)
    assert state(rig, inv) == "settled"
    rig.anvil.reorg(N + 1)
    rig.mine_and_poll(1)
    assert state(rig, inv) == "invalid"
    assert "finality_violation" in event_kinds(rig, inv.settlement_id)
    assert states(rig, inv)[-1] == "invalid"
