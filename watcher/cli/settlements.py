"""``finality status``, ``watch`` and ``settlement``: settlements from the command line.

::

    finality status 0xTX [--chain C]                       verdict, depth, required depth
    finality watch 0xTX [--confirmations N] [--settlement-timeout S] [--wait-timeout S]
                                                           register a tx and wait
    finality watch --kind stripe_payment_intent --ref pi_…   register a payment or job and wait
    finality watch --kind evm_payment --to 0x… --asset native --amount 1000   a payment to an address
    finality settlement ID [--wait]                       one settlement by id (chain or source)

A source settlement is registered by ``kind`` and ``ref`` (the same ``POST /v1/settlements``
as the API); every wait has the same exit codes: 0 final, 1 failed, 2 timed out, 75 the
command stopped waiting (``--wait-timeout``; the settlement is unchanged). Two different
times, named for what they bound: ``--settlement-timeout`` is the settlement's deadline
(past it the daemon signs a timeout and delivers the discard), ``--wait-timeout`` only how
long this command waits. The old ``--timeout`` still sets the settlement's deadline, with
a deprecation line.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from guard.payment import PAYMENT_KIND
from guard.settlement import Verdict
from watcher.cli.common import (
    EX_FAILED,
    EX_OK,
    EX_STOPPED_WAITING,
    EX_TIMEOUT,
    Api,
    CliError,
    Commands,
    Query,
    api_of,
    check_hash,
    cli_errors,
    positive_float,
    positive_int,
    show,
    status_line,
)
from watcher.cli.payments import add_payment_flags, payment_progress, register_payment
from watcher.cli.watching import changes

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
    """Print progress to stderr until ``view``'s settlement is terminal; its exit code.

    The wait follows the daemon's event stream (:meth:`FinalityClient.wait`), not a poll
    loop: the settlement is read again when an event concerns it and at each new head of
    its chain, and a chain settlement's lines say what changed (:mod:`watcher.cli.watching`).
    With ``--wait-timeout`` the command stops waiting after that long (exit 75): the
    settlement itself keeps its own deadline and goes on being watched."""

    codes: dict[str, int] = {
        Verdict.FINALITY_CONFIRMED: EX_OK,
        Verdict.SETTLEMENT_FAILED: EX_FAILED,
        Verdict.TIMEOUT_TREATED_AS_FAILURE: EX_TIMEOUT,
    }
    shown: list[dict[str, Any]] = []
    last = ""

    def report(current: dict[str, Any]) -> None:
        nonlocal last
        if args.json:
            return
        label = current.get("ref") or (current["tx_hash"] or current["settlement_id"])[:10] + "…"
        if current.get("source") or current.get("kind") == PAYMENT_KIND:
            line = source_progress(current) if current.get("source") else payment_progress(current)
            lines = [line] if line != last else []
            last = line
        else:
            lines = changes(shown[-1] if shown else None, current)
        shown[:] = [current]
        for line in lines:
            print(f"{label}: {line}", file=sys.stderr, flush=True)

    report(view)
    if view["verdict"] not in codes:
        with cli_errors(api.base):
            view = api.client.wait(
                view["settlement_id"], timeout_s=args.wait_timeout, on_progress=report
            )
    if view["verdict"] not in codes:
        show(
            args,
            view,
            f"{view['verdict']}: stopped waiting after {args.wait_timeout:g} s "
            f"(--wait-timeout); the settlement is still watched until its deadline: "
            f"finality settlement {view['settlement_id']} --wait",
        )
        return EX_STOPPED_WAITING
    show(args, view, f"{view['verdict']}: {view.get('directive', '')}")
    return codes[view["verdict"]]


def watch_source(args: argparse.Namespace) -> int:
    """``finality watch --kind K --ref R``: register a source settlement and wait."""

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
    if args.settlement_timeout:
        body["timeout_s"] = args.settlement_timeout
    api = api_of(args)
    return wait_for_verdict(api, api.request("POST", "/v1/settlements", json=body), args)


def cmd_settlement(args: argparse.Namespace) -> int:
    """``finality settlement ID [--wait]``."""

    api = api_of(args)
    view = api.request("GET", f"/v1/settlements/{args.settlement_id}")
    if args.wait:
        return wait_for_verdict(api, view, args)
    if view.get("source"):
        line = f"{view['verdict']}  {source_progress(view)}"
    else:
        line = status_line(view)
    show(args, view, line)
    return EX_OK


def cmd_status(args: argparse.Namespace) -> int:
    """``finality status 0xTX``."""
    tx = check_hash(args.tx_hash)
    api = api_of(args)
    chain = api.default_chain(args.chain)
    params = {"confirmations": args.confirmations} if args.confirmations else None
    view = api.request("GET", f"/v1/chains/{chain}/txs/{tx}", params=params)
    show(args, view, status_line(view))
    return EX_OK


def cmd_watch(args: argparse.Namespace) -> int:
    """``finality watch 0xTX`` (or ``--kind K --ref R``, or ``--kind evm_payment``): register
    and wait."""
    settlement_timeout(args)
    if args.kind == PAYMENT_KIND:
        return wait_for_verdict(*register_payment(args), args)
    if args.kind != "evm_tx":
        return watch_source(args)
    if args.ref or args.source:
        raise CliError("watch: --ref and --source go with --kind (a payment, job or task)")
    if args.tx_hash is None:
        raise CliError("watch: give the tx hash (or --kind and --ref for a payment or job)")
    tx = check_hash(args.tx_hash)
    api = api_of(args)
    chain = api.default_chain(args.chain)
    body: dict[str, Any] = {"chain": chain, "tx_hash": tx}
    if args.confirmations:
        body["confirmations"] = args.confirmations
    if args.settlement_timeout:
        body["timeout_s"] = args.settlement_timeout
    return wait_for_verdict(api, api.request("POST", "/v1/settlements", json=body), args)


def settlement_timeout(args: argparse.Namespace) -> None:
    """Map the old ``--timeout`` (it always set the settlement's deadline) to
    ``--settlement-timeout``, saying so once on stderr: a short value fails the settlement
    with a signed timeout receipt, which is rarely what "stop waiting" meant."""
    if args.timeout is None:
        return
    if args.settlement_timeout is not None:
        raise CliError("watch: give --settlement-timeout, not the old --timeout as well")
    print(
        "finality: --timeout is deprecated: it sets the settlement's deadline (a timeout "
        "receipt and a discard when it passes), now --settlement-timeout; to bound how long "
        "this command waits, use --wait-timeout",
        file=sys.stderr,
    )
    args.settlement_timeout = args.timeout


def add_tx_commands(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    commands: Commands,
    query: Query,
) -> None:
    """Register ``status`` and ``watch`` (query(name, help) adds --api/--config/--json)."""
    status = query("status", "verdict, depth and required depth of a tx")
    status.add_argument("tx_hash")
    status.add_argument("--chain")
    status.add_argument("--confirmations", type=positive_int)
    commands["status"] = cmd_status

    watch = query(
        "watch",
        "register a tx (or, with --kind/--ref, a payment or job) and wait: "
        "exit 0 final, 1 failed, 2 timed out",
    )
    watch.add_argument("tx_hash", nargs="?")
    watch.add_argument(
        "--kind",
        default="evm_tx",
        help="evm_tx (default), evm_payment, stripe_payment_intent, rq_job, celery_task or a "
        "plugin's kind",
    )
    watch.add_argument("--ref", help="the payment intent, job or task id (with --kind)")
    watch.add_argument("--source", help="which configured source (when several have --kind)")
    watch.add_argument("--chain")
    watch.add_argument("--confirmations", type=positive_int)
    watch.add_argument(
        "--settlement-timeout",
        type=positive_float,
        metavar="S",
        help="the settlement's deadline: not final S seconds after registration, it is "
        "treated as failed (signed timeout receipt, discard delivered)",
    )
    watch.add_argument(
        "--wait-timeout",
        type=positive_float,
        metavar="S",
        help="how long this command waits: after S seconds it stops (exit 75) and the "
        "settlement goes on being watched",
    )
    watch.add_argument(
        "--timeout",
        type=positive_float,
        help="deprecated: the old name of --settlement-timeout (not how long the command waits)",
    )
    watch.add_argument("--interval", type=positive_float, help=argparse.SUPPRESS)
    add_payment_flags(watch)
    commands["watch"] = cmd_watch


def add_commands(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    commands: Commands,
    query: Query,
) -> None:
    """Register ``settlement`` (query(name, help) adds --api/--config/--json)."""
    p = query("settlement", "one settlement by id (a tx, a payment or a job); --wait to follow")
    p.add_argument("settlement_id")
    p.add_argument("--wait", action="store_true", help="wait: exit 0 final, 1 failed, 2 timed out")
    p.add_argument(
        "--wait-timeout",
        type=positive_float,
        metavar="S",
        help="with --wait: stop waiting after S seconds (exit 75); the settlement is unchanged",
    )
    p.add_argument("--interval", type=positive_float, help=argparse.SUPPRESS)
    commands["settlement"] = cmd_settlement
