"""Signed receipts for source settlements: a Stripe-shaped payment and a real RQ job.

The source poller decides (real HTTP to a Stripe-shaped server; a real ``rq worker`` on the
machine's Redis), the receipts component signs the terminal decision from the store alone,
and the offline verifier accepts it. The last tests follow a payment and a job from
registration to the commit and the discard a receiver gets, each carrying its receipt.

``.venv/bin/python -m tests.integration.test_receipts_sources`` regenerates the off-chain
golden vectors (tests/vectors/receipts/offchain_*.json) from the Stripe flow.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rq import Queue

from guard.canonical import digest
from guard.hashing import keccak256
from guard.receipts import FAILURE, FINALITY, OFFCHAIN_CHAIN_ID, TIMEOUT
from guard.source import Snapshot
from guard.types import UnixMillis
from guard.verify import VerifiedReceipt, verify_receipt
from tests.integration.receipts_helpers import SIGNING_KEY
from tests.support.daemon import wait_for
from tests.support.jobs import RedisSpace, RqWorker, fail, succeed
from tests.support.receiver import Receiver
from tests.support.rigs import FakeClock
from tests.support.sources_app import LiveApp, source_config_file
from tests.support.stripe_server import StripeServer
from watcher.config.sources import SourceConfig
from watcher.delivery.plan import OutboxPlan
from watcher.receipts.component import ReceiptIssuer
from watcher.receipts.signer import Signer
from watcher.receipts.sources import SourceReceiptBuilder
from watcher.sources.poller import SourcePoller
from watcher.sources.settlements import new_source_settlement
from watcher.store import Store
from watcher.store.receipts_store import receipt_store

KEY = "sk_test_fw_local"
VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "receipts"


class Rig:
    """One source, a store, the poller and a receipts issuer wired as the daemon wires them
    (the issuer runs after each stored decision, before the delivery sender would)."""

    def __init__(self, tmp: Path, config: SourceConfig, clock: FakeClock | None = None) -> None:
        self.config = config
        self.clock = clock or FakeClock(int(time.time() * 1000))
        self.store = Store.open(f"sqlite:///{tmp}/finality.db")
        self.signer = Signer(SIGNING_KEY, "env")
        self.receipts = receipt_store(self.store)
        self.receipts.use_signer(self.signer.address, "env", self.clock())
        builder = SourceReceiptBuilder(
            config.name, config.kind, self.signer.address, self.receipts.lifecycle
        )
        self.issuer = ReceiptIssuer(self.signer, self.receipts, {config.name: builder}, self.clock)
        self.poller = SourcePoller(
            self.store, [config], OutboxPlan(), self.clock, notify=[self.issuer.after_poll]
        )

    def register(self, ref: str, **kw: Any) -> str:
        rec, _ = self.store.register(new_source_settlement(self.config, ref, self.clock(), **kw))
        return rec.settlement_id

    def receipt(self, sid: str) -> dict[str, Any]:
        latest = self.receipts.latest(sid)
        assert latest is not None, f"no receipt for {sid}"
        return latest.body

    def close(self) -> None:
        self.poller.stop()
        self.store.close()


def check(receipt: dict[str, Any], kind: str, verdict: str, signer: str) -> VerifiedReceipt:
    verified = verify_receipt(receipt, trusted_signers=[signer])
    assert (verified.kind, verified.verdict) == (kind, verdict)
    assert verified.chain_id == OFFCHAIN_CHAIN_ID == receipt["chain_id"]
    ref = receipt["offchain"]["ref"]
    assert receipt["tx_hash"] == "0x" + keccak256(ref.encode()).hex()
    assert verified.anchor is None  # no block to ask a node about
    return verified


# -- Stripe ------------------------------------------------------------------------------------


@pytest.fixture
def stripe_rig(tmp_path: Path) -> Iterator[tuple[Rig, StripeServer]]:
    clock = FakeClock(int(time.time() * 1000))
    stripe = StripeServer(KEY, clock=lambda: clock() / 1000)
    config = SourceConfig.model_validate(
        {
            "name": "stripe",
            "kind": "stripe_payment_intent",
            "api_key": KEY,
            "api_base": stripe.url,
            "timeout_s": 600,
        }
    )
    rig = Rig(tmp_path, config, clock)
    yield rig, stripe
    rig.close()
    stripe.close()


def stripe_flow(rig: Rig, stripe: StripeServer) -> dict[str, dict[str, Any]]:
    """A settled payment, a declined one, and the settled one refunded: their receipts."""
    paid, declined = stripe.create_payment_intent(amount=4200), stripe.create_payment_intent()
    sid = rig.register(paid, dependent_state={"order": "A-7"})
    other = rig.register(declined)
    stripe.confirm(paid)
    stripe.confirm(declined, outcome="declined")
    rig.clock.advance(1)
    rig.poller.poll("stripe")
    assert rig.store.settlement(other).verdict == "SETTLEMENT_FAILED"
    assert rig.store.settlement(sid).verdict == "AWAITING_FINALITY"
    assert [r.kind for r in rig.receipts.for_settlement(sid)] == []  # not final: nothing
    stripe.settle(paid)
    rig.clock.advance(1)
    rig.poller.poll("stripe")
    assert rig.store.settlement(sid).verdict == "FINALITY_CONFIRMED"
    out = {"final": rig.receipt(sid), "declined": rig.receipt(other)}
    stripe.refund(paid, amount=1000)  # learnt from its webhook events (refund, charge)
    rig.clock.advance(1)
    for event in stripe.events_of(paid)[-2:]:
        snapshot = Snapshot(paid, UnixMillis(rig.clock()), {"event": event}, (event["id"],))
        rig.poller.receive("stripe", paid, snapshot)
    assert rig.store.settlement(sid).verdict == "SETTLEMENT_FAILED"
    out["refunded"] = rig.receipt(sid)
    return out


def test_a_stripe_payment_gets_signed_receipts_that_verify_offline(
    stripe_rig: tuple[Rig, StripeServer],
) -> None:
    rig, stripe = stripe_rig
    receipts = stripe_flow(rig, stripe)
    signer = rig.signer.address

    final = receipts["final"]
    verified = check(final, FINALITY, "FINALITY_CONFIRMED", signer)
    off = final["offchain"]
    facts = final["evidence"]["facts"]
    assert (off["type"], off["source_kind"], off["source"]) == (
        "offchain",
        "stripe_payment_intent",
        "stripe",
    )
    assert off["objects"] == facts["objects"] and off["objects_digest"] == facts["objects_digest"]
    assert len(off["objects"]) == 3  # the PaymentIntent, its charge, its balance transaction
    assert (
        final["decision_digest"] == off["decision_digest"] == off["history"][-1]["decision_digest"]
    )
    assert off["history"][-1]["event"] == "settlement_confirmed"
    assert final["dependent_state_digest"] is not None
    assert any("balance_status available" in c for c in verified.claims)

    declined = receipts["declined"]
    check(declined, FAILURE, "SETTLEMENT_FAILED", signer)
    assert declined["evidence"]["kind"] == "charge_failed"

    refunded = receipts["refunded"]
    check(refunded, FAILURE, "SETTLEMENT_FAILED", signer)
    assert refunded["evidence"]["kind"] == "refunded"
    assert [h["event"] for h in refunded["offchain"]["history"]] == [
        "settlement_confirmed",
        "finality_violation",
    ]
    # The receipt attests the decision that turned the verdict: the refund.created event.
    refund_created = stripe.events_of(refunded["offchain"]["ref"])[-2]
    assert refund_created["type"] == "refund.created"
    assert refunded["offchain"]["event_ids"] == [refund_created["id"]]
    # The reversal withdrew the finality receipt (a signed revocation, chain id 0 too).
    stored = rig.receipts.for_settlement(final["settlement_id"])
    [revocation] = [r for r in stored if r.kind == "receipt_revocation"]
    assert revocation.body["revokes"]["digest"] == final["digest"]
    verify_receipt(revocation.body, trusted_signers=[signer])


# -- RQ ----------------------------------------------------------------------------------------


def test_rq_jobs_get_finality_failure_and_timeout_receipts(
    space: RedisSpace, tmp_path: Path
) -> None:
    queue = Queue(space.name("q"), connection=space.redis)
    worker = RqWorker(space, queue.name, tmp_path / "rq-worker.log")
    config = SourceConfig.model_validate(
        {"name": "jobs", "kind": "rq_job", "redis_url": space.url, "timeout_s": 600}
    )
    rig = Rig(tmp_path, config, FakeClock(int(time.time() * 1000)))
    try:
        ok = queue.enqueue(succeed, 7, job_id=space.name("ok"), result_ttl=600)
        bad = queue.enqueue(fail, "no stock", job_id=space.name("bad"), failure_ttl=600)
        ok_id, bad_id = rig.register(ok.id), rig.register(bad.id)
        never = rig.register(space.name("never"), timeout_s=1.0)

        def settled() -> bool:
            rig.clock.now = int(time.time() * 1000)
            rig.poller.poll("jobs")
            return all(
                rig.store.settlement(s).verdict != "AWAITING_FINALITY" for s in (ok_id, bad_id)
            )

        wait_for(settled, 15, interval=0.1, what="both jobs decided")
        signer = rig.signer.address
        finished = rig.receipt(ok_id)
        check(finished, FINALITY, "FINALITY_CONFIRMED", signer)
        objects = finished["offchain"]["objects"]
        assert objects["id"] == ok.id and objects["status"] == "finished"
        assert objects["result"]["type"] == "successful"
        assert finished["offchain"]["event_ids"] == []
        failed = rig.receipt(bad_id)
        verified = check(failed, FAILURE, "SETTLEMENT_FAILED", signer)
        assert failed["offchain"]["objects"]["result"]["exc_last_line"] == "RuntimeError: no stock"
        assert any("status failed" in c for c in verified.claims)

        rig.clock.advance(5)  # the unknown job's own 1 s timeout passes
        rig.poller.poll("jobs")
        timed_out = rig.receipt(never)
        verified = check(timed_out, TIMEOUT, "TIMEOUT_TREATED_AS_FAILURE", signer)
        assert timed_out["evidence"] is None and timed_out["offchain"]["objects"] == {}
        assert timed_out["issued_at"] >= timed_out["offchain"]["deadline"]
        assert verified.claims and "never reported" in verified.claims[0]
    finally:
        worker.stop()
        rig.close()


# -- the daemon: commits wait for, and carry, the receipt ---------------------------------------


def test_a_payment_commit_and_a_job_discard_carry_their_signed_receipts(
    space: RedisSpace, tmp_path: Path
) -> None:
    queue = Queue(space.name("q"), connection=space.redis)
    worker = RqWorker(space, queue.name, tmp_path / "rq-worker.log")
    with StripeServer(KEY) as stripe, Receiver() as receiver:
        config = source_config_file(
            tmp_path,
            [
                {
                    "name": "stripe",
                    "kind": "stripe_payment_intent",
                    "api_key": KEY,
                    "api_base": stripe.url,
                    "poll_interval_s": 0.2,
                },
                {"name": "jobs", "kind": "rq_job", "redis_url": space.url, "poll_interval_s": 0.2},
            ],
            delivery={"receipt_wait_s": 30, "backoff_initial_s": 0.2},
        )
        try:
            with LiveApp(config, start_components=True) as app:
                paid = stripe.create_payment_intent()
                bad = queue.enqueue(fail, job_id=space.name("bad"), failure_ttl=600)
                registered = app.register(
                    kind="stripe_payment_intent",
                    ref=paid,
                    dependent_state={"ship": "order-7"},
                    commit_url=receiver.url("/commit"),
                )
                sid = registered["settlement_id"]
                job = app.register(
                    kind="rq_job",
                    ref=bad.id,
                    dependent_state={"credit": 9},
                    commit_url=receiver.url("/commit"),
                )["settlement_id"]
                stripe.confirm(paid)
                stripe.settle(paid)
                app.wait_verdict(sid, "FINALITY_CONFIRMED")
                app.wait_verdict(job, "SETTLEMENT_FAILED")
                commit = wait_for(lambda: receiver.effects(type_="commit"), 10, what="commit")
                discard = wait_for(lambda: receiver.effects(type_="discard"), 10, what="discard")
        finally:
            worker.stop()
    [c], [d] = commit, discard
    assert c["settlement_id"] == sid and d["settlement_id"] == job
    # The registration answered a signed binding of the dependent state to the payment; the
    # commit carries the same one, so the receiver can check what it applies.
    binding = registered["binding"]
    bound = verify_receipt(binding)
    assert bound.kind == "dependent_state_binding_receipt"
    assert bound.facts.dependent_state_digest == digest({"ship": "order-7"})
    assert binding["offchain"]["ref"] == paid and binding["chain_id"] == OFFCHAIN_CHAIN_ID
    assert c["binding"]["receipt"] == binding
    assert d["binding"]["receipt"]["binding"]["dependent_state_digest"] == digest({"credit": 9})
    for body, kind, verdict in (
        (c, FINALITY, "FINALITY_CONFIRMED"),
        (d, FAILURE, "SETTLEMENT_FAILED"),
    ):
        assert body["receipt_unavailable"] is None
        receipt = body["receipt"]["receipt"]
        verified = verify_receipt(receipt)
        assert (verified.kind, verified.verdict) == (kind, verdict)
        assert receipt["decision_digest"] == body["decision"]["digest"]
        assert receipt["chain_id"] == OFFCHAIN_CHAIN_ID


# -- golden vectors ------------------------------------------------------------------------------


def write_vectors() -> None:
    """Regenerate tests/vectors/receipts/offchain_*.json from the Stripe flow."""
    tmp = Path(tempfile.mkdtemp(prefix="fw-offchain-vectors-"))
    clock = FakeClock(1_767_225_600_000)  # 2026-01-01: fixed, so the vectors are stable
    with StripeServer(KEY, clock=lambda: clock() / 1000) as stripe:
        config = SourceConfig.model_validate(
            {
                "name": "stripe",
                "kind": "stripe_payment_intent",
                "api_key": KEY,
                "api_base": stripe.url,
                "timeout_s": 600,
            }
        )
        rig = Rig(tmp, config, clock)
        try:
            receipts = stripe_flow(rig, stripe)
        finally:
            rig.close()
    described = {
        "final": "a Stripe PaymentIntent whose balance transaction is available",
        "declined": "a Stripe PaymentIntent whose card was declined",
        "refunded": "the settled PaymentIntent, refunded after finality (a finality violation)",
    }
    for name, receipt in receipts.items():
        verified = verify_receipt(receipt, trusted_signers=[receipt["signer"]])
        vector = {
            "description": described[name],
            "trusted_signers": [receipt["signer"]],
            "receipt": receipt,
            "expected": {
                "valid": True,
                "kind": verified.kind,
                "digest": verified.digest,
                "signer": verified.signer,
                "summary": verified.facts.summary,
                "claims": list(verified.claims),
                "anchor": None,
            },
        }
        path = VECTORS / f"offchain_stripe_{name}.json"
        path.write_text(json.dumps(vector, indent=1, sort_keys=True) + "\n")
        print(path)


if __name__ == "__main__":
    write_vectors()
