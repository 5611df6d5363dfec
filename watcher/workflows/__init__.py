"""Callers' multi-step work under the handoff guard (``/v1/workflows``; docs/workflows.md)."""
