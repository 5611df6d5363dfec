"""``finality handoffs``: takeovers between instances, from the command line.

::

    finality handoffs [--name CHAIN] [--limit N]

Talks to the running daemon's API (``GET /v1/handoffs``); ``--json`` prints it as is.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, MutableMapping
from datetime import UTC, datetime
from typing import Any

Command = Callable[[argparse.Namespace], int]


def _line(h: dict[str, Any]) -> str:
    when = datetime.fromtimestamp(h["at"] / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    ran = ", ".join(sorted({r["predicate"] for r in h.get("recovery") or []})) or "none"
    return (
        f"#{h['id']:<5} {when}Z  {h['name']}: {h['from_owner'] or '-'} (token "
        f"{h['from_token'] if h['from_token'] is not None else '-'}) -> {h['to_owner']} "
        f"(token {h['to_token']}), {h['reason']}, {h['verdict']}; "
        f"recovery: {len(h.get('recovery') or [])} check(s): {ran}"
    )


def cmd_handoffs(args: argparse.Namespace) -> int:
    from watcher.cli import EX_OK, Api, _api_url, _print

    params: dict[str, Any] = {"limit": args.limit}
    if args.name:
        params["name"] = args.name
    rows = Api(_api_url(args)).request("GET", "/v1/handoffs", params=params)
    _print(args, rows, "\n".join(_line(r) for r in rows) or "no handoffs")
    return EX_OK


def add_commands(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    commands: MutableMapping[str, Command],
    query: Callable[[str, str], argparse.ArgumentParser],
) -> None:
    """Register ``handoffs`` (query(name, help) adds --api/--config/--json)."""
    from watcher.cli import _positive_int

    p = query("handoffs", "takeovers between instances: who, when, verdict, recovery")
    p.add_argument("--name", help="only this chain or source")
    p.add_argument("--limit", type=_positive_int, default=100)
    commands["handoffs"] = cmd_handoffs
