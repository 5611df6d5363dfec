"""A block's deposits decided together (guard/deposit_batch.py) are decided exactly as each
alone (guard/deposit.py ``decide_deposit``): same verdict, directive, evidence and digest,
for native and token deposits, odd values, several blocks and registration instants, and
deposits that are not final, not paid exactly, or past their deadline."""

from __future__ import annotations

import pytest

from guard.deposit import decide_deposit
from guard.deposit_batch import DepositItem, decide_deposits
from guard.payment import NATIVE, PaymentSpec, RulePosition, Transfer
from guard.settlement import Settlement, SettlementPolicy, Verdict
from guard.types import SettlementId, UnixMillis

pytestmark = pytest.mark.fast

POLICY = SettlementPolicy(max_wait_ms=86_400_000)
TOKEN = "0x" + "70" * 20


def _item(i: int, block: int = 100, initiated: int = 1_000, **change: int | str) -> DepositItem:
    token = i % 2 == 1
    value = int(change.get("value", 10**18 + i if i % 3 else 2**60 + i))  # beyond 2**53 too
    amount = int(change.get("amount", value))
    spec = PaymentSpec(f"0x{i:040x}", TOKEN if token else NATIVE, amount, f"0x{i + 7:040x}")
    transfer = Transfer(
        f"0x{i:064x}",
        block,
        f"0x{block:064x}",
        i,
        i * 2 if token else None,
        str(change.get("sender", f"0x{i + 7:040x}")),
        value,
    )
    transfers = [] if change.get("none") else [transfer] * int(change.get("times", 1))
    settlement = Settlement(SettlementId(f"dep_{i:024x}"), True, UnixMillis(initiated), 600_000)
    return DepositItem(settlement, spec, transfers)


def _alone(items: list[DepositItem], pos: RulePosition, now: int) -> list[object]:
    return [
        decide_deposit(i.settlement, "mainnet", i.spec, i.transfers, pos, POLICY, now)
        for i in items
    ]


@pytest.mark.parametrize(
    "pos",
    [
        RulePosition("depth", 3, 104, "0x" + "ab" * 32),
        RulePosition("finalized", 3, 104, "0x" + "ab" * 32, finalized_number=101),
        RulePosition("depth", 12, 104, "0x" + "ab" * 32),  # nothing final: waits
    ],
)
def test_a_block_of_deposits_is_decided_as_each_alone(pos: RulePosition) -> None:
    items = [_item(i) for i in range(40)]
    items += [_item(i, block=101) for i in range(40, 60)]
    items += [_item(i, initiated=2_000) for i in range(60, 70)]
    items += [_item(70, amount=5), _item(71, times=2), _item(72, none=True)]
    items += [_item(73, sender="0x" + "99" * 20), _item(74, value=1)]
    now = 5_000
    together = decide_deposits("mainnet", items, pos, POLICY, now)
    assert together == _alone(items, pos, now)
    final = sum(1 for d in together if d.verdict is Verdict.FINALITY_CONFIRMED)
    assert final == (0 if pos.required == 12 else len(items) - 1)  # all but the unpaid one


def test_past_the_deadline_each_is_decided_as_alone() -> None:
    pos = RulePosition("depth", 3, 104, "0x" + "ab" * 32)
    items = [_item(i) for i in range(10)]
    now = 1_000 + 600_000
    together = decide_deposits("mainnet", items, pos, POLICY, now)
    assert together == _alone(items, pos, now)
    assert {d.verdict for d in together} == {Verdict.TIMEOUT_TREATED_AS_FAILURE}


def test_every_digest_is_the_deposits_own() -> None:
    pos = RulePosition("depth", 3, 104, "0x" + "ab" * 32)
    items = [_item(i) for i in range(0, 20, 2)]
    digests = {d.digest for d in decide_deposits("mainnet", items, pos, POLICY, 5_000)}
    assert len(digests) == len(items)


def test_a_value_canonical_json_escapes_is_written_as_the_guard_writes_it() -> None:
    """Values a node would not send (a quote, a backslash, a control or non-ASCII character
    in a sender; an empty one) still come out exactly as decided alone: the batch writes
    only letters, digits and "_" directly (guard/deposit_batch.py ``_encoded``)."""
    pos = RulePosition("depth", 3, 104, "0x" + "ab" * 32)
    odd = ['0x"quoted"', "0x\\back", "0x\u00e9t\u00e9", "0x\n", "", "0x_ok"]
    items = [_item(i) for i in range(4)]
    items += [_item(4 + 2 * n, sender=s) for n, s in enumerate(odd)]  # natives, one group
    together = decide_deposits("mainnet", items, pos, POLICY, 5_000)
    assert together == _alone(items, pos, 5_000)
    assert {d.verdict for d in together} == {Verdict.FINALITY_CONFIRMED}
