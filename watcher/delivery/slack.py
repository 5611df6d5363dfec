"""The ``slack`` alert channel: one human line per event for a Slack-compatible incoming
webhook (mrkdwn), sent through the outbox like a webhook alert."""

from __future__ import annotations

import json
from typing import Any

from guard.event_kinds import LIFECYCLE_EVENT, EventKind
from watcher.delivery.channel import AlertChannel


def slack_body(event: dict[str, Any]) -> dict[str, Any]:
    """Body for a Slack-compatible incoming webhook: one ``text`` line (mrkdwn)."""
    return {"text": slack_text(event)}


def _short(value: object) -> str:
    text = str(value)
    return text if len(text) <= 14 else f"{text[:8]}…{text[-4:]}"


def slack_text(event: dict[str, Any]) -> str:
    """A one-line human summary of an event, in Slack's mrkdwn."""
    kind, chain, p = event["kind"], event["chain"], event.get("payload") or {}
    sid = event.get("settlement_id") or p.get("settlement_id")
    icon = {"info": ":white_check_mark:", "warning": ":warning:", "critical": ":rotating_light:"}
    head = f"{icon.get(event['severity'], '')} *{kind}* on `{chain}`"
    if kind == EventKind.REORG:
        anc = p.get("common_ancestor") or {}
        detail = (
            f"depth {p.get('depth')}, common ancestor #{anc.get('number')} "
            f"({_short(anc.get('hash'))}), {len(p.get('touched') or [])} watched settlement(s) "
            "touched"
        )
    elif kind == EventKind.FINALITY_VIOLATION:
        detail = f"settlement `{sid}` was confirmed and a reorg removed its block: reconcile"
    elif kind == EventKind.LATE_FINALITY:
        detail = f"settlement `{sid}` became final after it was treated as failed: reconcile"
    elif kind in LIFECYCLE_EVENT.values():
        detail = f"settlement `{sid}`: {p.get('directive') or p.get('verdict')}"
    elif kind in (EventKind.RPC_UNHEALTHY, EventKind.RPC_RECOVERED, EventKind.TAKEOVER_BLOCKED):
        detail = str(p.get("reason") or p.get("message") or "")
    else:
        detail = json.dumps(p, sort_keys=True)[:300]
    return f"{head}: {detail}"


SLACK = AlertChannel("slack", slack_body)
