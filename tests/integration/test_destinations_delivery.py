"""Destinations checked again at delivery time: the sender resolves a row's host
at every attempt and sends nothing to an address that is not allowed now, whatever it was
at registration (DNS can change); it sends to the address it checked, so a second lookup
cannot differ; a destination's answer body is never stored. A real receiver on loopback;
the resolver is the sender's seam, so a name can be made to resolve anywhere."""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from tests.integration.helpers import random_tx_hash, sign_decision
from tests.support.daemon import wait_for
from tests.support.receiver import Receiver
from watcher.clock import wall_clock_ms
from watcher.config.chains import ChainConfig
from watcher.config.sections import DeliveryConfig
from watcher.delivery.plan import OutboxPlan
from watcher.delivery.sender import Sender
from watcher.destinations import AllowList, IPAddress
from watcher.settlements import Registration, register
from watcher.store import Store
from watcher.store.outbox_store import DeliveryRecord

CHAIN = ChainConfig.model_validate(
    {"name": "local", "chain_id": 31337, "rpc": ["http://127.0.0.1:1"], "confirmations": 3}
)
DNS: dict[str, list[str]] = {}
"""What the sender's resolver answers, by host name (a test's own DNS)."""


def resolver(host: str, port: int) -> list[IPAddress]:
    return [ipaddress.ip_address(a) for a in DNS.get(host, [])]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    DNS.clear()
    st = Store.open(f"sqlite:///{tmp_path}/finality.db")
    yield st
    st.close()


@pytest.fixture
def start_sender(store: Store) -> Iterator[Callable[[AllowList], Sender]]:
    senders: list[Sender] = []

    def start(allow: AllowList) -> Sender:
        values: dict[str, Any] = {
            "max_attempts": 3,
            "workers": 1,  # one client set: a kept-alive connection is reused if it may be
            "backoff_initial_s": 0.05,
            "backoff_max_s": 0.1,
            "timeout_s": 2.0,
            "receipt_wait_s": 0.0,
        }
        config = DeliveryConfig.model_validate(values)
        sender = Sender(store, config, seed=1, destinations=allow, resolver=resolver)
        senders.append(sender)
        sender.start()
        return sender

    yield start
    for sender in senders:
        sender.stop()


def confirm(store: Store, url: str) -> str:
    """A confirmed settlement with a commit due to ``url`` (as the engine writes it)."""
    rec, _ = register(
        store,
        Registration(CHAIN, random_tx_hash(), dependent_state={"order": 1}, commit_url=url),
        wall_clock_ms(),
    )
    decision = {"verdict": "FINALITY_CONFIRMED", "directive": "COMMIT", "digest": "sha256:00"}
    with store.block_txn("local", wall_clock_ms()) as txn:
        event_id = txn.record_event("settlement_confirmed", "info", decision, rec.settlement_id)
        OutboxPlan().on_verdict(txn, rec, "FINALITY_CONFIRMED", event_id)
    sign_decision(store, rec.settlement_id, "FINALITY_CONFIRMED", "sha256:00")
    return rec.settlement_id


def settled(store: Store, sid: str, *states: str) -> DeliveryRecord:
    def check() -> DeliveryRecord | None:
        [row] = store.outbox().list(settlement_id=sid)
        return row if row.state in states else None

    return wait_for(check, 10, what=f"delivery in {states}")


def test_a_name_that_now_resolves_to_a_private_address_is_dead_and_nothing_is_sent(
    store: Store, start_sender: Callable[[AllowList], Sender]
) -> None:
    with Receiver() as receiver:
        DNS["hooks.example"] = ["10.0.0.7"]  # public at registration, rebound since
        sid = confirm(store, f"http://hooks.example:{receiver.port}/commit")
        start_sender(AllowList(loopback=True))
        dead = settled(store, sid, "dead")
    assert dead.last_error == (
        "destination refused: points at a private address, which is not allowed "
        "(list it in [delivery] allow_destinations if it is meant)"
    )
    assert dead.attempts == 1  # refused for good: not retried
    assert receiver.received() == []


def test_the_request_goes_to_the_address_that_was_checked(
    store: Store, start_sender: Callable[[AllowList], Sender]
) -> None:
    with Receiver() as receiver:
        DNS["hooks.internal"] = ["127.0.0.1"]
        sid = confirm(store, f"http://hooks.internal:{receiver.port}/commit?k=1")
        start_sender(AllowList([f"hooks.internal:{receiver.port}"]))  # loopback not allowed
        delivered = settled(store, sid, "delivered")
    [request] = receiver.received("/commit?k=1")
    assert request.headers["host"] == f"hooks.internal:{receiver.port}"
    assert delivered.last_status == 200


def test_loopback_is_refused_unless_allowed(
    store: Store, start_sender: Callable[[AllowList], Sender]
) -> None:
    with Receiver() as receiver:
        sid = confirm(store, receiver.url("/commit"))
        start_sender(AllowList())  # not every chain is a dev chain, nothing listed
        dead = settled(store, sid, "dead")
    assert "loopback" in str(dead.last_error)
    assert receiver.received() == []


def test_a_name_that_does_not_resolve_is_retried(
    store: Store, start_sender: Callable[[AllowList], Sender]
) -> None:
    sid = confirm(store, "http://gone.example/commit")
    start_sender(AllowList())
    wait_for(lambda: store.outbox().list(settlement_id=sid)[0].attempts >= 2, 10, what="retries")
    row = store.outbox().list(settlement_id=sid)[0]
    assert row.last_error == "destination: its host does not resolve"


def test_the_answer_body_is_never_stored(
    store: Store, start_sender: Callable[[AllowList], Sender]
) -> None:
    with Receiver() as receiver:
        receiver.fail_with = 500  # answers {"error": "told to fail"}
        sid = confirm(store, receiver.url("/commit"))
        start_sender(AllowList(loopback=True))
        dead = settled(store, sid, "dead")
    assert (dead.last_status, dead.last_error) == (500, "HTTP 500")


def test_a_redirect_is_a_failed_attempt_never_followed(
    store: Store, start_sender: Callable[[AllowList], Sender]
) -> None:
    with Receiver() as receiver:
        receiver.fail_with = 307  # a redirect status: the sender must not go anywhere else
        sid = confirm(store, receiver.url("/commit"))
        start_sender(AllowList(loopback=True))
        dead = settled(store, sid, "dead")
    assert (dead.last_status, dead.last_error) == (307, "HTTP 307")
    assert {r.path for r in receiver.received()} == {"/commit"}


# -- https: the checked address, the name in the handshake ------------------------------


@pytest.fixture
def test_ca(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> trustme.CA:
    """A CA the delivery clients trust (``SSL_CERT_FILE``, as an operator's private CA)."""
    ca = trustme.CA()
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    return ca


def tls_for(ca: trustme.CA, *names: str) -> ssl.SSLContext:
    """A server context with a certificate of ``ca`` for ``names`` only (no IP address)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert(*names).configure_cert(context)
    return context


def test_https_goes_to_the_checked_address_with_the_name_in_the_handshake(
    store: Store, start_sender: Callable[[AllowList], Sender], test_ca: trustme.CA
) -> None:
    # hooks.example resolves (for the sender's check) to loopback, and nowhere else: a
    # client resolving the name again itself would find nothing to connect to.
    with Receiver(tls=tls_for(test_ca, "hooks.example")) as receiver:
        DNS["hooks.example"] = ["127.0.0.1"]
        sid = confirm(store, f"https://hooks.example:{receiver.port}/commit")
        start_sender(AllowList([f"hooks.example:{receiver.port}"]))
        delivered = settled(store, sid, "delivered")
    [request] = receiver.received("/commit")
    assert request.headers["host"] == f"hooks.example:{receiver.port}"
    assert delivered.last_status == 200


def test_https_certificate_is_checked_against_the_name_not_the_address(
    store: Store, start_sender: Callable[[AllowList], Sender], test_ca: trustme.CA
) -> None:
    with Receiver(tls=tls_for(test_ca, "other.example")) as receiver:
        DNS["hooks.example"] = ["127.0.0.1"]
        sid = confirm(store, f"https://hooks.example:{receiver.port}/commit")
        start_sender(AllowList([f"hooks.example:{receiver.port}"]))
        dead = settled(store, sid, "dead")
    assert "CERTIFICATE_VERIFY_FAILED" in str(dead.last_error)
    assert receiver.received() == []


def test_two_names_at_one_address_do_not_share_a_tls_connection(
    store: Store, start_sender: Callable[[AllowList], Sender], test_ca: trustme.CA
) -> None:
    # The receiver holds a certificate for good.example only. A kept-alive connection opened
    # (and verified) for good.example must not carry bad.example's delivery.
    with Receiver(tls=tls_for(test_ca, "good.example")) as receiver:
        DNS["good.example"] = DNS["bad.example"] = ["127.0.0.1"]
        allow = AllowList([f"good.example:{receiver.port}", f"bad.example:{receiver.port}"])
        sender = start_sender(allow)
        good = confirm(store, f"https://good.example:{receiver.port}/good")
        sender.wake.set()
        settled(store, good, "delivered")
        bad = confirm(store, f"https://bad.example:{receiver.port}/bad")
        sender.wake.set()
        dead = settled(store, bad, "dead")
    assert "CERTIFICATE_VERIFY_FAILED" in str(dead.last_error)
    assert [r.path for r in receiver.received()] == ["/good"]
