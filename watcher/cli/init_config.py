"""``finality init``: write a commented starting config, never over an existing file.

The wheel ships no config, and ``finality run`` needs one: ``init`` writes it for the local
dev chain (anvil on 127.0.0.1:8545, a generated dev signing key) or for a chain of the
registry (its RPC URL read from an environment variable, the signing key from the
environment or a keystore, the registry's defaults shown as comments), with API tokens when
the API listens beyond loopback. Secrets are never written: every one is a ``${NAME}``
reference the daemon expands at start.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from chains.registry import KNOWN_CHAINS, KnownChain
from watcher.cli.common import EX_OK, EX_USAGE, CliError, Commands, Query
from watcher.config.api import is_loopback, split_listen

DEFAULT_OUTPUT = "finality.toml"
DEFAULT_LISTEN = "127.0.0.1:8710"
LOCAL_RPC = "http://127.0.0.1:8545"


def rpc_variable(chain: str) -> str:
    """The environment variable a registry chain's RPC URL is read from (``ETHEREUM_RPC_URL``)."""
    return re.sub(r"[^A-Z0-9]", "_", chain.upper()) + "_RPC_URL"


def _header(chain: str, output: str, rpc: str | None) -> str:
    start = f"finality run --config {output}"
    if chain == "local":
        how = f"#   anvil --host 127.0.0.1 --port 8545   # the node\n#   {start}"
    else:
        how = f"#   export {rpc_variable(chain)}=https://...   # your node or provider\n#   {start}"
        if rpc is not None:
            how = f"#   {start}"
    return (
        f"# Finality Watcher on the {chain!r} chain, written by `finality init`.\n#\n{how}\n#\n"
        "# Unknown keys are errors; any string may use ${NAME} to read the environment variable\n"
        "# NAME (secrets belong there, not here). Every key: config/local.toml in the sources.\n"
    )


def _store_and_api(listen: str) -> str:
    host, _ = split_listen(listen)
    text = (
        "\n[store]\n"
        '# An SQLAlchemy URL: a file relative to where the daemon runs, or "postgresql://user@host/db"\n'
        "# (with the [postgres] extra) when several instances share one store.\n"
        'url = "sqlite:///finality.db"\n'
        "\n[api]\n"
        "# HOST:PORT of the HTTP API; the CLI's query commands talk to it.\n"
        f'listen = "{listen}"\n'
    )
    tokens = (
        "[[api.tokens]]\n"
        'name = "backend"                       # the caller; its settlements belong to it\n'
        'token = "${FINALITY_BACKEND_TOKEN}"    # or sha256 = "<hex of the token>"\n'
        'scopes = ["read", "register"]          # and "admin": replay, handoffs, leases\n'
    )
    if is_loopback(host):
        commented = "".join(f"# {line}\n" for line in tokens.splitlines())
        return text + "# Callers (docs/api.md); needed to listen beyond loopback:\n" + commented
    return text + "# Beyond loopback every caller needs a token (docs/api.md):\n" + tokens


def _signing(chain: str) -> str:
    if chain == "local":
        return (
            "\n[signing]\n"
            "# Receipts are signed with an Ethereum key. On a local dev chain, without one, a dev\n"
            "# key is generated into this file (never use it elsewhere):\n"
            'dev_key_file = ".finality-dev-key"\n'
        )
    return (
        "\n[signing]\n"
        "# Receipts are signed with an Ethereum key: a 0x hex private key in this variable,\n"
        'key_env = "FINALITY_SIGNING_KEY"\n'
        "# or an encrypted JSON keystore, its password in keystore_password_env:\n"
        '# keystore = "/etc/finality/signer.json"\n'
        '# keystore_password_env = "FINALITY_KEYSTORE_PASSWORD"\n'
    )


def _delivery() -> str:
    return (
        "\n[delivery]\n"
        "# Signs commits, discards and alerts the Standard Webhooks way (docs/delivery.md):\n"
        '# a "whsec_<base64>" secret, e.g. whsec_$(head -c 32 /dev/urandom | base64).\n'
        '# secret = "${FINALITY_WEBHOOK_SECRET}"\n'
    )


def _chain(known: KnownChain, rpc: str) -> str:
    if known.name == "local":
        rule = (
            "confirmations = 3\n"
            '# "depth", "finalized", "depth_or_finalized", "safe", "depth_and_finalized":\n'
            "# docs/finality.md.\n"
            'finality = "depth"\n'
            "poll_interval_s = 1.0\n"
        )
    else:
        rule = (
            "# The registry's defaults for this chain, used while these stay commented:\n"
            f"# confirmations = {known.default_confirmations}\n"
            f'# finality = "{known.default_finality}"     # docs/finality.md\n'
            f"# poll_interval_s = {known.block_time_s}\n"
        )
    return (
        "\n[[chains]]\n"
        "# The name the API and the CLI use (--chain NAME).\n"
        f'name = "{known.name}"\n'
        "# EIP-155 chain id: every endpoint's eth_chainId must answer it.\n"
        f"chain_id = {known.chain_id}\n"
        "# JSON-RPC endpoints (http, https, ws or wss), in order of preference.\n"
        f'rpc = ["{rpc}"]\n' + rule
    )


def config_text(
    chain: str, output: str, rpc: str | None = None, listen: str = DEFAULT_LISTEN
) -> str:
    """The commented config for ``chain`` (``local`` or a registry name). ValueError names a
    bad ``chain`` or ``listen``."""
    known = KNOWN_CHAINS.get(chain)
    if known is None:
        raise ValueError(
            f"--chain: unknown chain {chain!r} (known: {', '.join(sorted(KNOWN_CHAINS))})"
        )
    try:
        split_listen(listen)
    except ValueError as exc:
        raise ValueError(f"--listen: {exc}") from None
    url = rpc or (LOCAL_RPC if chain == "local" else "${" + rpc_variable(chain) + "}")
    parts = [_header(chain, output, rpc), _store_and_api(listen), _signing(chain), _delivery()]
    return "".join([*parts, _chain(known, url)])


def cmd_init(args: argparse.Namespace) -> int:
    """``finality init [--chain NAME] [--output FILE] [--rpc URL] [--listen HOST:PORT]``."""
    try:
        text = config_text(args.chain, args.output, args.rpc, args.listen)
    except ValueError as exc:
        raise CliError(f"init: {exc}", EX_USAGE) from None
    path = Path(args.output)
    try:
        with path.open("x", encoding="utf-8") as out:  # "x": never over an existing file
            out.write(text)
    except FileExistsError:
        raise CliError(
            f"init: {path} exists; not overwritten (choose another --output)", EX_USAGE
        ) from None
    except OSError as exc:
        raise CliError(f"init: cannot write {path}: {exc.strerror}", EX_USAGE) from None
    print(f"wrote {path}; start the daemon: finality run --config {path}")
    return EX_OK


def add_commands(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    commands: Commands,
    query: Query,
) -> None:
    """Register ``init``."""
    init = sub.add_parser("init", help="write a commented starting config (never overwrites)")
    init.add_argument("--chain", default="local", help="local (anvil) or a known chain's name")
    init.add_argument(
        "--output", default=DEFAULT_OUTPUT, help=f"file to write (default {DEFAULT_OUTPUT})"
    )
    init.add_argument("--rpc", help="the chain's RPC URL (default: anvil's, or ${NAME_RPC_URL})")
    init.add_argument(
        "--listen", default=DEFAULT_LISTEN, help=f"the API's HOST:PORT (default {DEFAULT_LISTEN})"
    )
    commands["init"] = cmd_init
