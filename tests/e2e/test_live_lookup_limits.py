"""One caller cannot hurt the others through live look-ups (a real daemon, a real anvil): a
read-only caller flooding random hashes gets 429s with ``Retry-After`` once past its own
limit, never spends the chain's ``calls_per_minute``, and a registered tx still gets its
verdict promptly, never a false timeout."""

from __future__ import annotations

import secrets
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.helpers import unknown_hash
from tests.support.anvil import Anvil
from tests.support.daemon import CHAIN, Daemon, wait_for

pytestmark = pytest.mark.anvil

READER = "fw-reader-" + secrets.token_hex(16)
BACKEND = "fw-backend-" + secrets.token_hex(16)
PER_CALLER = 40

API_KEYS = f"""live_lookups_per_caller_per_minute = {PER_CALLER}

[[api.tokens]]
name = "reader"
token = "{READER}"
scopes = ["read"]

[[api.tokens]]
name = "backend"
token = "{BACKEND}"
scopes = ["read", "register"]
"""


@pytest.fixture(scope="module")
def daemon(module_anvil: Anvil, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(
        tmp_path_factory.mktemp("live"),
        module_anvil.url,
        start=False,
        calls_per_minute=300,
        poll_interval_s=0.5,
    )
    config = d.config_path.read_text()
    head, sep, rest = config.partition("\n[[chains]]")
    d.config_path.write_text(head.rstrip("\n") + "\n" + API_KEYS + "\n" + sep + rest)
    d.http.headers["Authorization"] = f"Bearer {BACKEND}"
    d.start()
    yield d
    d.close()


class Flood:
    """Threads of a read-only caller asking for random hashes until stopped."""

    def __init__(self, url: str, threads: int = 4) -> None:
        self.statuses: Counter[int] = Counter()
        self.retry_after: list[str] = []
        self.refusals: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._run, args=(url, i), daemon=True) for i in range(threads)
        ]

    def _run(self, url: str, i: int) -> None:
        headers = {"Authorization": f"Bearer {READER}"}
        with httpx.Client(base_url=url, headers=headers, timeout=10) as client:
            n = 0
            while not self._stop.is_set():
                n += 1
                answer = client.get(f"/v1/chains/{CHAIN}/txs/{unknown_hash(100_000 * i + n)}")
                with self._lock:
                    self.statuses[answer.status_code] += 1
                    if answer.status_code == 429:
                        self.retry_after.append(answer.headers.get("retry-after", ""))
                        self.refusals.append(answer.json())

    def total(self) -> int:
        with self._lock:
            return sum(self.statuses.values())

    def __enter__(self) -> Flood:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=15)


def test_a_flood_of_live_look_ups_neither_delays_nor_times_out_a_registered_tx(
    daemon: Daemon, module_anvil: Anvil
) -> None:
    with Flood(daemon.url) as flood:
        # More look-ups than the chain's whole budget could pay (300 calls, 3 a look-up).
        wait_for(lambda: flood.total() >= 150, 30, what="the flood under way")
        tx = module_anvil.send()
        sid = daemon.register(tx, timeout_s=20)["settlement_id"]
        module_anvil.mine(3)
        view = daemon.wait_verdict(sid, "FINALITY_CONFIRMED", timeout=15)
    assert view["verdict"] == "FINALITY_CONFIRMED"
    assert flood.statuses[200] <= PER_CALLER, flood.statuses  # its own limit, nothing more
    assert flood.statuses[429] > 0 and set(flood.statuses) <= {200, 429}, flood.statuses
    assert all(v.isdigit() and 1 <= int(v) <= 60 for v in flood.retry_after), flood.retry_after
    assert all(
        r["fields"] == [] and "live_lookups_per_caller_per_minute" in r["error"]
        for r in flood.refusals
    ), flood.refusals[:3]
    budget = daemon.chain_info()["budget"]
    assert budget["skipped_polls"] == 0, budget  # the engine's polls never waited
