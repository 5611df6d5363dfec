"""``finality``: run the daemon, or ask a running one about settlements.

Exit codes: 0 ok (``watch``: final), 1 failed, 2 timed out, 64 bad input (one line on stderr
naming the problem), 69 daemon or node unreachable, 75 ``watch --wait-timeout`` stopped
waiting, 78 bad configuration, 141 the reader of the output went away (``| head``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from chains.redact import redact_text
from watcher import logs
from watcher.cli import (
    chains,
    completion,
    daemon,
    delivery,
    demo,
    deposits,
    handoff,
    init_config,
    listing,
    mcp_server,
    receipts,
    settlements,
    workflows,
)
from watcher.cli.common import DEFAULT_API, CliError, Commands, Parser

GROUPS = (
    daemon.add_commands,
    settlements.add_tx_commands,
    chains.add_commands,
    settlements.add_commands,
    listing.add_commands,
    deposits.add_commands,
    receipts.add_commands,
    delivery.add_commands,
    handoff.add_commands,
    workflows.add_commands,
    mcp_server.add_commands,
    demo.add_commands,
    init_config.add_commands,
    completion.add_commands,
)
"""Each command group registers its commands, in the order ``--help`` lists them."""


def build_parser(commands: Commands) -> argparse.ArgumentParser:
    """The parser of every command; fills ``commands`` (name → function)."""
    parser = Parser(prog="finality", description=__doc__.split("\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    def query(name: str, help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_)
        p.add_argument(
            "--api", help=f"daemon URL (default {DEFAULT_API}, or --config's api.listen)"
        )
        p.add_argument("--config", help="take the API address from this config file")
        p.add_argument(
            "--token",
            help="bearer token of an [[api.tokens]] caller (default $FINALITY_TOKEN; "
            "prefer the variable or --token-file: arguments show in ps)",
        )
        p.add_argument(
            "--token-file",
            help="read the bearer token from this file's first line (default $FINALITY_TOKEN_FILE)",
        )
        p.add_argument("--json", action="store_true", help="machine-readable output")
        return p

    for group in GROUPS:
        group(sub, commands, query)
    parser.set_defaults(root_parser=parser)  # what `finality completion` reads the commands from
    return parser


EX_READER_LEFT = 141
"""Exit code when the reader of stdout went away (``finality status --json | head``): what
a shell reports for a command ended by SIGPIPE (128 + 13)."""


def reader_left() -> int:
    """The reader of stdout closed the pipe: stop quietly. stdout is pointed at /dev/null
    so the interpreter's last flush at exit cannot fail again (and print a traceback)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EX_READER_LEFT


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``finality`` command."""
    commands: Commands = {}
    try:
        args = build_parser(commands).parse_args(argv)
        code = commands[args.command](args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at exit
        return code
    except BrokenPipeError:
        return reader_left()
    except CliError as exc:
        # Redacted: a start-up error may quote a configured URL (logs.protect knows them).
        print(f"finality: {redact_text(str(exc), logs.REDACTING.secrets)}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
