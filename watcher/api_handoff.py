"""Placeholder: HTTP routes of the handoff between instances (issue 5)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter

if TYPE_CHECKING:
    from watcher.service import Service


def router(service: Service) -> APIRouter:
    """This module's routes."""
    return APIRouter()
