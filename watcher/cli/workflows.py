"""``finality workflows`` and ``finality workflow ID``: callers' workflows, from the shell.

::

    finality workflows [--cursor C] [--limit N] [--json]
    finality workflow ID [--json]
    finality workflow ID --receipt KIND > element.json && finality verify element.json --workflow ID

Talks to the running daemon (``GET /v1/workflows``, ``GET /v1/workflows/{id}``) as the
caller of ``--token``; ``--json`` prints the answer as is. A workflow id that is not a
single path segment is refused here (exit 64), before any request.
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from guard.handoff_receipts import HANDOFF_KINDS
from watcher.cli.common import EX_OK, CliError, Commands, Query, api_of, positive_int, show

WORKFLOW_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _line(w: dict[str, Any]) -> str:
    done = sum(1 for s in w["steps"] if s["state"] == "completed")
    flying = [s["name"] for s in w["steps"] if s["state"] == "in_flight"]
    ref = f" ({w['reference']})" if w.get("reference") else ""
    return (
        f"{w['workflow_id']}{ref}  {w['holder']} token {w['fencing_token']} "
        f"({w['lease_state']})  {done}/{len(w['steps'])} completed"
        + (f", in flight: {', '.join(flying)}" if flying else "")
    )


def _detail(w: dict[str, Any]) -> str:
    lines = [_line(w), f"  last lock change: {w.get('verdict')}"]
    recovered = {r["step"]: r for r in w.get("recovery") or []}
    for step in w["steps"]:
        line = f"  {step['name']:<16} {step['state']:<10}"
        if step.get("operation"):
            line += f" {step['operation']}"
        if step["name"] in recovered:
            line += f"  -> recovery: {recovered[step['name']]['state']}"
        if step.get("side_effects"):
            line += f"  side effects: {json.dumps(step['side_effects'], sort_keys=True)}"
        lines.append(line)
    for kind, receipt in (w.get("receipts") or {}).items():
        lines.append(f"  {kind}: signed by {receipt['signer']}, {receipt['digest']}")
    return "\n".join(lines)


def cmd_workflows(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"limit": args.limit}
    if args.cursor:
        params["cursor"] = args.cursor
    page = api_of(args).request("GET", "/v1/workflows", params=params)
    text = "\n".join(_line(w) for w in page["items"]) or "no workflows"
    if page.get("next_cursor"):
        text += f"\nmore: --cursor {page['next_cursor']}"
    show(args, page, text)
    return EX_OK


def cmd_workflow(args: argparse.Namespace) -> int:
    if not WORKFLOW_ID.match(args.workflow_id):
        raise CliError(f"workflow: {args.workflow_id!r} is not a workflow id (wf_...)")
    view = api_of(args).request("GET", f"/v1/workflows/{args.workflow_id}")
    if args.receipt:
        print(json.dumps(view["receipts"][args.receipt], indent=2, sort_keys=True))
        return EX_OK
    show(args, view, _detail(view))
    return EX_OK


def add_commands(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    commands: Commands,
    query: Query,
) -> None:
    """Register ``workflows`` and ``workflow``."""
    p = query("workflows", "your workflows: holder, token, lease, steps done and in flight")
    p.add_argument("--cursor", help="next_cursor of the previous page")
    p.add_argument("--limit", type=positive_int, default=100)
    commands["workflows"] = cmd_workflows
    one = query("workflow", "one workflow: its steps, recovery of in-flight ones, receipts")
    one.add_argument("workflow_id", metavar="ID")
    one.add_argument(
        "--receipt",
        choices=HANDOFF_KINDS,
        help="print this recorded element's signed receipt (for `finality verify - --workflow`)",
    )
    commands["workflow"] = cmd_workflow
