"""watcher.client against the real daemon and a real anvil: register, get, check, wait on
the event stream (not a poll loop), receipts, resumable events, offline verification."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.support.anvil import Anvil
from tests.support.daemon import CHAIN, Daemon, wait_for
from watcher.api.models.settlements import SettlementView
from watcher.client import AsyncFinalityClient, FinalityClient, Rejected, verify


def counting_client(daemon: Daemon, **kwargs: Any) -> tuple[FinalityClient, list[str]]:
    """A client whose every request (``METHOD path``) is recorded."""
    seen: list[str] = []

    def record(request: httpx.Request) -> None:
        seen.append(f"{request.method} {request.url.path}")

    http = httpx.Client(base_url=daemon.url, timeout=15.0, event_hooks={"request": [record]})
    return FinalityClient(daemon.url, http=http, **kwargs), seen


def mine_once(anvil: Anvil, blocks: int) -> Callable[[dict[str, Any]], None]:
    """A progress callback that mines ``blocks`` blocks the first time it is called (so the
    settlement only becomes final after the wait has subscribed)."""
    mined: list[int] = []

    def on_progress(view: dict[str, Any]) -> None:
        if not mined:
            mined.append(blocks)
            anvil.mine(blocks)

    return on_progress


def test_register_get_check_and_wait_follow_the_event_stream_to_finality(
    module_anvil: Anvil, module_daemon: Daemon
) -> None:
    client, seen = counting_client(module_daemon)
    tx = module_anvil.send()
    module_anvil.receipt(tx)
    view = client.register(CHAIN, tx, confirmations=3)
    assert view["verdict"] == "AWAITING_FINALITY"
    sid = view["settlement_id"]
    assert client.register(CHAIN, tx, confirmations=3)["settlement_id"] == sid  # idempotent
    assert client.get(sid)["tx_hash"] == tx
    assert client.check(CHAIN, tx)["tx_hash"] == tx

    seen.clear()
    final = client.wait(sid, timeout_s=60, on_progress=mine_once(module_anvil, 3))

    assert final["verdict"] == "FINALITY_CONFIRMED"
    assert "GET /v1/events" in seen
    reads = seen.count(f"GET /v1/settlements/{sid}")
    assert reads <= 3, f"the wait read the settlement {reads} times (a poll loop?): {seen}"
    receipt = client.receipt(sid)
    assert verify(receipt).valid


def test_wait_on_a_reverted_tx_ends_failed(module_anvil: Anvil, module_daemon: Daemon) -> None:
    client = FinalityClient(module_daemon.url)
    tx = module_anvil.send_revert()
    module_anvil.receipt(tx)
    sid = client.register(CHAIN, tx)["settlement_id"]
    final = client.wait(sid, timeout_s=60, on_progress=mine_once(module_anvil, 3))
    assert final["verdict"] == "SETTLEMENT_FAILED"
    assert verify(client.receipt(sid)).valid


def test_wait_returns_the_current_view_at_its_timeout(
    module_anvil: Anvil, module_daemon: Daemon
) -> None:
    ticks = itertools.count(0.0, 100.0)  # injected clock: every reading is 100 s later
    client = FinalityClient(module_daemon.url, clock=lambda: next(ticks))
    tx = module_anvil.send()
    module_anvil.receipt(tx)
    sid = client.register(CHAIN, tx, confirmations=50)["settlement_id"]
    view = client.wait(sid, timeout_s=150)
    assert view["settlement_id"] == sid
    assert view["verdict"] == "AWAITING_FINALITY"


def test_events_resume_after_the_last_id_handled(
    module_anvil: Anvil, module_daemon: Daemon
) -> None:
    client = FinalityClient(module_daemon.url)
    for _ in range(2):
        tx = module_anvil.send()
        module_anvil.receipt(tx)
        sid = client.register(CHAIN, tx, confirmations=2)["settlement_id"]
        client.wait(sid, timeout_s=60, on_progress=mine_once(module_anvil, 2))
    stored = list(client.events(limit=1))  # paged one by one
    assert len(stored) >= 2
    ids = [e["id"] for e in stored]
    assert ids == sorted(set(ids))
    middle = ids[len(ids) // 2 - 1]
    assert [e["id"] for e in client.events(after=middle)] == [i for i in ids if i > middle]
    live = client.events(after=middle, follow=True)
    assert next(live)["id"] == ids[ids.index(middle) + 1]  # the stream resumes there too


def test_offline_verify_accepts_a_real_receipt_and_rejects_a_tampered_one(
    module_anvil: Anvil, module_daemon: Daemon
) -> None:
    client = FinalityClient(module_daemon.url)
    tx = module_anvil.send()
    module_anvil.receipt(tx)
    sid = client.register(CHAIN, tx, confirmations=2)["settlement_id"]
    client.wait(sid, timeout_s=60, on_progress=mine_once(module_anvil, 2))
    receipt = client.receipt(sid)
    signer = client.request("GET", "/v1/signers")

    good = verify(receipt)
    assert good.valid and good.receipt is not None
    assert good.as_json()["verdict"] == "FINALITY_CONFIRMED"
    assert verify(receipt, signers=[good.receipt.signer]).valid

    tampered = {**receipt, "tx_hash": "0x" + "ab" * 32}
    bad = verify(tampered)
    assert not bad.valid and bad.reason
    assert bad.as_json() == {"valid": False, "reason": bad.reason}
    stranger = verify(receipt, signers=["0x" + "11" * 20])
    assert not stranger.valid and "signer" in (stranger.reason or "")
    assert signer  # the daemon names its signers for callers to pin


def test_a_bad_hash_is_rejected_naming_the_field(module_daemon: Daemon) -> None:
    client = FinalityClient(module_daemon.url)
    with pytest.raises(Rejected) as caught:
        client.register(CHAIN, "0x1234")
    assert caught.value.status == 422
    assert "tx_hash" in str(caught.value)


def test_the_async_client_registers_waits_and_fetches_the_receipt(
    module_anvil: Anvil, module_daemon: Daemon
) -> None:
    tx = module_anvil.send()
    module_anvil.receipt(tx)

    async def main() -> tuple[str, dict[str, Any]]:
        async with AsyncFinalityClient(module_daemon.url) as client:
            sid = (await client.register(CHAIN, tx, confirmations=2))["settlement_id"]
            final = await client.wait(sid, timeout_s=60, on_progress=mine_once(module_anvil, 2))
            events = [e async for e in client.events()]
            assert any(e["settlement_id"] == sid for e in events)
            return final["verdict"], await client.receipt(sid)

    verdict, receipt = asyncio.run(main())
    assert verdict == "FINALITY_CONFIRMED"
    assert verify(receipt).valid


def test_listing_and_batch_answer_the_api_models(
    module_anvil: Anvil, module_daemon: Daemon
) -> None:
    client = FinalityClient(module_daemon.url)
    txs = [module_anvil.send() for _ in range(2)]
    for tx in txs:
        module_anvil.receipt(tx)
    batch = client.register_batch(
        [{"chain": CHAIN, "tx_hash": txs[0]}, {"chain": CHAIN, "tx_hash": "0x12"}]
    )
    assert [r.status for r in batch.results] == [201, 422]
    assert batch.results[0].settlement is not None
    assert batch.results[1].fields == ["tx_hash"]
    sid = batch.results[0].settlement.settlement_id
    seen: list[str] = []
    page = client.settlements(chain=CHAIN, limit=1)
    while True:
        seen += [item.settlement_id for item in page.items]
        if page.next_cursor is None:
            break
        page = client.settlements(chain=CHAIN, limit=1, cursor=page.next_cursor)
    assert sid in seen
    assert SettlementView.model_validate(client.get(sid)).settlement_id == sid


def test_wait_on_a_settlement_already_final_answers_from_its_first_read(
    module_anvil: Anvil, module_daemon: Daemon
) -> None:
    client, seen = counting_client(module_daemon)
    tx = module_anvil.send()
    module_anvil.receipt(tx)
    sid = client.register(CHAIN, tx, confirmations=2)["settlement_id"]
    module_anvil.mine(2)
    wait_for(lambda: client.settlement_events(sid), timeout=30, what="the confirmed event")
    seen.clear()
    final = client.wait(sid, timeout_s=60)
    assert final["verdict"] == "FINALITY_CONFIRMED"
    assert seen.count(f"GET /v1/settlements/{sid}") == 1, seen


def test_every_registration_field_is_a_keyword_and_signers_pin_the_receipt_key(
    module_anvil: Anvil, module_daemon: Daemon
) -> None:
    """``provisional``, ``sender``, ``nonce`` and ``raw_tx`` reach the daemon (it checks and
    stores them: a wrong raw_tx is refused naming it), and ``signers()`` gives the key that
    verifies the receipt when pinned."""
    client = FinalityClient(module_daemon.url)
    tx = module_anvil.send()
    facts = module_anvil.rpc("eth_getTransactionByHash", tx)
    with pytest.raises(Rejected) as caught:
        client.register(CHAIN, tx, raw_tx="0x02c0")
    assert caught.value.status == 422 and "raw_tx" in str(caught.value)

    sid = client.register(
        CHAIN,
        tx,
        confirmations=2,
        provisional=True,
        sender=facts["from"],
        nonce=int(facts["nonce"], 16),
        raw_tx=module_anvil.raw_tx(tx),
    )["settlement_id"]
    assert module_daemon.query("SELECT sender, nonce FROM settlements WHERE tx_hash = ?", tx) == [
        (facts["from"].lower(), int(facts["nonce"], 16))
    ]
    final = client.wait(sid, timeout_s=60, on_progress=mine_once(module_anvil, 2))
    assert final["verdict"] == "FINALITY_CONFIRMED"

    [current] = [s for s in client.signers() if s.current]
    receipt = client.receipt(sid)
    assert verify(receipt, signers=[current.address]).valid
    assert not verify(receipt, signers=["0x" + "11" * 20]).valid
