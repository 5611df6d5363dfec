"""``finality watch --kind evm_payment``: register a payment to an address and wait.

::

    finality watch --kind evm_payment --chain local --to 0x… --asset native --amount 1000 \
        [--from 0x…] [--reference ORDER] [--confirmations N] [--settlement-timeout S]

Addresses and the amount are checked here first (exit 64 with the field named, before any
request); the daemon checks them again. The wait has the exit codes of every wait: 0 paid
finally, 2 timed out (the last line says what was paid).
"""

from __future__ import annotations

import argparse
from typing import Any

from guard.payment import NATIVE, InvalidPaymentField, parse_amount, parse_payment_address
from watcher.cli.common import Api, CliError, api_of
from watcher.client.common import payment_registration


def payment_progress(view: dict[str, Any]) -> str:
    """One line on where a payment stands: paid of amount, transfers, the verdict."""
    transfers = view.get("transfers") or []
    asset = "wei" if view.get("asset") == NATIVE else f"of {view.get('asset')}"
    return (
        f"{view.get('verdict')}: paid {view.get('paid')} of {view.get('amount')} {asset} "
        f"to {view.get('to')} ({len(transfers)} transfer(s), remaining {view.get('remaining')})"
    )


def payment_body(args: argparse.Namespace, chain: str) -> dict[str, Any]:
    """The registration body of ``args``; :class:`CliError` naming a bad or missing flag."""
    for flag in ("to", "asset", "amount"):
        if not getattr(args, flag):
            raise CliError(f"watch: --kind evm_payment needs --{flag}")
    try:
        to = parse_payment_address(args.to, "--to")
        asset = args.asset if args.asset == NATIVE else parse_payment_address(args.asset, "--asset")
        amount = parse_amount(args.amount, "--amount")
        sender = parse_payment_address(args.sender, "--from") if args.sender else None
    except InvalidPaymentField as exc:
        raise CliError(f"watch: {exc}") from None
    opts: dict[str, Any] = {"sender": sender, "reference": args.reference}
    if args.confirmations:
        opts["confirmations"] = args.confirmations
    if args.settlement_timeout:
        opts["timeout_s"] = args.settlement_timeout
    return payment_registration(chain, to, asset, amount, **opts)


def register_payment(args: argparse.Namespace) -> tuple[Api, dict[str, Any]]:
    """Register the payment ``args`` describe; (the API, its view)."""
    if args.tx_hash is not None or args.ref or args.source:
        raise CliError("watch: --kind evm_payment takes --to/--asset/--amount, not a hash or --ref")
    api = api_of(args)
    body = payment_body(args, api.default_chain(args.chain))
    return api, api.request("POST", "/v1/settlements", json=body)


def add_payment_flags(watch: argparse.ArgumentParser) -> None:
    """The flags of ``watch --kind evm_payment``."""
    watch.add_argument("--to", help="evm_payment: the receiving address")
    watch.add_argument("--asset", help="evm_payment: 'native' or the token contract")
    watch.add_argument("--amount", help="evm_payment: base units (wei, token units)")
    watch.add_argument("--from", dest="sender", help="evm_payment: count only transfers from it")
    watch.add_argument("--reference", help="evm_payment: idempotency key (an order id)")
