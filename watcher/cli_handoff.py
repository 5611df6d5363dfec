"""Placeholder: CLI commands of the handoff between instances (issue 5)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, MutableMapping

Command = Callable[[argparse.Namespace], int]


def add_commands(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    commands: MutableMapping[str, Command],
    query: Callable[[str, str], argparse.ArgumentParser],
) -> None:
    """Register this module's subcommands (``query(name, help)`` adds --api/--config/--json)."""
