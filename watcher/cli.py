"""``finality``: run the daemon, or ask a running one about settlements.

Exit codes: 0 ok (``watch``: final), 1 failed, 2 timed out, 64 bad input (one line on stderr
naming the problem), 69 daemon or node unreachable, 78 bad configuration.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import httpx

EX_OK, EX_FAILED, EX_TIMEOUT = 0, 1, 2
EX_USAGE, EX_UNAVAILABLE, EX_CONFIG = 64, 69, 78
DEFAULT_API = "http://127.0.0.1:8710"
DEFAULT_CONFIG = "config/local.toml"


class CliError(Exception):
    """A one-line reason and the exit code that goes with it."""

    def __init__(self, message: str, code: int = EX_USAGE) -> None:
        super().__init__(message)
        self.code = code


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise CliError(f"{self.prog}: {message} (see `{self.prog} --help`)")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="finality", description=__doc__.split("\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="run the daemon (API + polling)")
    run.add_argument("--config", default=os.environ.get("FINALITY_CONFIG", DEFAULT_CONFIG))
    run.add_argument("--log-level", default="INFO")

    def query(name: str, help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_)
        p.add_argument(
            "--api", help=f"daemon URL (default {DEFAULT_API}, or --config's api.listen)"
        )
        p.add_argument("--config", help="take the API address from this config file")
        p.add_argument("--json", action="store_true", help="machine-readable output")
        return p

    status = query("status", "verdict, depth and required depth of a tx")
    status.add_argument("tx_hash")
    status.add_argument("--chain")
    status.add_argument("--confirmations", type=_positive_int)

    watch = query(
        "watch",
        "register a tx (or, with --kind/--ref, a payment or job) and wait: "
        "exit 0 final, 1 failed, 2 timed out",
    )
    watch.add_argument("tx_hash", nargs="?")
    watch.add_argument(
        "--kind",
        default="evm_tx",
        help="evm_tx (default), stripe_payment_intent, rq_job, celery_task or a plugin's kind",
    )
    watch.add_argument("--ref", help="the payment intent, job or task id (with --kind)")
    watch.add_argument("--source", help="which configured source (when several have --kind)")
    watch.add_argument("--chain")
    watch.add_argument("--confirmations", type=_positive_int)
    watch.add_argument("--timeout", type=_positive_float, help="seconds until treated as failed")
    watch.add_argument("--interval", type=_positive_float, default=0.5, help="poll every S seconds")

    query("chains", "configured chains and their heads")
    reorgs = query("reorgs", "reorgs seen, newest first")
    reorgs.add_argument("--chain")
    reorgs.add_argument("--limit", type=_positive_int, default=20)

    from watcher import cli_delivery, cli_handoff, cli_receipts, cli_settlements

    cli_settlements.add_commands(sub, COMMANDS, query)
    cli_receipts.add_commands(sub, COMMANDS, query)
    cli_delivery.add_commands(sub, COMMANDS, query)
    cli_handoff.add_commands(sub, COMMANDS, query)
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


# -- talking to the daemon ------------------------------------------------------------------


class Api:
    """A thin client of the daemon's HTTP API that turns failures into :class:`CliError`."""

    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")
        self.http = httpx.Client(base_url=self.base, timeout=15.0)

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise CliError(
                f"cannot reach the finality daemon at {self.base}: {exc} "
                "(start it with `finality run`, or pass --api)",
                EX_UNAVAILABLE,
            ) from None
        try:
            body = response.json()
        except ValueError:
            raise CliError(
                f"{self.base}{path}: HTTP {response.status_code}, not JSON", EX_UNAVAILABLE
            ) from None
        if response.status_code >= 500:
            raise CliError(str(body.get("error", body)), EX_UNAVAILABLE)
        if response.status_code >= 400:
            raise CliError(str(body.get("error", body)), EX_USAGE)
        return body

    def default_chain(self, given: str | None) -> str:
        if given:
            return given
        chains = [c["name"] for c in self.request("GET", "/v1/chains")]
        if len(chains) == 1:
            return str(chains[0])
        raise CliError(f"the daemon follows several chains ({', '.join(chains)}): give --chain")


def _api_url(args: argparse.Namespace) -> str:
    if args.api:
        return str(args.api)
    if args.config:
        from watcher.config.errors import ConfigError
        from watcher.config.loading import load_config

        try:
            listen = load_config(args.config).api
        except ConfigError as exc:
            raise CliError(str(exc), EX_CONFIG) from None
        return f"http://{listen.host}:{listen.port}"
    return os.environ.get("FINALITY_API", DEFAULT_API)


def _check_hash(value: str) -> str:
    from guard.errors import InvalidHash
    from guard.hexes import parse_tx_hash

    try:
        return str(parse_tx_hash(value))
    except InvalidHash as exc:
        raise CliError(str(exc)) from None


def _short(value: str | None) -> str:
    return "-" if value is None else f"{value[:6]}…{value[-4:]}"


def _progress(view: dict[str, Any]) -> str:
    if view["verdict"] == "NO_SETTLEMENT":
        return "the node does not know this transaction"
    if view["block_number"] is None:
        if view.get("replaced_by"):
            return f"replaced by {view['replaced_by']}"
        return f"waiting for inclusion; 0/{view['required_confirmations']} confirmations"
    return (
        f"included in block {view['block_number']} ({_short(view['block_hash'])}), "
        f"{min(view['confirmations'], view['required_confirmations'])}"
        f"/{view['required_confirmations']} confirmations"
    )


def _status_line(view: dict[str, Any]) -> str:
    return f"{view['verdict']}  {view['chain']} {view['tx_hash']}  {_progress(view)}"


def _print(args: argparse.Namespace, data: Any, human: str) -> None:
    print(json.dumps(data, indent=2, sort_keys=True) if args.json else human)


# -- commands ---------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    from watcher import logs
    from watcher.config.errors import ConfigError
    from watcher.config.loading import load_config

    logs.configure(args.log_level.upper())
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        raise CliError(str(exc), EX_CONFIG) from None
    # Imported after the config is read: a broken config is reported at once, not after
    # web3 and the rest have loaded.
    from chains.errors import ChainIdMismatch
    from watcher.app.build import build
    from watcher.signer import SigningKeyError
    from watcher.store import StoreError

    try:
        service = build(config)
    except (StoreError, SigningKeyError) as exc:
        raise CliError(str(exc), EX_CONFIG) from None
    from watcher.api.server import create_app

    try:
        service.run(create_app)
    except ChainIdMismatch as exc:
        raise CliError(str(exc), EX_CONFIG) from None
    return EX_OK


def cmd_status(args: argparse.Namespace) -> int:
    tx = _check_hash(args.tx_hash)
    api = Api(_api_url(args))
    chain = api.default_chain(args.chain)
    params = {"confirmations": args.confirmations} if args.confirmations else None
    view = api.request("GET", f"/v1/chains/{chain}/txs/{tx}", params=params)
    _print(args, view, _status_line(view))
    return EX_OK


def cmd_watch(args: argparse.Namespace) -> int:
    from watcher.cli_settlements import wait_for_verdict, watch_source

    if args.kind != "evm_tx":
        return watch_source(args)
    if args.ref or args.source:
        raise CliError("watch: --ref and --source go with --kind (a payment, job or task)")
    if args.tx_hash is None:
        raise CliError("watch: give the tx hash (or --kind and --ref for a payment or job)")
    tx = _check_hash(args.tx_hash)
    api = Api(_api_url(args))
    chain = api.default_chain(args.chain)
    body: dict[str, Any] = {"chain": chain, "tx_hash": tx}
    if args.confirmations:
        body["confirmations"] = args.confirmations
    if args.timeout:
        body["timeout_s"] = args.timeout
    return wait_for_verdict(api, api.request("POST", "/v1/settlements", json=body), args)


def cmd_chains(args: argparse.Namespace) -> int:
    chains = Api(_api_url(args)).request("GET", "/v1/chains")
    lines = [
        f"{c['name']:<12} id {c['chain_id']:<10} head {c['head_number']}  N={c['confirmations']} "
        f"({c['finality']})  {'healthy' if c['healthy'] else 'UNHEALTHY: ' + str(c['last_error'])}"
        for c in chains
    ]
    _print(args, chains, "\n".join(lines))
    return EX_OK


def cmd_reorgs(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"limit": args.limit}
    if args.chain:
        params["chain"] = args.chain
    reorgs = Api(_api_url(args)).request("GET", "/v1/reorgs", params=params)
    lines = [
        f"#{r['id']} {r['chain']}: depth {r['depth']} at ancestor {r['common_ancestor']['number']} "
        f"({_short(r['common_ancestor']['hash'])}), touched {len(r['touched'])}"
        + ("  FINALITY VIOLATION" if r["finality_violation"] else "")
        for r in reorgs
    ]
    _print(args, reorgs, "\n".join(lines) or "no reorgs seen")
    return EX_OK


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": cmd_run,
    "status": cmd_status,
    "watch": cmd_watch,
    "chains": cmd_chains,
    "reorgs": cmd_reorgs,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``finality`` command."""
    try:
        args = _build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except CliError as exc:
        print(f"finality: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    # Under `python -m watcher.cli` this file runs as __main__, a second copy of the module:
    # command modules import watcher.cli, and the CliError they raise must be the class
    # that main() catches, so run main() of the imported module.
    from watcher.cli import main as _main

    sys.exit(_main())
