"""One Stripe PaymentIntent registered by two callers: two settlements, each with
its own dependent state and commit row, polled with one fetch for both (a real
Stripe-shaped server on loopback, the official ``stripe`` library, a real SQLite store)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_sources_stripe import Rig
from watcher.sources.settlements import new_source_settlement, source_settlement_id


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    yield r
    r.close()


def _register(rig: Rig, pi: str, owner: str) -> str:
    new = new_source_settlement(
        rig.config,
        pi,
        rig.clock(),
        dependent_state={"for": owner},
        commit_url=f"http://127.0.0.1:9/{owner}",
        owner=owner,
    )
    rec, created = rig.store.register(new)
    assert created
    return rec.settlement_id


def test_two_callers_of_one_payment_share_its_fetch_and_keep_their_own_state(rig: Rig) -> None:
    pi = rig.stripe.create_payment_intent(amount=4200)
    alice, bob = _register(rig, pi, "alice"), _register(rig, pi, "bob")
    assert alice != bob
    assert source_settlement_id(rig.config.kind, rig.config.name, pi) not in (alice, bob)

    start = len(rig.stripe.requests)
    rig.poll()
    once = rig.stripe.requests[start:]
    rig.stripe.confirm(pi)
    rig.stripe.settle(pi)
    start = len(rig.stripe.requests)
    rig.poll()
    assert len(once) >= 1 and len(rig.stripe.requests[start:]) >= len(once)
    assert len(set(once)) == len(once), f"the payment was fetched once per caller: {once}"

    for sid, owner in ((alice, "alice"), (bob, "bob")):
        rec = rig.store.settlement(sid, owner=owner)
        assert rec.verdict == "FINALITY_CONFIRMED"
        assert rec.dependent_state == {"for": owner}
        [commit] = rig.store.outbox().list(settlement_id=sid)
        assert (commit.kind, commit.url) == ("commit", f"http://127.0.0.1:9/{owner}")
    assert rig.store.outbox().list(owner="bob") == rig.store.outbox().list(settlement_id=bob)
