"""The live ``/openapi.json`` of a real daemon process checked against its own answers
(schemathesis): every route, generated valid and invalid requests, bounded.

Each operation is exercised with generated valid requests and generated invalid ones (a
bounded number of each). The checks are named, not left to schemathesis' defaults:
:data:`CHECKS` on every answer (no 5xx, documented status codes, content types and response
schemas), "a schema-valid request is accepted" on the valid ones (except :data:`SEMANTIC`),
"an invalid request is refused with a 4xx" on the invalid ones. Failures are gathered per
operation and mode and reported together, so one run names every route that disagrees with
its document.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import CheckFunction, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.anvil import Anvil
from tests.support.daemon import Daemon

pytestmark = pytest.mark.anvil

IDLE_POLL_S = 3600.0
"""The daemons' poll interval here: an hour, so only the start-up poll runs. The subject is
what the API answers, not the following of a chain; polling anvil every 0.2 s through the
minutes the generated requests take cost the daemon more CPU than serving them."""

SEMANTIC = {
    "POST /v1/settlements",
    "POST /v1/subscriptions",
    "POST /v1/subscriptions/{subscription_id}/addresses",
    "POST /v1/invoices",
    "POST /v1/workflows",
    "POST /v1/workflows/{workflow_id}/steps/{step}/begin",
    "POST /v1/workflows/{workflow_id}/steps/{step}/complete",
}
"""Operations whose valid bodies a schema cannot fully say (``raw_tx`` must be the signed tx
of ``tx_hash``, ``sender`` and ``nonce`` go together, ``dependent_state`` and a step's
``side_effects`` have no floats, ``confirmations`` stays below the chain's header window; a
mixed-case address must carry its EIP-55 checksum, an amount stays below 2**256, the chain is
a configured one; a workflow's ``idempotent_steps`` name its steps, a step's ``recovery``
holds exactly one of its keys and its settlement is the caller's): schemathesis'
"schema-valid request accepted" check is off for them; every other check, and the 4xx shape,
still runs."""

MAX_EXAMPLES = 8
"""Requests per operation and mode: the whole run stays under 60 s on a busy 2-core machine."""

CHECKS: list[CheckFunction] = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
"""What every answer must satisfy, valid request or not."""


@pytest.fixture(scope="module")
def daemon(module_anvil: Anvil, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """One daemon (default settings but :data:`IDLE_POLL_S`) for both modes."""
    daemon = Daemon(tmp_path_factory.mktemp("st"), module_anvil.url, poll_interval_s=IDLE_POLL_S)
    yield daemon
    daemon.close()


@pytest.mark.parametrize("mode", list(GenerationMode), ids=lambda m: str(m.value))
def test_every_route_answers_as_its_openapi_document_says(
    daemon: Daemon, mode: GenerationMode
) -> None:
    base = daemon.url
    schema = schemathesis.openapi.from_url(f"{base}/openapi.json")
    failures = [
        _failure(result.ok(), base, mode=mode)  # type: ignore[union-attr]
        for result in schema.get_all_operations()
    ]
    assert not any(failures), "\n\n".join(f for f in failures if f)


def checks_for(label: str, mode: GenerationMode) -> list[CheckFunction]:
    """The checks of one operation in one mode: :data:`CHECKS`, and that valid requests are
    accepted (not for :data:`SEMANTIC`) or invalid ones refused with a 4xx."""
    if mode is GenerationMode.NEGATIVE:
        return [*CHECKS, negative_data_rejection]
    return CHECKS if label in SEMANTIC else [*CHECKS, positive_data_acceptance]


def _failure(
    operation: Any,
    base: str,
    headers: dict[str, str] | None = None,
    examples: int = MAX_EXAMPLES,
    mode: GenerationMode = GenerationMode.POSITIVE,
) -> str | None:
    """What schemathesis found wrong with ``operation`` (None: nothing); ``headers`` go on
    every request (a token: schemathesis then also checks that leaving it off is refused)."""
    checks = checks_for(operation.label, mode)
    # Named checks replace the defaults; with a token the default auth check stays on.
    extra = [] if headers is None else [ignored_auth]

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def check(case: schemathesis.Case[Any]) -> None:
        case.call_and_validate(base_url=base, timeout=10, headers=headers, checks=[*checks, *extra])

    try:
        check()
    except KeyboardInterrupt:
        raise
    except Unsatisfiable:  # no invalid request exists (no parameters, a free string)
        return None
    except BaseException as exc:  # a FailureGroup: gathered, reported together
        return f"{operation.label} ({mode.value}): {exc}"
    return None
