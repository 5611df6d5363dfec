"""What every ``finality`` command uses: exit codes, the one error type, where the daemon
is, a client of its HTTP API, and the output helpers.

Exit codes: 0 ok (``watch``: final), 1 failed, 2 timed out, 64 bad input (one line on stderr
naming the problem), 69 daemon or node unreachable, 75 ``watch --wait-timeout`` stopped
waiting (the settlement is still being watched), 78 bad configuration.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any, NoReturn

from guard.settlement import Verdict
from watcher.client.errors import ClientError, Unreachable
from watcher.client.sync_client import FinalityClient

EX_OK, EX_FAILED, EX_TIMEOUT = 0, 1, 2
EX_USAGE, EX_UNAVAILABLE, EX_STOPPED_WAITING, EX_CONFIG = 64, 69, 75, 78
DEFAULT_API = "http://127.0.0.1:8710"
DEFAULT_CONFIG = "config/local.toml"

Command = Callable[[argparse.Namespace], int]
"""A command: its parsed arguments in, its exit code out."""

Commands = MutableMapping[str, Command]
"""The command table each group adds its commands to."""

Query = Callable[[str, str], argparse.ArgumentParser]
"""Adds a query command (``--api``, ``--config``, ``--json``) by name and help."""


class CliError(Exception):
    """A one-line reason and the exit code that goes with it."""

    def __init__(self, message: str, code: int = EX_USAGE) -> None:
        super().__init__(message)
        self.code = code


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are :class:`CliError` (exit 64, one line)."""

    def error(self, message: str) -> NoReturn:
        raise CliError(f"{self.prog}: {message} (see `{self.prog} --help`)")


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


class Api:
    """The CLI's view of the daemon: :class:`watcher.client.FinalityClient`, its failures
    turned into :class:`CliError` (69 unreachable or 5xx, 64 for 4xx)."""

    def __init__(self, base: str, token: str | None = None) -> None:
        self.base = base.rstrip("/")
        self.client = FinalityClient(self.base, token=token)

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer of any route; :class:`CliError` if none."""
        with cli_errors(self.base):
            return self.client.request(method, path, **kwargs)

    def default_chain(self, given: str | None) -> str:
        """``given``, or the daemon's only chain; :class:`CliError` if it follows several."""
        if given:
            return given
        chains = [c["name"] for c in self.request("GET", "/v1/chains")]
        if len(chains) == 1:
            return str(chains[0])
        raise CliError(f"the daemon follows several chains ({', '.join(chains)}): give --chain")


@contextmanager
def cli_errors(base: str) -> Iterator[None]:
    """Turn a client failure inside the block into :class:`CliError` with its exit code."""
    try:
        yield
    except Unreachable as exc:
        hint = " (start it with `finality run`, or pass --api)" if exc.status is None else ""
        raise CliError(f"{exc}{hint}", EX_UNAVAILABLE) from None
    except ClientError as exc:
        raise CliError(str(exc), EX_USAGE) from None


def api_url(args: argparse.Namespace) -> str:
    """The daemon's URL: ``--api``, else ``--config``'s ``api.listen``, else
    ``$FINALITY_API``, else :data:`DEFAULT_API`."""
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


def api_token(args: argparse.Namespace) -> str | None:
    """The bearer token to send: ``--token``, else ``--token-file``'s first line, else
    ``$FINALITY_TOKEN``, else ``$FINALITY_TOKEN_FILE``'s, else none (a daemon without
    ``[[api.tokens]]``). A file keeps the token out of ``ps`` and the shell's history. Never
    printed: error lines carry the daemon's message, or the file's path."""
    token, path = getattr(args, "token", None), getattr(args, "token_file", None)
    if token and path:
        raise CliError("--token, --token-file: give one of them, not both")
    if not token and path:
        token = _token_in(path, "--token-file")
    token = token or os.environ.get("FINALITY_TOKEN")
    if not token and os.environ.get("FINALITY_TOKEN_FILE"):
        token = _token_in(os.environ["FINALITY_TOKEN_FILE"], "$FINALITY_TOKEN_FILE")
    return (token.strip() or None) if token else None


def _token_in(path: str, source: str) -> str:
    """The first line of the token file ``path``; :class:`CliError` naming ``source`` and
    the path (never a line of the file) if it cannot be read or holds no token."""
    try:
        with open(path, encoding="utf-8") as handle:
            line = handle.readline(4096).strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise CliError(f"{source}: cannot read {path!r}: {reason}") from None
    if not line:
        raise CliError(f"{source}: {path!r} holds no token on its first line")
    return line


def api_of(args: argparse.Namespace) -> Api:
    """A client of the daemon the arguments name, with their token."""
    return Api(api_url(args), api_token(args))


def check_hash(value: str) -> str:
    """A tx hash in canonical form; :class:`CliError` naming the problem if it is not one."""
    from guard.errors import InvalidHash
    from guard.hexes import parse_tx_hash

    try:
        return str(parse_tx_hash(value))
    except InvalidHash as exc:
        raise CliError(str(exc)) from None


def short(value: str | None) -> str:
    """A hash shortened for a line of text (``-`` for none)."""
    return "-" if value is None else f"{value[:6]}…{value[-4:]}"


def progress(view: dict[str, Any]) -> str:
    """Where a chain settlement stands, in words (under a rule on the ``finalized`` tag,
    what it waits for rather than a count of confirmations it does not wait for)."""
    if view["verdict"] == Verdict.NO_SETTLEMENT:
        return "the node does not know this transaction"
    if view["block_number"] is None:
        if view.get("replaced_by"):
            return f"replaced by {view['replaced_by']}"
        if view.get("finality_mode") not in (None, "depth"):
            return "waiting for inclusion in a block"
        return f"waiting for inclusion; 0/{view['required_confirmations']} confirmations"
    where = f"included in block {view['block_number']} ({short(view['block_hash'])})"
    if view.get("status") == 0:
        return f"{where}, reverted (receipt status 0)"
    waiting = view.get("waiting_for")
    if waiting and view.get("finality_mode") not in (None, "depth"):
        return f"{where}, depth {view['confirmations']}; waiting for {waiting}"
    return (
        f"{where}, {min(view['confirmations'], view['required_confirmations'])}"
        f"/{view['required_confirmations']} confirmations"
    )


def status_line(view: dict[str, Any]) -> str:
    """One line for a chain settlement: verdict, chain, tx (or payment) and progress."""
    if view.get("kind") == "evm_payment":
        paid = f"paid {view.get('paid')} of {view.get('amount')} {view.get('asset')}"
        return f"{view['verdict']}  {view['chain']} payment to {view.get('to')}: {paid}"
    return f"{view['verdict']}  {view['chain']} {view['tx_hash']}  {progress(view)}"


def show(args: argparse.Namespace, data: Any, human: str) -> None:
    """Print ``data`` as JSON under ``--json``, else the ``human`` text."""
    print(json.dumps(data, indent=2, sort_keys=True) if args.json else human)
