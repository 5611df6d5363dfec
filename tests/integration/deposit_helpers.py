"""Helpers of the deposit and invoice tests: a subscription as the API stores it, real
transfers, and what the store then says."""

from __future__ import annotations

import secrets
from typing import Any

from tests.support.rigs import Rig
from watcher.store import SettlementRecord
from watcher.store.deposit_records import NewSubscription


def subscribe(rig: Rig, addresses: list[str], assets: list[str], **kw: Any) -> str:
    """A subscription stored as ``POST /v1/subscriptions`` stores it (no call to the node)."""
    head = rig.store.chain(rig.config.name)
    new = NewSubscription(
        subscription_id="sub_" + secrets.token_hex(12),
        chain=rig.config.name,
        owner=kw.pop("owner", "anonymous"),
        assets=tuple(a.lower() for a in assets),
        confirmations=kw.pop("confirmations", None),
        commit_url=kw.pop("commit_url", None),
        reference=None,
        after_block=head.head_number if head else None,
        created_at=rig.clock(),
    )
    rig.store.create_subscription(new, [a.lower() for a in addresses])
    return new.subscription_id


def pay(rig: Rig, sender: int, to: str, value: int) -> str:
    """A real native value transfer, mined."""
    tx = {"from": rig.anvil.accounts[sender], "to": to, "value": hex(value)}
    tx_hash = str(rig.anvil.rpc("eth_sendTransaction", tx))
    rig.anvil.receipt(tx_hash)
    return tx_hash


def deposits(rig: Rig, subscription_id: str) -> list[SettlementRecord]:
    """Every deposit of the subscription, oldest first."""
    return rig.store.deposits_of(subscription_id, None, 0, 10_000)


def facts(rig: Rig, rec: SettlementRecord) -> list[tuple[str, str, str, int | None]]:
    """(tx, from, value, log index) of the deposit's counted transfer(s)."""
    return [
        (t.tx_hash, t.sender, t.value, t.log_index)
        for t in rig.store.payment_transfers(rec.settlement_id)
    ]


def event_kinds(rig: Rig, settlement_id: str) -> list[str]:
    """The kinds of the settlement's events, in order."""
    return [e.kind for e in rig.events(settlement_id)]
