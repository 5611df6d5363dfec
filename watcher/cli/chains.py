"""``finality chains`` and ``finality reorgs``: the daemon's chains and the reorgs it saw."""

from __future__ import annotations

import argparse
from typing import Any

from watcher.cli.common import EX_OK, Commands, Query, api_of, positive_int, short, show


def cmd_chains(args: argparse.Namespace) -> int:
    """``finality chains``."""
    chains = api_of(args).request("GET", "/v1/chains")
    lines = [
        f"{c['name']:<12} id {c['chain_id']:<10} head {c['head_number']}  N={c['confirmations']} "
        f"({c['finality']})  {'healthy' if c['healthy'] else 'UNHEALTHY: ' + str(c['last_error'])}"
        for c in chains
    ]
    show(args, chains, "\n".join(lines))
    return EX_OK


def cmd_reorgs(args: argparse.Namespace) -> int:
    """``finality reorgs [--chain C] [--limit N]``."""
    params: dict[str, Any] = {"limit": args.limit}
    if args.chain:
        params["chain"] = args.chain
    reorgs = api_of(args).request("GET", "/v1/reorgs", params=params)
    lines = [
        f"#{r['id']} {r['chain']}: depth {r['depth']} at ancestor {r['common_ancestor']['number']} "
        f"({short(r['common_ancestor']['hash'])}), touched {len(r['touched'])}"
        + ("  FINALITY VIOLATION" if r["finality_violation"] else "")
        for r in reorgs
    ]
    show(args, reorgs, "\n".join(lines) or "no reorgs seen")
    return EX_OK


def add_commands(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    commands: Commands,
    query: Query,
) -> None:
    """Register ``chains`` and ``reorgs`` (query(name, help) adds --api/--config/--json)."""
    query("chains", "configured chains and their heads")
    commands["chains"] = cmd_chains
    reorgs = query("reorgs", "reorgs seen, newest first")
    reorgs.add_argument("--chain")
    reorgs.add_argument("--limit", type=positive_int, default=20)
    commands["reorgs"] = cmd_reorgs
