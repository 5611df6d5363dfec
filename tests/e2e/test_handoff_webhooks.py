"""A Stripe webhook reaching the instance that does not own the Stripe source's lease.

Two real daemons on one PostgreSQL schema (a fresh one), one anvil for the chain, a
webhook-only Stripe source, and a Stripe-shaped server making the events, signed the way
Stripe signs them. The names spread one per daemon, so one owns ``local`` and the other
``stripe``. A webhook sent to the chain's owner (the source's standby) is answered 202
``queued`` and kept in ``webhook_inbox``; the source's owner applies it (how soon is
bench/inbox.py's figure) under its fencing token; the settlement reaches FINALITY_CONFIRMED once the finality
window passed; Stripe's redelivery of the same event is stored once and changes nothing.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.handoff_helpers import lease_owners, live_spread, pg_daemon
from tests.support.anvil import Anvil
from tests.support.daemon import Daemon, toml_value, wait_for
from tests.support.stripe_server import StripeServer, signed

pytestmark = pytest.mark.anvil

SECRET = "whsec_fw_handoff"
SOURCE = {
    "name": "stripe",
    "kind": "stripe_payment_intent",
    "webhook_secret": SECRET,
    "finality_window_s": 1,
    "timeout_s": 600,
    "poll_interval_s": 0.2,
}


def stripe_daemon(tmp_path: Path, anvil: Anvil, pg_url: str, instance: str) -> Daemon:
    daemon = pg_daemon(tmp_path, anvil.url, pg_url, instance)
    table = "\n[[sources]]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in SOURCE.items())
    with daemon.config_path.open("a") as config:
        config.write(table)
    return daemon


def deliver(daemon: Daemon, event: dict[str, Any]) -> Any:
    body, headers = signed(event, SECRET)
    return daemon.post("/v1/webhooks/stripe", content=body, headers=headers)


def test_a_webhook_at_the_standby_is_queued_and_applied_by_the_owner(
    tmp_path: Path, anvil: Anvil, pg_url: str
) -> None:
    a = stripe_daemon(tmp_path, anvil, pg_url, "A")
    b = stripe_daemon(tmp_path, anvil, pg_url, "B")
    with StripeServer("sk_test_unused") as stripe:
        try:
            a.start()
            b.start()
            wait_for(lambda: sorted(live_spread(a).values()) == [1, 1], 10, what="one name each")
            owners = lease_owners(a)
            daemons = {"A": a, "B": b}
            owner = daemons[str(owners["stripe"])]
            standby = daemons[str(owners["local"])]
            assert owner is not standby
            token = int(a.query("SELECT token FROM leases WHERE name = 'stripe'")[0][0])

            pi = stripe.create_payment_intent()
            answer = standby.post(
                "/v1/settlements", json={"kind": "stripe_payment_intent", "ref": pi}
            )
            assert answer.status_code == 201, answer.text
            sid = answer.json()["settlement_id"]
            stripe.confirm(pi)
            events = stripe.events_of(pi)
            assert events, "the confirmation made events"
            for event in events:
                queued = deliver(standby, event)
                assert queued.status_code == 202, queued.text
                body = queued.json()
                assert body["queued"] is True and body["matched"] is True
                assert body["settlement_id"] == sid

            def applied() -> dict[str, Any] | None:
                view = standby.get(f"/v1/settlements/{sid}").json()
                return view if view["verdict"] != "NO_SETTLEMENT" else None

            # How soon is bench/inbox.py's figure; here: that it happens.
            view = wait_for(applied, 30, interval=0.02, what="the owner applying the inbox")
            assert view["verdict"] in ("AWAITING_FINALITY", "FINALITY_CONFIRMED"), view

            def marked() -> list[tuple[Any, ...]] | None:
                # The owner marks each row applied right after applying it, under its token.
                rows = a.query(
                    "SELECT event_id, received_by, applied_by, applied_token FROM webhook_inbox "
                    "WHERE source = 'stripe' ORDER BY id"
                )
                return rows if all(r[2] is not None for r in rows) else None

            rows = wait_for(marked, 30, what="the inbox rows marked applied")
            assert [r[0] for r in rows] == [e["id"] for e in events]
            assert all(
                (r[1], r[2], r[3]) == (standby.dir.name, owner.dir.name, token) for r in rows
            ), rows

            owner.wait_verdict(sid, "FINALITY_CONFIRMED", timeout=30)
            again = deliver(standby, events[-1])  # Stripe redelivers the same event id
            assert again.status_code == 202, again.text
            time.sleep(1.0)  # the owner's next lease checks would apply it again
            count = a.query(
                "SELECT count(*) FROM webhook_inbox WHERE source = 'stripe' AND event_id = ?",
                events[-1]["id"],
            )
            assert int(count[0][0]) == 1, "a redelivery is stored once"
            final = owner.get(f"/v1/settlements/{sid}").json()
            assert final["verdict"] == "FINALITY_CONFIRMED"
            assert a.query("SELECT count(*) FROM fencing_rejections")[0][0] == 0
        finally:
            a.close()
            b.close()
