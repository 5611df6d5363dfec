"""``finality handoffs``: takeovers between instances, from the command line.

::

    finality handoffs [--name CHAIN] [--limit N]
    finality handoffs --id N [--json]
    finality handoffs --id N --receipt KIND > element.json && finality verify element.json

Talks to the running daemon's API (``GET /v1/handoffs``, ``GET /v1/handoffs/{id}``);
``--json`` prints the answer as is. ``--receipt KIND`` prints the signed receipt of one
recorded element (``transaction_state_checkpoint_receipt``,
``in_flight_operation_registry_receipt``, ``handoff_lock_signature``,
``transaction_recovery_predicate_receipt``) as JSON, ready for ``finality verify -``.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from guard.handoff_receipts import HANDOFF_KINDS
from watcher.cli.common import EX_OK, CliError, Commands, Query, api_of, positive_int, show


def _line(h: dict[str, Any]) -> str:
    when = datetime.fromtimestamp(h["at"] / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    ran = ", ".join(sorted({r["predicate"] for r in h.get("recovery") or []})) or "none"
    signed = "" if h.get("signed", True) else "; elements not signed (older record)"
    return (
        f"#{h['id']:<5} {when}Z  {h['name']}: {h['from_owner'] or '-'} (token "
        f"{h['from_token'] if h['from_token'] is not None else '-'}) -> {h['to_owner']} "
        f"(token {h['to_token']}), {h['reason']}, {h['verdict']}; "
        f"recovery: {len(h.get('recovery') or [])} check(s): {ran}{signed}"
    )


def _detail(h: dict[str, Any]) -> str:
    lines = [_line(h)]
    for kind, receipt in (h.get("receipts") or {}).items():
        element = (h.get("elements") or {}).get(kind) or {}
        what = f"signed by {receipt['signer']}, {receipt['digest']}" if receipt else "not signed"
        lines.append(f"  {kind}: element {element.get('digest')}, {what}")
    return "\n".join(lines)


def cmd_handoffs(args: argparse.Namespace) -> int:

    api = api_of(args)
    if args.receipt and args.id is None:
        raise CliError("handoffs: --receipt needs --id (the takeover, see `finality handoffs`)")
    if args.id is not None:
        row = api.request("GET", f"/v1/handoffs/{args.id}")
        if args.receipt:
            receipt = (row.get("receipts") or {}).get(args.receipt)
            if receipt is None:
                raise CliError(
                    f"handoffs: handoff {args.id} has no signed {args.receipt} "
                    "(recorded before elements were signed)"
                )
            print(json.dumps(receipt, indent=2, sort_keys=True))
            return EX_OK
        show(args, row, _detail(row))
        return EX_OK
    params: dict[str, Any] = {"limit": args.limit}
    if args.name:
        params["name"] = args.name
    rows = api.request("GET", "/v1/handoffs", params=params)
    show(args, rows, "\n".join(_line(r) for r in rows) or "no handoffs")
    return EX_OK


def add_commands(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    commands: Commands,
    query: Query,
) -> None:
    """Register ``handoffs`` (query(name, help) adds --api/--config/--json)."""

    p = query("handoffs", "takeovers between instances: who, when, verdict, recovery")
    p.add_argument("--name", help="only this chain or source")
    p.add_argument("--limit", type=positive_int, default=100)
    p.add_argument("--id", type=positive_int, help="one takeover, with its signed elements")
    p.add_argument(
        "--receipt",
        choices=HANDOFF_KINDS,
        help="with --id: print this element's signed receipt (for `finality verify -`)",
    )
    commands["handoffs"] = cmd_handoffs
