"""``finality settlements`` and ``finality register --file``: many settlements at once.

::

    finality settlements [--chain C] [--verdict V] [--kind K] [--limit N] [--cursor X]
    finality register --file F.json                      a JSON list of registrations

``settlements`` pages through ``GET /v1/settlements`` (oldest first) up to ``--limit`` and
prints the cursor to go on from; ``register --file`` sends the list to
``POST /v1/settlements/batch`` (1,000 per request, each request one store transaction) and
prints one line per item. Exit 0 when every item is registered (or was already), 64 when
any item was refused (the others are registered all the same).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from guard.settlement import Verdict
from watcher.api.models.settlements import MAX_BATCH, MAX_PAGE
from watcher.cli.common import (
    EX_OK,
    EX_USAGE,
    CliError,
    Commands,
    Query,
    api_of,
    positive_int,
    show,
    status_line,
)

VERDICTS = tuple(v.value for v in Verdict)
"""The verdicts ``--verdict`` accepts (plain strings: argparse shows them as written)."""


def cmd_settlements(args: argparse.Namespace) -> int:
    """List settlements, oldest first, up to ``--limit``."""
    api = api_of(args)
    items: list[dict[str, Any]] = []
    cursor: str | None = args.cursor
    filters = {k: v for k in ("chain", "verdict", "kind") if (v := getattr(args, k)) is not None}
    while len(items) < args.limit:
        params = {**filters, "limit": min(MAX_PAGE, args.limit - len(items))}
        if cursor is not None:
            params["cursor"] = cursor
        page = api.request("GET", "/v1/settlements", params=params)
        items.extend(page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    lines = [f"{v['settlement_id']}  {status_line(v)}" for v in items] or ["no settlements"]
    if cursor is not None:
        lines.append(f"more: --cursor {cursor}")
    show(args, {"items": items, "next_cursor": cursor}, "\n".join(lines))
    return EX_OK


def cmd_register(args: argparse.Namespace) -> int:
    """Register every item of ``--file`` through the batch route."""
    items = _read_items(args.file)
    api = api_of(args)
    results: list[dict[str, Any]] = []
    for start in range(0, len(items), MAX_BATCH):
        answer = api.request(
            "POST", "/v1/settlements/batch", json={"items": items[start : start + MAX_BATCH]}
        )
        results.extend({**r, "index": r["index"] + start} for r in answer["results"])
    refused = [r for r in results if r["status"] not in (200, 201)]
    show(args, {"results": results}, "\n".join(_line(r) for r in results))
    if refused:
        print(f"finality: {len(refused)} of {len(results)} refused", file=sys.stderr)
        return EX_USAGE
    return EX_OK


def _line(result: dict[str, Any]) -> str:
    """One item's outcome: status, id and verdict, or the refusal."""
    if result.get("settlement"):
        view = result["settlement"]
        said = "registered" if result["status"] == 201 else "already registered"
        return f"#{result['index']} {said}: {view['settlement_id']} {view['verdict']}"
    return f"#{result['index']} refused ({result['status']}): {result['error']}"


def _read_items(path: str) -> list[dict[str, Any]]:
    """The JSON list in ``path`` (``-``: stdin); :class:`CliError` if it is not one."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"--file: cannot read {path}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CliError(f"--file: {path} is not JSON: {exc}") from None
    if not isinstance(data, list) or not data or not all(isinstance(i, dict) for i in data):
        raise CliError(f"--file: {path} must hold a non-empty JSON list of objects")
    return data


def add_commands(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    commands: Commands,
    query: Query,
) -> None:
    """Register ``settlements`` and ``register``."""
    p = query("settlements", "registered settlements, oldest first (filters, cursor pages)")
    p.add_argument("--chain", help="a chain (or source) name")
    p.add_argument("--verdict", choices=VERDICTS)
    p.add_argument("--kind", help="evm_tx or a source kind")
    p.add_argument("--limit", type=positive_int, default=50, help="at most this many (50)")
    p.add_argument("--cursor", help="go on from a previous listing's cursor")
    commands["settlements"] = cmd_settlements
    r = query("register", "register many settlements from a JSON list (POST …/batch)")
    r.add_argument("--file", required=True, help="a JSON list of registration bodies (- stdin)")
    commands["register"] = cmd_register
