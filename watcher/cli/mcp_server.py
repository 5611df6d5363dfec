"""``finality mcp``: serve the daemon's settlements to an AI agent as MCP tools.

stdio by default (an agent host starts it as a subprocess); ``--http HOST:PORT`` serves the
streamable HTTP transport at ``http://HOST:PORT/mcp`` instead. The tools talk to the daemon
at ``--api`` (docs/mcp.md), as the caller its token names (``--token``, ``--token-file`` or their variables; the
token is sent to the daemon only, never shown to the agent). Needs the ``mcp`` extra:
``pip install 'finality-watcher[mcp]'``.
"""

from __future__ import annotations

import argparse

from watcher import logs
from watcher.cli.common import (
    EX_OK,
    EX_UNAVAILABLE,
    EX_USAGE,
    CliError,
    Commands,
    Query,
    api_token,
    api_url,
)
from watcher.config.api import is_loopback

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise CliError(f"--http: {text!r} is not HOST:PORT", EX_USAGE)
    return host.strip("[]"), int(port)


def cmd_mcp(args: argparse.Namespace) -> int:
    """Run the MCP server until its transport closes (stdio) or it is stopped (HTTP)."""
    url = api_url(args)
    http = _host_port(args.http) if args.http else None
    token = api_token(args)
    if http is not None and token and not is_loopback(http[0]):
        raise CliError(
            f"--http: {http[0]} is beyond loopback: this server has no authentication of its "
            "own and would lend its token to anyone who reaches it; serve it on loopback",
            EX_USAGE,
        )
    # stderr is the agent host's log: warnings only unless asked (``--log-level info``); a
    # line per tool call's HTTP request would bury what matters.
    logs.configure(args.log_level.upper())
    try:
        from watcher.mcp.mcp_tools import build_server
    except ImportError as exc:
        raise CliError(
            f"mcp: the MCP SDK is not installed ({exc.name}): pip install 'finality-watcher[mcp]'",
            EX_UNAVAILABLE,
        ) from None
    server = build_server(url, token, log_level=args.log_level.upper())
    if http is None:
        server.run("stdio")
    else:
        server.run("streamable-http", host=http[0], port=http[1])
    return EX_OK


def add_commands(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    commands: Commands,
    query: Query,
) -> None:
    """Register ``mcp``."""
    p = query("mcp", "serve the daemon to an AI agent as MCP tools (stdio, or --http)")
    p.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP at /mcp instead")
    p.add_argument(
        "--log-level",
        default="WARNING",
        type=str.upper,
        choices=LOG_LEVELS,
        help="what goes to stderr (default WARNING; DEBUG adds every HTTP request)",
    )
    commands["mcp"] = cmd_mcp
