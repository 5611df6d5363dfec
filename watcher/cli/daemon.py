"""``finality run``: the daemon (API + polling), from a config file.

The config is read before anything heavy is imported, so a broken config is reported at
once (exit 78), not after web3 and the rest have loaded.
"""

from __future__ import annotations

import argparse
import importlib.util
import os

from watcher.cli.common import DEFAULT_CONFIG, EX_CONFIG, EX_OK, CliError, Commands, Query

DAEMON_MODULES = (
    "web3",
    "eth_account",
    "sqlalchemy",
    "alembic",
    "apscheduler",
    "fastapi",
    "uvicorn",
)
"""Top-level modules of the ``[daemon]`` extra that ``finality run`` imports: the slim base
install (the client, the verifier, the CLI's client commands) has none of them."""


def missing_daemon_modules() -> list[str]:
    """The daemon's modules this environment lacks (found without importing them)."""
    return [name for name in DAEMON_MODULES if importlib.util.find_spec(name) is None]


def cmd_run(args: argparse.Namespace) -> int:
    """``finality run [--config FILE]``."""
    missing = missing_daemon_modules()
    if missing:
        # Before the config is read: a slim install says what to add, not a traceback.
        raise CliError(
            f"run needs the daemon extra (missing {', '.join(missing)}): "
            "pip install 'finality-watcher[daemon]'",
            EX_CONFIG,
        )
    from watcher import logs
    from watcher.config.errors import ConfigError
    from watcher.config.loading import load_config
    from watcher.config.secrets import configured_secrets

    logs.configure(args.log_level.upper())
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        raise CliError(str(exc), EX_CONFIG) from None
    logs.protect(configured_secrets(config))
    from chains.errors import ChainIdMismatch
    from watcher.api.server import create_app
    from watcher.app.build import build
    from watcher.app.listen import ApiPortBusy
    from watcher.receipts.signer import SigningKeyError
    from watcher.store import StoreError

    try:
        service = build(config)
    except (StoreError, SigningKeyError) as exc:
        raise CliError(str(exc), EX_CONFIG) from None
    try:
        service.run(create_app)
    except (ChainIdMismatch, ApiPortBusy) as exc:
        raise CliError(str(exc), EX_CONFIG) from None
    return EX_OK


def add_commands(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    commands: Commands,
    query: Query,
) -> None:
    """Register ``run``."""
    run = sub.add_parser("run", help="run the daemon (API + polling)")
    run.add_argument("--config", default=os.environ.get("FINALITY_CONFIG", DEFAULT_CONFIG))
    run.add_argument("--log-level", default="INFO")
    commands["run"] = cmd_run
