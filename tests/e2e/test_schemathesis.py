"""The live ``/openapi.json`` of a real daemon process checked against its own answers
(schemathesis): every route, generated valid and invalid requests, bounded.

Each operation is exercised with a few dozen generated requests; the checks are
schemathesis' defaults (no 5xx, documented status codes, content types and response
schemas, invalid input refused with a 4xx). Failures are gathered per operation and reported
together, so one run names every route that disagrees with its document.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import CheckFunction
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.support.daemon import Daemon

pytestmark = pytest.mark.anvil

SEMANTIC = {"POST /v1/settlements"}
"""Operations whose valid bodies a schema cannot fully say (``raw_tx`` must be the signed tx
of ``tx_hash``, ``sender`` and ``nonce`` go together, ``dependent_state`` has no floats,
``confirmations`` stays below the chain's header window): schemathesis' "schema-valid
request accepted" check is off for them; every other check, and the 4xx shape, still runs."""

MAX_EXAMPLES = 12
"""Requests per operation: the whole run stays well under 30 s on a busy 2-core machine."""


def test_every_route_answers_as_its_openapi_document_says(module_daemon: Daemon) -> None:
    base = module_daemon.url
    schema = schemathesis.openapi.from_url(f"{base}/openapi.json")
    failures = [_failure(result.ok(), base) for result in schema.get_all_operations()]  # type: ignore[union-attr]
    assert not any(failures), "\n\n".join(f for f in failures if f)


def _failure(
    operation: Any, base: str, headers: dict[str, str] | None = None, examples: int = MAX_EXAMPLES
) -> str | None:
    """What schemathesis found wrong with ``operation`` (None: nothing); ``headers`` go on
    every request (a token: schemathesis then also checks that leaving it off is refused)."""
    excluded: list[CheckFunction] = (
        [positive_data_acceptance] if operation.label in SEMANTIC else []
    )

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy())
    def check(case: schemathesis.Case[Any]) -> None:
        case.call_and_validate(base_url=base, timeout=10, headers=headers, excluded_checks=excluded)

    try:
        check()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a FailureGroup: gathered, reported together
        return f"{operation.label}: {exc}"
    return None
