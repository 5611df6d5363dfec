"""``finality deliveries``: the outbox seen from the command line.

::

    finality deliveries [--state dead] [--settlement ID] [--limit N]   list rows
    finality deliveries replay ID                                       resend a dead row

Both talk to the running daemon's API (``GET /v1/deliveries``,
``POST /v1/deliveries/{id}/replay``); ``--json`` prints its answer as is.
"""

from __future__ import annotations

import argparse
from typing import Any

from watcher.cli.common import EX_OK, CliError, Commands, Query, api_of, positive_int, show

STATES = ("pending", "sending", "delivered", "dead", "cancelled")


def _line(d: dict[str, Any]) -> str:
    error = f"  last: {d['last_error']}" if d.get("last_error") else ""
    target = d.get("settlement_id") or f"event {d.get('event_id')}"
    return (
        f"#{d['id']:<6} {d['state']:<9} {d['attempts']:>2} attempt(s)  {d['channel']}/{d['kind']}"
        f"  {target}  -> {d['url']}{error}"
    )


def cmd_deliveries(args: argparse.Namespace) -> int:

    api = api_of(args)
    if args.action == "replay":
        if args.id is None:
            raise CliError("deliveries replay: give the delivery ID (see `finality deliveries`)")
        row = api.request("POST", f"/v1/deliveries/{args.id}/replay")
        show(args, row, f"replaying: {_line(row)}")
        return EX_OK
    if args.id is not None:
        raise CliError(
            f"deliveries: unexpected argument {args.id} (did you mean `replay {args.id}`?)"
        )
    params: dict[str, Any] = {"limit": args.limit}
    if args.state:
        params["state"] = args.state
    if args.settlement:
        params["settlement_id"] = args.settlement
    rows = api.request("GET", "/v1/deliveries", params=params)
    empty = f"no {args.state} deliveries" if args.state else "no deliveries"
    show(args, rows, "\n".join(_line(r) for r in rows) or empty)
    return EX_OK


def add_commands(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    commands: Commands,
    query: Query,
) -> None:
    """Register ``deliveries`` (query(name, help) adds --api/--config/--json)."""

    p = query("deliveries", "outbox deliveries (commits, alerts); `deliveries replay ID`")
    p.add_argument("action", nargs="?", choices=["list", "replay"], default="list")
    p.add_argument("id", nargs="?", type=positive_int, help="delivery id (for replay)")
    p.add_argument("--state", choices=STATES, help="only rows in this state (e.g. dead)")
    p.add_argument("--settlement", help="only rows of this settlement id")
    p.add_argument("--limit", type=positive_int, default=100)
    commands["deliveries"] = cmd_deliveries
