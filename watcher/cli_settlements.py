"""``finality settlement`` and ``finality watch --kind``: any settlement from the command line.

::

    finality settlement ID [--wait]                       one settlement by id (chain or source)
    finality watch --kind stripe_payment_intent --ref pi_…   register a payment or job and wait

``watch`` of an EVM tx (``finality watch 0xTX``) lives in :mod:`watcher.cli`; this module adds
what the payment and job sources need: registration by ``kind`` and ``ref`` (the same
``POST /v1/settlements`` as the API), and the wait shared by both, with the same exit codes:
0 final, 1 failed, 2 timed out.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, MutableMapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from watcher.cli import Api

Command = Callable[[argparse.Namespace], int]

SOURCE_KINDS = ("stripe_payment_intent", "rq_job", "celery_task")
"""The built-in source kinds (a plugin's kind is accepted too: the daemon checks it)."""


def source_progress(view: dict[str, Any]) -> str:
    """One line on where a payment or job stands: its kind, ref and the last evidence."""
    evidence = view.get("evidence") or {}
    facts = evidence.get("facts") or {}
    status = facts.get("status") or facts.get("state")
    said = evidence.get("kind", "no observation yet")
    if status is not None:
        said = f"{said} ({status})"
    return f"{view.get('kind')} {view.get('ref')} via {view.get('source')}: {said}"


def wait_for_verdict(api: Api, view: dict[str, Any], args: argparse.Namespace) -> int:
    """Print progress to stderr until ``view``'s settlement is terminal; its exit code."""
    from watcher.cli import EX_FAILED, EX_OK, EX_TIMEOUT, _print, _progress

    codes = {
        "FINALITY_CONFIRMED": EX_OK,
        "SETTLEMENT_FAILED": EX_FAILED,
        "TIMEOUT_TREATED_AS_FAILURE": EX_TIMEOUT,
    }
    sid = view["settlement_id"]
    last = ""
    while True:
        line = source_progress(view) if view.get("source") else _progress(view)
        if line != last and not args.json:
            label = view.get("ref") or view["tx_hash"][:10] + "…"
            print(f"{label}: {line}", file=sys.stderr, flush=True)
            last = line
        code = codes.get(view["verdict"])
        if code is not None:
            _print(args, view, f"{view['verdict']}: {view.get('directive', '')}")
            return code
        time.sleep(args.interval)
        view = api.request("GET", f"/v1/settlements/{sid}")


def watch_source(args: argparse.Namespace) -> int:
    """``finality watch --kind K --ref R``: register a source settlement and wait."""
    from watcher.cli import Api, CliError, _api_url

    if args.tx_hash is not None:
        raise CliError(f"watch: --kind {args.kind} takes --ref, not a tx hash ({args.tx_hash})")
    if not args.ref:
        raise CliError(f"watch: --kind {args.kind} needs --ref (the payment, job or task id)")
    for option in ("chain", "confirmations"):
        if getattr(args, option):
            raise CliError(f"watch: --{option} is for EVM txs, not --kind {args.kind}")
    body: dict[str, Any] = {"kind": args.kind, "ref": args.ref}
    if args.source:
        body["source"] = args.source
    if args.timeout:
        body["timeout_s"] = args.timeout
    api = Api(_api_url(args))
    return wait_for_verdict(api, api.request("POST", "/v1/settlements", json=body), args)


def cmd_settlement(args: argparse.Namespace) -> int:
    """``finality settlement ID [--wait]``."""
    from watcher.cli import EX_OK, Api, _api_url, _print, _status_line

    api = Api(_api_url(args))
    view = api.request("GET", f"/v1/settlements/{args.settlement_id}")
    if args.wait:
        return wait_for_verdict(api, view, args)
    if view.get("source"):
        line = f"{view['verdict']}  {source_progress(view)}"
    else:
        line = _status_line(view)
    _print(args, view, line)
    return EX_OK


def add_commands(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    commands: MutableMapping[str, Command],
    query: Callable[[str, str], argparse.ArgumentParser],
) -> None:
    """Register ``settlement`` (query(name, help) adds --api/--config/--json)."""
    from watcher.cli import _positive_float

    p = query("settlement", "one settlement by id (a tx, a payment or a job); --wait to follow")
    p.add_argument("settlement_id")
    p.add_argument("--wait", action="store_true", help="wait: exit 0 final, 1 failed, 2 timed out")
    p.add_argument("--interval", type=_positive_float, default=0.5, help="poll every S seconds")
    commands["settlement"] = cmd_settlement
