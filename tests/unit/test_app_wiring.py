"""The daemon's wiring: built in one place, every part given its collaborators up front.

What a user depends on here: the key that signs settlement receipts also signs the takeover
elements (one trusted signer verifies both); every decision writer, chain engine and
sources poller alike, sends alerts to the ``[[alerts]]`` channels of the config; a stored
receipt wakes the sender; a webhook another instance stored is applied by this instance's
lease check even when it serves no HTTP (building the API starts nothing and registers no
job). And the shape that keeps it so: watcher/app, watcher/delivery and watcher/handoff
import only downwards (the app never imports the API; no part below imports the app), tie
no import cycle and fit the size limits, while the rest of watcher/ is still being moved
(tests/unit/test_layering.py checks all of watcher/ once the restructure is done).

Real parts: a SQLite store, the dev signing key, a Stripe-shaped server on loopback; no node
is contacted (building the daemon does not call one).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.daemon import toml_value
from tests.support.stripe_server import StripeServer
from tests.unit.test_layering import (
    ROOT,
    graph,
    layering_violations,
    modules,
    size_violations,
    tied_groups,
)
from watcher.app.build import build
from watcher.app.daemon import App
from watcher.config.loading import parse_config
from watcher.delivery.sender import Sender
from watcher.engine.endpoint_alerts import EndpointAlerts
from watcher.engine.heads import HeadsWaker
from watcher.receipts.component import ReceiptIssuer
from watcher.sources.poller import SourcePoller
from watcher.sources.settlements import new_source_settlement
from watcher.workflows.lapses import WorkflowLapses

MINE = ("watcher.app", "watcher.delivery", "watcher.handoff", "watcher.components")
"""The parts of watcher/ this wiring lives in."""

ALERTS_URL = "http://127.0.0.1:9/alerts"


def _mine() -> list[str]:
    return [n for n in modules() if any(n == p or n.startswith(p + ".") for p in MINE)]


def test_the_wiring_parts_import_only_downwards() -> None:
    assert "watcher.app.build" in _mine() and "watcher.delivery.sender" in _mine()
    bad = layering_violations(graph(), _mine(), modules(), ROOT)
    assert not bad, "\n".join(bad)


def test_the_wiring_parts_tie_no_import_cycle() -> None:
    tied = [g for g in tied_groups(graph(), modules()) if set(g) & set(_mine())]
    assert not tied, tied


def test_the_wiring_parts_fit_the_size_limits() -> None:
    bad = size_violations((modules()[n] for n in _mine()), ROOT)
    assert not bad, "\n".join(bad)


def _config_text(tmp: Path) -> str:
    return "\n".join(
        [
            "[store]",
            f"url = {toml_value(f'sqlite:///{tmp}/finality.db')}",
            "[signing]",
            f"dev_key_file = {toml_value(str(tmp / 'dev-key'))}",
            "[[chains]]",
            'name = "local"',
            "chain_id = 31337",
            # Two endpoints (endpoint alerts), new heads over WebSocket (a heads waker);
            # nothing listens there and nothing is started here.
            'rpc = ["http://127.0.0.1:9", "ws://127.0.0.1:9"]',
            'heads = "ws"',
            "confirmations = 1",
            "[[alerts]]",
            'type = "webhook"',
            f"url = {toml_value(ALERTS_URL)}",
            "[[sources]]",
            'name = "stripe"',
            'kind = "stripe_payment_intent"',
            'webhook_secret = "whsec_fw_local"',
            "timeout_s = 600",
        ]
    )


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    built = build(parse_config(_config_text(tmp_path), "<test>"))
    try:
        yield built
    finally:
        built.stop()


def test_every_part_gets_its_collaborators_at_construction(app: App) -> None:
    kinds = [type(c) for c in app.components]
    assert kinds == [
        ReceiptIssuer,
        Sender,
        SourcePoller,
        HeadsWaker,
        EndpointAlerts,
        WorkflowLapses,
    ]
    # Workflows sign with the receipts' key and alert through the same plan.
    assert app.workflows.signer is app.receipts.signer
    assert app.workflows.plan() is app.watchers["local"].plan
    assert app.components[-1].service is app.workflows  # type: ignore[attr-defined]
    assert (app.receipts, app.senders[0], app.sources, app.heads) == tuple(app.components[:4])
    # One key: a takeover's signed elements verify against the receipts' signer.
    assert app.handoff.takeovers.signer is app.receipts.signer
    # One outbox plan, from [[alerts]]: a source's decisions alert like a chain's.
    assert app.sources is not None and app.sources.plan is app.watchers["local"].plan
    assert [r.url for r in app.sources.plan.routes] == [ALERTS_URL]
    # Receipts and source writes are fenced by this instance's leases.
    assert app.receipts.fence_of == app.handoff.fence and app.receipts.on_lost == app.handoff.lost
    assert app.sources.owns == app.handoff.owns and app.sources.fence_of == app.handoff.fence
    # A stored receipt wakes the sender at once (a commit waiting for it goes).
    assert not app.senders[0].wake.is_set()
    app.receipts.on_issued()
    assert app.senders[0].wake.is_set()


def test_building_the_api_starts_nothing(app: App) -> None:
    from watcher.api.server import create_app

    create_app(app)
    assert app.scheduler.get_jobs() == [] and not app.scheduler.running
    assert not app.handoff.keeper.running


def test_the_lease_check_applies_a_webhook_another_instance_stored(app: App) -> None:
    assert app.sources is not None and app.inbox is not None
    with StripeServer() as stripe:
        pi = stripe.create_payment_intent()
        stripe.confirm(pi)
        events = stripe.events_of(pi)
    now = app.clock()
    rec, _ = app.store.register(new_source_settlement(app.sources.slots["stripe"].config, pi, now))
    for event in events:  # as a standby stores what Stripe sent it (no HTTP served here)
        app.inbox.add("stripe", pi, event)
    assert app.store.settlement(rec.settlement_id).decision.get("evidence") is None
    app.check_leases()  # SQLite: this instance owns every name
    stored = app.store.settlement(rec.settlement_id)
    assert stored.verdict == "AWAITING_FINALITY"
    assert stored.decision["evidence"]["kind"] == "payment_succeeded"
    assert app.store.inbox().pending("stripe", 10) == []
