"""Two daemons on one PostgreSQL: one owner per chain, kill -9, SIGTERM and SIGSTOP handoffs.

Real processes, the machine's PostgreSQL (a fresh schema per test), one anvil, one HTTP
receiver counting applied effects by Idempotency-Key.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from guard.handoff_receipts import HANDOFF_KINDS, LOCK
from guard.verify import verify_receipt
from tests.e2e.handoff_helpers import SECRET, commit_counts, owner, pg_daemon, wait_owner
from tests.support.anvil import Anvil
from tests.support.daemon import Daemon, run_cli, wait_for
from tests.support.receiver import Receiver

pytestmark = pytest.mark.anvil

LEASE_S = 2.0
TAKEOVER_S = 60.0
"""Deadline for a takeover to be seen: only one that never happens runs into it (how fast
takeovers are is measured by bench/handoff.py, not asserted here)."""


def takeover_by(daemon: Daemon, instance: str, **params: str) -> dict[str, Any]:
    """The newest handoff record once it is ``instance``'s takeover (the lease row changes
    hands a moment before the record of the takeover is visible)."""

    def newest() -> dict[str, Any] | None:
        listed = daemon.get("/v1/handoffs", params=params).json()
        return listed[0] if listed and listed[0]["to_owner"] == instance else None

    found: dict[str, Any] = wait_for(newest, TAKEOVER_S, what=f"{instance}'s takeover record")
    return found


def start_pair(
    tmp_path: Path, anvil: Anvil, pg_url: str, receiver: Receiver | None
) -> tuple[Daemon, Daemon]:
    a = pg_daemon(tmp_path, anvil.url, pg_url, "A", receiver, lease_s=LEASE_S)
    b = pg_daemon(tmp_path, anvil.url, pg_url, "B", receiver, lease_s=LEASE_S)
    a.start()
    wait_owner(a, "A")
    b.start()
    return a, b


def test_one_owner_then_kill9_the_standby_finishes_the_work(
    tmp_path: Path, anvil: Anvil, pg_url: str
) -> None:
    with Receiver(SECRET) as receiver:
        a, b = start_pair(tmp_path, anvil, pg_url, receiver)
        try:
            time.sleep(1.0)
            assert owner(a) == ("A", 1), "the standby must not take a live lease"
            assert b.get("/healthz").status_code == 200, "a standby is healthy"
            sids = []
            for i in range(4):
                tx = anvil.send()
                via = a if i % 2 else b  # either instance takes registrations
                sids.append(
                    via.register(tx, dependent_state={"i": i}, commit_url=receiver.url("/c"))[
                        "settlement_id"
                    ]
                )
            anvil.mine(1)
            a.kill9()
            anvil.mine(3)
            # How soon (lease + check interval) is bench/handoff.py's failover figure.
            wait_owner(b, "B", timeout=TAKEOVER_S)
            for sid in sids:
                b.wait_verdict(sid, "FINALITY_CONFIRMED", timeout=20)
            wait_for(lambda: len(commit_counts(receiver)) == len(sids), 20, what="commits")
            time.sleep(1.0)  # a duplicate would show up now
            assert set(commit_counts(receiver).values()) == {1}
            assert owner(b) == ("B", 2)

            h = takeover_by(b, "B", full="true")
            assert (h["from_owner"], h["from_token"], h["to_owner"], h["to_token"]) == (
                "A",
                1,
                "B",
                2,
            )
            assert h["reason"] == "expired"
            assert h["verdict"] in ("HANDOFF_SAFE", "NO_TRANSACTION")
            assert set(h["elements"]) >= {
                "transaction_state_checkpoint_receipt",
                "in_flight_operation_registry_receipt",
                "handoff_lock_signature",
                "transaction_recovery_predicate_receipt",
            }
            assert any(
                r["predicate"] == "reread_header_window_from_common_ancestor" for r in h["recovery"]
            )
            shown = b.cli("handoffs")
            assert shown.returncode == 0, shown.stderr
            assert "A (token 1) -> B (token 2), expired" in shown.stdout
            as_json = json.loads(b.cli("handoffs", "--json").stdout)
            assert as_json[0]["to_owner"] == "B"
            check_signed_elements(tmp_path, b, h)
        finally:
            a.close()
            b.close()


def check_signed_elements(tmp_path: Path, daemon: Daemon, listed: dict[str, object]) -> None:
    """The four elements of a real takeover, fetched over HTTP, verify offline with the
    real verifier against the daemon's published signer, and say which handoff they are."""
    signer = daemon.get("/v1/signers").json()[0]["address"]
    detail = daemon.get(f"/v1/handoffs/{listed['id']}").json()
    assert detail["signed"] is True
    assert detail["receipts"] == {k: listed["elements"][k]["receipt"] for k in HANDOFF_KINDS}  # type: ignore[index]
    for kind in HANDOFF_KINDS:
        receipt = detail["receipts"][kind]
        verified = verify_receipt(receipt, trusted_signers=[signer])
        assert verified.kind == kind and verified.signer == signer
        assert verified.handoff is not None
        assert (
            verified.handoff["name"],
            verified.handoff["from_owner"],
            verified.handoff["from_token"],
            verified.handoff["to_owner"],
            verified.handoff["to_token"],
            verified.handoff["at"],
        ) == ("local", "A", 1, "B", 2, detail["at"])
        assert verified.verdict == detail["verdict"]
        assert verified.element == detail["elements"][kind]["body"]
        assert receipt["element_digest"] == detail["elements"][kind]["digest"]
    lock = daemon.cli("handoffs", "--id", str(detail["id"]), "--receipt", LOCK)
    assert lock.returncode == 0, lock.stderr
    path = tmp_path / "lock.json"
    path.write_text(lock.stdout)
    checked = run_cli("verify", str(path), "--signer", signer)
    assert checked.returncode == 0, checked.stderr
    assert f"valid: {LOCK}" in checked.stdout
    assert "A (token 1) -> B (token 2), expired" in checked.stdout
    tampered = json.loads(lock.stdout)
    tampered["handoff"]["from_token"] = 0
    path.write_text(json.dumps(tampered))
    refused = run_cli("verify", str(path), "--signer", signer)
    assert refused.returncode != 0 and "invalid:" in refused.stderr
    missing = daemon.get("/v1/handoffs/999999")
    assert missing.status_code == 404 and "handoff_id: no handoff 999999" in missing.text


def test_sigterm_releases_the_lease_and_the_standby_takes_over_without_waiting_for_expiry(
    tmp_path: Path, anvil: Anvil, pg_url: str
) -> None:
    a, b = start_pair(tmp_path, anvil, pg_url, None)
    try:
        time.sleep(0.5)
        assert a.proc is not None
        a.proc.send_signal(15)
        # "released", not "expired": B took the lease A gave up, without waiting out the lease
        # (that this takes well under a second is bench/handoff.py's SIGTERM figure).
        wait_owner(b, "B", timeout=TAKEOVER_S)
        assert a.proc.wait(timeout=30) == 0, a.log_tail()
        h = takeover_by(b, "B")
        assert (h["from_owner"], h["reason"], h["to_owner"]) == ("A", "released", "B")
        tx = anvil.send()
        sid = b.register(tx)["settlement_id"]
        anvil.mine(3)
        b.wait_verdict(sid, "FINALITY_CONFIRMED")
    finally:
        a.close()
        b.close()


def test_a_paused_owner_is_refused_when_it_wakes_up(
    tmp_path: Path, anvil: Anvil, pg_url: str
) -> None:
    a, b = start_pair(tmp_path, anvil, pg_url, None)
    try:
        tx = anvil.send()
        sid = a.register(tx)["settlement_id"]
        a.wait_verdict(sid, "AWAITING_FINALITY")
        a.pause()  # SIGSTOP past its lease
        wait_owner(b, "B", timeout=TAKEOVER_S)
        anvil.mine(3)
        b.wait_verdict(sid, "FINALITY_CONFIRMED", timeout=30)
        # B took over because A's lease expired while A was stopped, not a live one: the
        # takeover says so (the store decides expiry by the lease's own expires_at).
        h = takeover_by(b, "B")
        assert (h["from_owner"], h["reason"], h["to_owner"]) == ("A", "expired", "B")
        a.resume()  # SIGCONT: A still believes it holds token 1 and tries to write

        def refused() -> list[tuple[object, ...]]:
            return a.query(
                "SELECT owner, token, current_owner, current_token FROM fencing_rejections"
            )

        rows = wait_for(refused, 10, what="A's refused write")
        assert ("A", 1, "B", 2) in rows
        wait_for(lambda: "refused" in a.log(), 5, what="A logging the refusal")
        # A stands by now; B still owns and works.
        time.sleep(1.0)
        assert owner(b) == ("B", 2)
        tx2 = anvil.send()
        sid2 = a.register(tx2)["settlement_id"]
        anvil.mine(3)
        b.wait_verdict(sid2, "FINALITY_CONFIRMED")
        leases = a.get("/v1/leases").json()
        assert leases["refused_writes"] and leases["leases"][0]["owner"] == "B"
    finally:
        a.resume()
        a.close()
        b.close()
