"""OpenTelemetry spans, when the ``[otel]`` extra is installed and the application (or
``opentelemetry-instrument``) has set a tracer provider; otherwise nothing at all.

Spans: ``finality.poll`` (one per chain poll), ``finality.block_commit`` (one per block
committed), ``finality.receipt_build`` (one per receipt built and signed),
``finality.delivery`` (one per delivery attempt) and ``finality.api_request`` (one per HTTP
request). Attributes name the chain, block, settlement and delivery; never a URL, a body, a
header or a key (a commit URL may carry a token; a body holds the caller's state).

Zero cost when absent: without the package :func:`span` hands back one shared no-op context
and the API installs no middleware; with the package but no provider configured, the API
still installs none (:func:`enabled` is asked once, when the app is built).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

try:
    from opentelemetry import trace
except ImportError:  # the [otel] extra is not installed
    trace = None  # type: ignore[assignment]

Attributes = Mapping[str, str | int]
"""Span attributes: ids and numbers only (see the module doc)."""

_OFF: AbstractContextManager[Any] = nullcontext()
_TRACER = None if trace is None else trace.get_tracer("finality-watcher")
"""A proxy until a provider is set, then the provider's tracer (set later is fine)."""


def span(name: str, attributes: Attributes) -> AbstractContextManager[Any]:
    """A span named ``name`` around a ``with`` block (a shared no-op without the extra)."""
    if _TRACER is None:
        return _OFF
    return _TRACER.start_as_current_span(name, attributes=attributes)


def enabled() -> bool:
    """Whether spans go anywhere: the package is installed and a real provider is set."""
    if trace is None:
        return False
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)
