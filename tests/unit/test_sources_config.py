"""``[[sources]]`` tables: valid ones parse, and every mistake names the table and the key."""

from __future__ import annotations

import pytest

from watcher.config.errors import ConfigError
from watcher.config.loading import parse_config

CHAIN = '[[chains]]\nname = "local"\nchain_id = 31337\nrpc = ["http://127.0.0.1:8545"]\n'


def sources(*tables: str) -> str:
    return CHAIN + "".join(f"\n[[sources]]\n{t}\n" for t in tables)


STRIPE = 'name = "stripe"\nkind = "stripe_payment_intent"\napi_key = "sk_test_x"'
RQ = 'name = "jobs"\nkind = "rq_job"\nredis_url = "redis://127.0.0.1:6379/0"'
CELERY = 'name = "tasks"\nkind = "celery_task"\nbackend_url = "redis://127.0.0.1:6379/1"'


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    return list(caught.value.problems)


def test_one_source_of_each_kind() -> None:
    config = parse_config(sources(STRIPE, RQ, CELERY))
    assert [(s.name, s.kind) for s in config.sources] == [
        ("stripe", "stripe_payment_intent"),
        ("jobs", "rq_job"),
        ("tasks", "celery_task"),
    ]
    assert config.sources[0].poll_interval_s == 2.0
    assert config.sources[1].heartbeat_limit_s == 120.0


def test_no_sources_is_the_default() -> None:
    assert parse_config(CHAIN).sources == []


def test_secrets_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FW_TEST_KEY", "sk_live_secret")
    config = parse_config(
        sources('name = "stripe"\nkind = "stripe_payment_intent"\napi_key = "${FW_TEST_KEY}"')
    )
    assert config.sources[0].api_key == "sk_live_secret"


@pytest.mark.parametrize(
    ("tables", "expected"),
    [
        ((RQ.replace('"jobs"', '"local"'),), "sources[0].name: 'local' is already a chain name"),
        ((RQ, RQ), "sources[1].name: duplicate source name 'jobs' (also sources[0].name)"),
        ((RQ.replace('"jobs"', '"Jobs!"'),), "sources[0].name: must be 1..64 lower-case"),
        (('name = "x"\nkind = "kafka"',), "sources[0].kind: unknown source kind 'kafka'"),
        (('name = "x"\nkind = "evm_tx"',), "sources[0].kind: evm_tx settlements are watched"),
        (
            (RQ + '\napi_key = "k"',),
            "sources[0].api_key: is a setting of kind stripe_payment_intent",
        ),
        (('name = "x"\nkind = "rq_job"',), "sources[0].redis_url: is required for kind rq_job"),
        (('name = "x"\nkind = "celery_task"',), "sources[0].backend_url: is required"),
        ((RQ.replace("redis://", "http://"),), "sources[0].redis_url: must be a redis://"),
        (
            ('name = "s"\nkind = "stripe_payment_intent"',),
            "sources[0].api_key: a stripe source needs api_key (polling), webhook_secret",
        ),
        ((STRIPE + '\napi_base = "ftp://x"',), "sources[0].api_base: must be an http://"),
        ((STRIPE + "\nfinality_window_s = 0",), "sources[0].finality_window_s: must be > 0"),
        (
            (STRIPE + "\nfinality_window_s = 604800",),
            "sources[0].finality_window_s: must be below timeout_s (3600.0)",
        ),
        (
            (STRIPE + "\ntimeout_s = 10\nmax_wait_s = 5",),
            "sources[0].timeout_s: must be <= max_wait_s",
        ),
        ((RQ + "\nredis_ur = 1",), "sources[0].redis_ur: unknown key (did you mean 'redis_url'?)"),
        ((RQ + '\noptions = { a = "b" }',), "sources[0].options: kind rq_job takes no options"),
    ],
)
def test_mistakes_are_reported_at_their_key(tables: tuple[str, ...], expected: str) -> None:
    found = problems(sources(*tables))
    assert any(p.startswith(expected) for p in found), found
