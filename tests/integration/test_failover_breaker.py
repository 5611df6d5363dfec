"""The circuit breaker and the endpoint config, without a node (pure bookkeeping)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from chains.health import EndpointHealth, redact
from watcher.config.chains import ChainConfig


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_breaker_opens_backs_off_doubling_and_closes_on_a_good_probe() -> None:
    clock = Clock()
    h = EndpointHealth("http://x", failure_threshold=3, base_backoff_s=1.0, clock=clock)
    h.failure("a")
    h.failure("b")
    assert h.state == "closed"
    h.failure("c")
    assert (h.state, h.usable) == ("open", False)
    clock.now += 1.0
    assert h.state == "half_open" and h.usable
    h.failure("probe failed")  # one failed probe re-opens, for twice as long
    assert h.state == "open"
    clock.now += 1.5
    assert h.state == "open"
    clock.now += 0.5
    assert h.state == "half_open"
    h.success(0.01)
    assert h.state == "closed" and h.consecutive_failures == 0
    assert h.error_rate == pytest.approx(4 / 5)


def test_backoff_is_capped() -> None:
    clock = Clock()
    h = EndpointHealth(
        "http://x", failure_threshold=1, base_backoff_s=1.0, max_backoff_s=4.0, clock=clock
    )
    for _ in range(10):
        h.failure("x")
        clock.now = h.open_until
    h.failure("x")
    assert h.open_until - clock.now == 4.0


def test_snapshot_reports_head_lag() -> None:
    h = EndpointHealth("http://x")
    h.saw_head(95)
    assert h.snapshot(100)["head_lag"] == 5


def test_redact_hides_keys() -> None:
    assert redact("https://user:pw@mainnet.example.io/v3/SECRET?k=1") == (
        "https://mainnet.example.io/…"
    )


def _chain(**kw: object) -> ChainConfig:
    values: dict[str, object] = {"name": "x", "chain_id": 31337, "confirmations": 2}
    values.update(kw)
    return ChainConfig.model_validate(values)


def test_quorum_may_not_exceed_the_endpoints() -> None:
    with pytest.raises(ValidationError, match="quorum"):
        _chain(rpc=["http://a", "http://b"], quorum=3)
    assert _chain(rpc=["http://a", "http://b"], quorum=2).quorum == 2


def test_one_weight_per_endpoint() -> None:
    with pytest.raises(ValidationError, match="rpc_weights"):
        _chain(rpc=["http://a", "http://b"], rpc_weights=[1.0])
    assert _chain(rpc=["http://a", "http://b"], rpc_weights=[2.0, 1.0]).rpc_weights == [2.0, 1.0]
