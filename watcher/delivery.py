"""Placeholder: filled in by its own issue."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from watcher.components import Component
    from watcher.service import Service


def components(service: Service) -> list[Component]:
    """This module's daemon components."""
    return []
