"""``finality demo``: the whole path once, against the local dev chain of ``make run``.

It sends a 1 wei transfer from the dev chain's first unlocked account (anvil's
``eth_sendTransaction`` from ``eth_accounts[0]``), registers it with the daemon, follows it
to finality with the progress lines of ``finality watch`` (on stderr), fetches the signed
receipt and verifies it offline, as a third party would. A newcomer sees every step without
another tool. It refuses a node that has no unlocked accounts (a public chain).

Exit codes as ``watch``: 0 final and the receipt valid, 1 failed or the receipt invalid,
2 timed out; 64 bad input, 69 daemon or node unreachable.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import httpx

from guard.settlement import Verdict
from watcher.cli.common import (
    EX_FAILED,
    EX_OK,
    EX_TIMEOUT,
    EX_UNAVAILABLE,
    Api,
    CliError,
    Commands,
    Query,
    api_of,
    cli_errors,
    positive_float,
    positive_int,
    progress,
    short,
    show,
)

LOCAL_RPC = "http://127.0.0.1:8545"
"""The dev chain of ``make run`` (scripts/run-local.sh)."""

EXIT: dict[str, int] = {Verdict.FINALITY_CONFIRMED: EX_OK, Verdict.SETTLEMENT_FAILED: EX_FAILED}


def say(args: argparse.Namespace, line: str) -> None:
    """A progress line on stderr (none under ``--json``: stdout is the answer)."""
    if not args.json:
        print(f"demo: {line}", file=sys.stderr, flush=True)


def rpc(url: str, method: str, *params: Any) -> Any:
    """One JSON-RPC call to the dev node; :class:`CliError` (69) if it does not answer."""
    try:
        body = httpx.post(
            url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}
        ).json()
    except (httpx.HTTPError, ValueError) as exc:
        raise CliError(
            f"demo: cannot reach the dev chain at {url}: {exc}", EX_UNAVAILABLE
        ) from None
    if body.get("error"):
        raise CliError(f"demo: {url} {method}: {body['error'].get('message', body['error'])}")
    return body.get("result")


def send_transfer(url: str, chain_id: int) -> tuple[str, str, str]:
    """(from, to, tx hash) of a 1 wei transfer between the node's first two dev accounts."""
    node_chain = int(rpc(url, "eth_chainId"), 16)
    if node_chain != chain_id:
        raise CliError(
            f"demo: {url} serves chain id {node_chain}, the daemon's chain is {chain_id}"
        )
    accounts = rpc(url, "eth_accounts") or []
    if len(accounts) < 2:
        raise CliError(f"demo: {url} has no unlocked dev accounts: not a local dev chain")
    tx = rpc(url, "eth_sendTransaction", {"from": accounts[0], "to": accounts[1], "value": "0x1"})
    return str(accounts[0]), str(accounts[1]), str(tx)


def cmd_demo(args: argparse.Namespace) -> int:
    """Send, watch, fetch the receipt, verify it offline."""
    from watcher.client.offline import verify

    api = api_of(args)
    name = api.default_chain(args.chain)
    chain = next((c for c in api.request("GET", "/v1/chains") if c["name"] == name), None)
    if chain is None:
        raise CliError(f"demo: the daemon follows no chain {name!r}")
    sender, to, tx = send_transfer(args.rpc, int(chain["chain_id"]))
    say(args, f"sent 1 wei from {short(sender)} to {short(to)} on {name}: tx {tx}")
    view = register(api, name, tx, args)
    say(args, f"registered as {view['settlement_id']}; waiting for finality (SSE)")
    last = ""

    def report(current: dict[str, Any]) -> None:
        """Say each new state once: a new verdict with the same progress text is new (an
        AWAITING event at the last confirmation reads as the confirmed one does)."""
        nonlocal last
        line = f"{current['verdict']}: {progress(current)}"
        if line != last:
            say(args, line)
            last = line

    with cli_errors(api.base):
        report(view)
        final = api.client.wait(view["settlement_id"], on_progress=report)
        report(final)  # the verdict waited for, if no progress event carried it
        receipt = api.client.receipt(final["settlement_id"])
    checked = verify(receipt)
    if checked.receipt is not None:
        said = f"valid, signed by {checked.receipt.signer}"
    else:
        said = f"INVALID: {checked.reason}"
    say(args, f"receipt {receipt.get('kind')} fetched; verified offline (no daemon): {said}")
    answer = {"settlement": final, "receipt": receipt, "verification": checked.as_json()}
    show(args, answer, f"{final['verdict']}: {final.get('directive', '')}")
    if not checked.valid:
        return EX_FAILED
    return EXIT.get(final["verdict"], EX_TIMEOUT)


def register(api: Api, chain: str, tx: str, args: argparse.Namespace) -> dict[str, Any]:
    """Register the demo's tx with the daemon."""
    opts: dict[str, Any] = {"timeout_s": args.timeout}
    if args.confirmations:
        opts["confirmations"] = args.confirmations
    with cli_errors(api.base):
        return api.client.register(chain, tx, **opts)


def add_commands(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    commands: Commands,
    query: Query,
) -> None:
    """Register ``demo`` (query(name, help) adds --api/--config/--json)."""
    p = query("demo", "send a dev-chain transfer, watch it to finality, verify its receipt")
    p.add_argument("--rpc", default=LOCAL_RPC, help=f"the dev chain node (default {LOCAL_RPC})")
    p.add_argument("--chain", help="the daemon's chain of that node (default: its only one)")
    p.add_argument("--confirmations", type=positive_int)
    p.add_argument(
        "--timeout", type=positive_float, default=120.0, help="seconds until treated as failed"
    )
    commands["demo"] = cmd_demo
