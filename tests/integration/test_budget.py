"""RPC call budget and per-endpoint rate limits, counted at the wire by the fault proxy.

Real anvil, real proxies in front of it; the engine and service are the ones the daemon
runs. Budgets are per minute in the config, so the in-process tests drive the budget's
monotonic clock (the seam the service exposes) instead of waiting a minute; the daemon
test runs the real clock for a few seconds.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from chains import pool
from chains.budget import CallBudget
from chains.multi import MultiRpcClient
from guard.settlement import Verdict
from tests.integration.helpers import wait_included
from tests.integration.quorum_helpers import service_over
from tests.support.anvil import Anvil
from tests.support.daemon import Daemon, wait_for
from tests.support.faulty_proxy import FaultyProxy
from tests.support.rigs import FakeClock, build_watcher, chain_config, register_tx
from watcher.app.daemon import App as Service
from watcher.store import Store


class Monotonic:
    """The budget's clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_engine_skips_polls_past_the_budget_and_confirms_when_it_allows(
    anvil: Anvil, tmp_path: Path
) -> None:
    proxy = FaultyProxy(anvil.url)
    mono = Monotonic()
    budget = CallBudget(12, clock=mono)
    config = chain_config(anvil, confirmations=3, rpc=[proxy.url], calls_per_minute=12)
    store = Store.open(f"sqlite:///{tmp_path}/b.db")
    clock = FakeClock()
    client = pool.client_for(config.rpc, budget=budget)
    watcher = build_watcher(config, store, client, clock, budget=budget)
    try:
        watcher.poll()
        tx = anvil.send()
        wait_included(anvil, tx)
        rec = register_tx(store, config, tx, now=clock())
        skipped: list[str] = []
        for _ in range(40):  # far more polls than 12 calls can pay for
            anvil.mine(1)
            stats = watcher.poll()
            if stats.skipped:
                skipped.append(stats.skipped)
        assert proxy.total() == budget.spent_total <= 12
        assert budget.skipped_polls == len(skipped) > 0
        assert "RPC budget: " in skipped[-1] and "of 12 calls used this minute" in skipped[-1]
        assert watcher.deferred is not None
        head_when_paused = watcher.head
        assert head_when_paused is not None and head_when_paused.number < anvil.head()
        # A long gap: 60 blocks behind. The catch-up is paced by the budget too.
        anvil.mine(60)
        windows = 0
        while store.settlement(rec.settlement_id).verdict != Verdict.FINALITY_CONFIRMED:
            mono.now += 60.0
            windows += 1
            before = proxy.total()
            for _ in range(30):
                watcher.poll()
            assert proxy.total() - before <= 12, "one window's calls went over the budget"
            assert windows < 10
        head = watcher.head
        assert head is not None
        while head.number < anvil.head():
            mono.now += 60.0
            windows += 1
            before = proxy.total()
            for _ in range(30):
                watcher.poll()
            assert proxy.total() - before <= 12
            head = watcher.head
            assert head is not None and windows < 40
        assert (
            store.settlement(rec.settlement_id).block_hash
            == anvil.block(wait_included(anvil, tx))["hash"]
        )
        assert proxy.total() == budget.spent_total
    finally:
        store.close()
        proxy.close()


def test_service_plans_polls_and_catch_up_within_the_budget(anvil: Anvil, tmp_path: Path) -> None:
    proxies = [FaultyProxy(anvil.url) for _ in range(3)]
    mono = Monotonic()
    service = service_over(
        tmp_path,
        [p.url for p in proxies],
        mono,
        confirmations=2,
        poll_interval_s=0.1,
        calls_per_minute=20,
        quorum=2,
        rpc_timeout_s=2.0,
    )
    try:
        assert service.poll_interval_s("local") == 3.0  # 20 calls/min, not 600 polls/min
        service.start_chain("local")
        for _ in range(5):
            service.poll_chain("local")
        tx = anvil.send()
        wait_included(anvil, tx)
        rec = register_tx(service.store, service.chain_config("local"), tx, now=service.clock())
        anvil.mine(150)  # a gap to catch up on, more than a window's budget can fetch
        for _ in range(20):
            service.poll_chain("local")
        wire = sum(p.total() for p in proxies)
        assert wire == service.budgets["local"].spent_total <= 20
        status = service.budget_status("local")
        assert status is not None
        assert status["skipped_polls"] and int(str(status["skipped_polls"])) > 0
        assert re.match(r"RPC budget: \d+ of 20 calls used this minute", str(status["waiting"]))
        assert service.healthy("local")  # waiting on our own budget is not a sick node
        metrics = _metrics(service)
        assert 'finality_rpc_budget_calls_per_minute{chain="local"} 20.0' in metrics
        assert f'finality_rpc_budget_spent_total{{chain="local"}} {float(wire)}' in metrics
        assert re.search(r'finality_rpc_budget_skipped_polls_total\{chain="local"\} [1-9]', metrics)
        # Minute by minute the watcher gets there, never over budget in any window.
        for _ in range(30):
            if service.store.settlement(rec.settlement_id).verdict == Verdict.FINALITY_CONFIRMED:
                break
            mono.now += 60.0
            before = sum(p.total() for p in proxies)
            for _ in range(10):
                service.poll_chain("local")
            assert sum(p.total() for p in proxies) - before <= 20
        assert service.store.settlement(rec.settlement_id).verdict == Verdict.FINALITY_CONFIRMED
    finally:
        service.store.close()
        for p in proxies:
            p.close()


def _metrics(service: Service) -> str:
    from prometheus_client import generate_latest
    from prometheus_client.registry import CollectorRegistry

    from watcher.api.deps import deps_of
    from watcher.api.metrics.collector import ServiceCollector

    registry = CollectorRegistry()
    registry.register(ServiceCollector(deps_of(service)))
    return generate_latest(registry).decode()


def test_daemon_stays_within_its_budget_and_still_confirms(anvil: Anvil, tmp_path: Path) -> None:
    proxy = FaultyProxy(anvil.url)
    daemon = Daemon(tmp_path, proxy.url, start=False, poll_interval_s=0.1, calls_per_minute=30)
    try:
        started = time.monotonic()
        daemon.start()
        tx = anvil.send()
        view = daemon.register(tx)
        for _ in range(3):
            anvil.mine(1)
            time.sleep(0.3)
        done = wait_for(
            lambda: (
                (v := daemon.get(f"/v1/settlements/{view['settlement_id']}").json())["verdict"]
                == "FINALITY_CONFIRMED"
                and v
            ),
            timeout=15.0,
            what="finality within the budget",
        )
        assert done["block_number"] == wait_included(anvil, tx)
        elapsed = time.monotonic() - started
        assert elapsed < 60
        # Every call the daemon sent in its first minute, counted at the wire.
        assert proxy.total() <= 30
        assert "budget 30 calls/min < 600 polls/min: polling every 2.0 s" in daemon.log_tail(200)
        chains = daemon.get("/v1/chains").json()
        assert chains[0]["budget"]["limit"] == 30
        assert chains[0]["budget"]["poll_interval_s"] == 2.0
        metrics = daemon.get("/metrics").text
        assert 'finality_rpc_budget_calls_per_minute{chain="local"} 30.0' in metrics
    finally:
        daemon.close()
        proxy.close()


def test_endpoint_at_its_rate_limit_is_passed_over(anvil: Anvil) -> None:
    proxies = [FaultyProxy(anvil.url) for _ in range(3)]
    client = pool.client_for(
        [p.url for p in proxies],
        chain_id=31337,
        weights=[3, 1, 1],  # the limited endpoint is the preferred one
        rate_limits=[2.0, 1000.0, 1000.0],
    )
    assert isinstance(client, MultiRpcClient)
    try:
        start = time.monotonic()
        for _ in range(60):
            client.transport.active = 0  # keep preferring it: only its limit may move calls
            client.header("latest")
            time.sleep(0.03)
        end = time.monotonic()
        limited = proxies[0].calls_between(start, end)
        others = proxies[1].total() + proxies[2].total()
        assert limited <= 2.0 * (end - start) + 2 + 1  # rate x time + the one-second burst
        assert others >= 60 - limited
        assert client.health_report()[0]["rate_limit"] == 2.0
    finally:
        for p in proxies:
            p.close()


def test_every_endpoint_at_its_limit_waits_instead_of_failing(anvil: Anvil) -> None:
    proxies = [FaultyProxy(anvil.url) for _ in range(2)]
    client = pool.client_for([p.url for p in proxies], chain_id=31337, rate_limits=[4.0, 4.0])
    try:
        start = time.monotonic()
        for _ in range(20):
            client.header("latest")  # never raises: waits for the earliest slot
        elapsed = time.monotonic() - start
        calls = sum(p.total() for p in proxies)
        # 8 of burst, then 8 calls/s between both endpoints.
        assert elapsed >= (calls - 8) / 8.0 - 0.2
    finally:
        for p in proxies:
            p.close()


def test_single_endpoint_honours_its_rate_limit(anvil: Anvil) -> None:
    proxy = FaultyProxy(anvil.url)
    client = pool.client_for([proxy.url], rate_limits=[5.0])
    try:
        start = time.monotonic()
        for _ in range(15):
            client.call("eth_blockNumber")
        elapsed = time.monotonic() - start
        assert proxy.total() == 15
        assert elapsed >= (15 - 5) / 5.0 - 0.1  # a burst of 5, then 5 calls/s
    finally:
        proxy.close()
