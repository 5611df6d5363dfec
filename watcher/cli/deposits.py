"""``finality subscriptions``, ``finality deposits`` and ``finality invoice``.

::

    finality subscriptions create --chain local --asset native --asset 0xTOKEN \
        --address 0x… [--address 0x…] [--addresses-file FILE] [--confirmations N] \
        [--commit-url URL]
    finality subscriptions list | delete SUB_ID
    finality deposits SUB_ID [--verdict V] [--cursor C] [--limit N]
    finality invoice create --chain local --asset native --amount 1000 --expires-in 900
    finality invoice show INV_ID | accept INV_ID

Addresses and amounts are checked here first (exit 64 naming the flag, before any
request); the daemon checks them again (docs/deposits.md, docs/invoices.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from guard.payment import NATIVE, InvalidPaymentField, parse_amount, parse_payment_address
from watcher.cli.common import EX_OK, CliError, Commands, Query, api_of, positive_int, show
from watcher.client.common import invoice_body, subscription_body


def _address(value: str, flag: str) -> str:
    try:
        return parse_payment_address(value, flag)
    except InvalidPaymentField as exc:
        raise CliError(str(exc)) from None


def _asset(value: str, flag: str) -> str:
    return value if value == NATIVE else _address(value, flag)


def _addresses(args: argparse.Namespace) -> list[str]:
    given = list(args.address or [])
    if args.addresses_file:
        try:
            text = Path(args.addresses_file).read_text()
        except OSError as exc:
            raise CliError(f"--addresses-file: cannot read it: {exc.strerror}") from None
        given += [line.strip() for line in text.splitlines() if line.strip()]
    if not given:
        raise CliError("subscriptions create: needs --address or --addresses-file")
    return [_address(a, "--address") for a in given]


def cmd_subscriptions(args: argparse.Namespace) -> int:
    """``finality subscriptions create|list|delete``."""
    api = api_of(args)
    if args.action == "create":
        if not args.asset:
            raise CliError("subscriptions create: needs --asset (native or a token contract)")
        assets = [_asset(a, "--asset") for a in args.asset]
        addresses = _addresses(args)
        body = subscription_body(
            api.default_chain(args.chain),
            addresses,
            assets,
            confirmations=args.confirmations,
            commit_url=args.commit_url,
        )
        sub = api.request("POST", "/v1/subscriptions", json=body)
        show(args, sub, _subscription_line(sub))
        return EX_OK
    if args.action == "delete":
        if not args.subscription_id:
            raise CliError("subscriptions delete: needs the subscription id")
        sub = api.request("DELETE", f"/v1/subscriptions/{args.subscription_id}")
        show(args, sub, _subscription_line(sub))
        return EX_OK
    subs = api.request("GET", "/v1/subscriptions")["items"]
    show(args, subs, "\n".join(_subscription_line(s) for s in subs) or "no subscriptions")
    return EX_OK


def _subscription_line(sub: dict[str, Any]) -> str:
    state = "active" if sub["active"] else "deleted"
    assets = ", ".join(sub["assets"])
    return f"{sub['subscription_id']} {sub['chain']}: {sub['addresses']} address(es), {assets} ({state})"


def cmd_deposits(args: argparse.Namespace) -> int:
    """``finality deposits SUB_ID``."""
    params = {"verdict": args.verdict, "cursor": args.cursor, "limit": args.limit}
    path = f"/v1/subscriptions/{args.subscription_id}/deposits"
    page = api_of(args).request(
        "GET", path, params={k: v for k, v in params.items() if v is not None}
    )
    lines = [
        f"{d['settlement_id']} {d['verdict']}: {d['amount']} {d['asset']} to {d['address']} "
        f"from {d['from']} (tx {d['tx_hash']}"
        + (f", log {d['log_index']}" if d.get("log_index") is not None else "")
        + (", reorged out" if d.get("reorged_out") else "")
        + ")"
        for d in page["items"]
    ]
    if page.get("next_cursor"):
        lines.append(f"more: --cursor {page['next_cursor']}")
    show(args, page, "\n".join(lines) or "no deposits")
    return EX_OK


def cmd_invoice(args: argparse.Namespace) -> int:
    """``finality invoice create|show|accept``."""
    api = api_of(args)
    if args.action == "create":
        for flag in ("asset", "amount", "expires_in"):
            if getattr(args, flag) is None:
                raise CliError(f"invoice create: needs --{flag.replace('_', '-')}")
        try:
            amount = parse_amount(args.amount, "--amount")
        except InvalidPaymentField as exc:
            raise CliError(str(exc)) from None
        body = invoice_body(
            api.default_chain(args.chain),
            _asset(args.asset, "--asset"),
            amount,
            args.expires_in,
            reference=args.reference,
        )
        view = api.request("POST", "/v1/invoices", json=body)
    else:
        if not args.invoice_id:
            raise CliError(f"invoice {args.action}: needs the invoice id")
        if args.action == "accept":
            view = api.request("POST", f"/v1/invoices/{args.invoice_id}/accept")
        else:
            view = api.request("GET", f"/v1/invoices/{args.invoice_id}")
    show(args, view, _invoice_text(view))
    return EX_OK


def _invoice_text(view: dict[str, Any]) -> str:
    return (
        f"{view['invoice_id']} {view['state']} ({view['verdict']}): paid {view['paid']} of "
        f"{view['amount']} {view['asset']}, remaining {view['remaining']}\n"
        f"pay to {view['address']}\n{view['payment_uri']}"
    )


def add_commands(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    commands: Commands,
    query: Query,
) -> None:
    """Register ``subscriptions``, ``deposits`` and ``invoice``."""
    subs = query("subscriptions", "standing address watches: create, list, delete")
    subs.add_argument("action", choices=("create", "list", "delete"))
    subs.add_argument("subscription_id", nargs="?")
    subs.add_argument("--chain")
    subs.add_argument("--asset", action="append", help="native or a token contract (repeat)")
    subs.add_argument("--address", action="append", help="a watched address (repeat)")
    subs.add_argument("--addresses-file", help="one address a line")
    subs.add_argument("--confirmations", type=positive_int)
    subs.add_argument("--commit-url", help="each deposit's commit goes here, once, when final")
    commands["subscriptions"] = cmd_subscriptions
    deps = query("deposits", "a subscription's deposits, oldest first")
    deps.add_argument("subscription_id")
    deps.add_argument("--verdict")
    deps.add_argument("--cursor")
    deps.add_argument("--limit", type=positive_int)
    commands["deposits"] = cmd_deposits
    inv = query("invoice", "invoices at fresh addresses: create, show, accept")
    inv.add_argument("action", choices=("create", "show", "accept"))
    inv.add_argument("invoice_id", nargs="?")
    inv.add_argument("--chain")
    inv.add_argument("--asset", help="native or the token contract")
    inv.add_argument("--amount", help="base units (wei, token units)")
    inv.add_argument("--expires-in", dest="expires_in", type=float, help="seconds")
    inv.add_argument("--reference")
    commands["invoice"] = cmd_invoice
