"""Verdicts and event kinds are named once (guard.settlement.Verdict, guard.event_kinds), and
every place that lists them is that list, so none can drift from the others.

The values are the strings stored in the database and sent over the wire: a member must
encode exactly as its string (JSON, canonical JSON, orjson) and the stored strings must not
change.
"""

from __future__ import annotations

import json
import typing

import orjson
import pytest

from guard.canonical import canonical_json
from guard.event_kinds import LIFECYCLE_EVENT, WORKFLOW_EVENTS, EventKind, invoice_event
from guard.invoice import INVOICE_STATES
from guard.receipt_format import VERDICT_KIND
from guard.settlement import TERMINAL_VERDICTS, Verdict
from guard.verify_decisions import VERDICTS
from watcher.api.models.settlements import Verdict as ApiVerdict
from watcher.cli.listing import VERDICTS as CLI_VERDICTS
from watcher.client.common import TERMINAL as CLIENT_TERMINAL
from watcher.delivery.format import EVENT_KINDS, RECEIPT_KINDS
from watcher.store.receipts_store import TERMINAL_EVENTS

STORED_EVENT_KINDS = {
    "reorg",
    "finality_violation",
    "late_finality",
    "decision_restated",
    "settlement_confirmed",
    "settlement_failed",
    "settlement_timed_out",
    "failure_evidence_reorged",
    "payment_transfer_reorged",
    "rpc_unhealthy",
    "rpc_recovered",
    "rpc_disagreement",
    "deposit_seen",
    "deposit_confirmed",
    "deposit_reorged",
    "invoice_new",
    "invoice_paid_partial",
    "invoice_processing",
    "invoice_settled",
    "invoice_paid_over",
    "invoice_expired",
    "invoice_paid_late",
    "invoice_invalid",
    "workflow_step_begun",
    "workflow_step_completed",
    "workflow_taken_over",
    "workflow_lease_expired",
    "takeover_blocked",
}
"""The event kinds rows already stored carry and receivers filter on: renaming one would
orphan them."""


def test_event_kinds_keep_their_stored_strings() -> None:
    assert {k.value for k in EventKind} == STORED_EVENT_KINDS


def test_the_client_terminal_set_is_the_guards() -> None:
    assert CLIENT_TERMINAL == TERMINAL_VERDICTS
    assert {
        "FINALITY_CONFIRMED",
        "SETTLEMENT_FAILED",
        "TIMEOUT_TREATED_AS_FAILURE",
    } == CLIENT_TERMINAL
    assert all(v.terminal == (v in CLIENT_TERMINAL) for v in Verdict)


def test_the_api_and_the_cli_list_every_verdict_in_the_guards_order() -> None:
    assert typing.get_args(ApiVerdict) == tuple(v.value for v in Verdict)
    assert tuple(CLI_VERDICTS) == tuple(v.value for v in Verdict)


def test_each_terminal_verdict_has_one_receipt_kind_and_one_lifecycle_event() -> None:
    assert set(VERDICT_KIND) == TERMINAL_VERDICTS
    assert RECEIPT_KINDS is VERDICT_KIND
    assert {VERDICT_KIND[v]: v for v in VERDICT_KIND} == VERDICTS
    assert set(LIFECYCLE_EVENT) == TERMINAL_VERDICTS
    assert set(LIFECYCLE_EVENT.values()) < set(TERMINAL_EVENTS)


def test_alert_channels_may_filter_on_every_event_kind() -> None:
    assert set(EVENT_KINDS) == set(EventKind)
    assert set(WORKFLOW_EVENTS) <= set(EVENT_KINDS)


def test_every_invoice_state_raises_its_own_event() -> None:
    events = [invoice_event(state) for state in INVOICE_STATES]
    assert [e.value for e in events] == [f"invoice_{s}" for s in INVOICE_STATES]
    with pytest.raises(ValueError, match="no invoice state 'paid_twice'"):
        invoice_event("paid_twice")


@pytest.mark.parametrize("member", [Verdict.FINALITY_CONFIRMED, EventKind.FINALITY_VIOLATION])
def test_a_member_encodes_exactly_as_its_string(member: Verdict | EventKind) -> None:
    as_member = {"kind": member, "list": [member]}
    as_string = {"kind": member.value, "list": [member.value]}
    assert json.dumps(as_member) == json.dumps(as_string)
    assert orjson.dumps(as_member) == orjson.dumps(as_string)
    assert canonical_json(as_member) == canonical_json(as_string)
    assert member == member.value and hash(member) == hash(member.value)
