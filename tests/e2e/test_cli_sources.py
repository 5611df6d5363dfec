"""The CLI for payments and jobs: ``finality watch --kind … --ref …`` and ``finality settlement``.

A real daemon process with a polling Stripe source pointed at a Stripe-shaped server on
loopback, and the CLI as a process: the same exit codes as for EVM txs (0 final, 1 failed),
progress lines that say where the payment stands, and usage errors that name the option.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable, Iterator

import pytest

from tests.support.anvil import Anvil
from tests.support.daemon import Daemon, toml_value, wait_for
from tests.support.stripe_server import StripeServer
from watcher.sources.settlements import source_settlement_id

pytestmark = pytest.mark.anvil

KEY = "sk_test_cli"


@pytest.fixture(scope="module")
def stripe() -> Iterator[StripeServer]:
    with StripeServer(KEY) as server:
        yield server


@pytest.fixture(scope="module")
def daemon(
    module_anvil: Anvil, stripe: StripeServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("cli-sources"), module_anvil.url, start=False)
    source = {
        "name": "stripe",
        "kind": "stripe_payment_intent",
        "api_key": KEY,
        "api_base": stripe.url,
        "poll_interval_s": 0.2,
        "timeout_s": 600,
    }
    with d.config_path.open("a") as config:
        config.write(
            "\n[[sources]]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in source.items())
        )
    d.start()
    yield d
    d.close()


def stored_view(daemon: Daemon, pi: str) -> dict[str, object] | None:
    """The daemon's view of the payment's settlement, once someone registered it."""
    sid = source_settlement_id("stripe_payment_intent", "stripe", pi)
    answer = daemon.get(f"/v1/settlements/{sid}")
    return answer.json() if answer.status_code == 200 else None


def watch_while(
    daemon: Daemon, pi: str, act: Callable[[], None], *args: str
) -> subprocess.CompletedProcess[str]:
    """``finality watch ARGS`` while ``act`` runs in a thread once the watch has registered
    payment ``pi`` (waited for, not guessed with a sleep: a busy machine starts the CLI
    slowly, and acting before it registers would skip the progress it must show)."""

    def act_once_watched() -> None:
        wait_for(lambda: stored_view(daemon, pi), 30, what="the watch registering the payment")
        act()

    thread = threading.Thread(target=act_once_watched, daemon=True)
    thread.start()
    try:
        return daemon.cli("watch", *args, "--interval", "0.1", timeout=40)
    finally:
        thread.join(10)


def test_watch_a_payment_until_its_funds_settle_exits_0(
    daemon: Daemon, stripe: StripeServer
) -> None:
    pi = stripe.create_payment_intent()

    def succeeded() -> bool:
        view = stored_view(daemon, pi)
        evidence = view.get("evidence") if view else None
        return isinstance(evidence, dict) and evidence.get("kind") == "payment_succeeded"

    def pay() -> None:
        stripe.confirm(pi)
        wait_for(succeeded, 30, what="the daemon seeing the payment succeed")  # then settle
        stripe.settle(pi)

    done = watch_while(daemon, pi, pay, "--kind", "stripe_payment_intent", "--ref", pi)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert all(line.startswith(f"{pi}: stripe_payment_intent {pi} via stripe") for line in lines)
    assert len(lines) >= 2, "progress before the verdict"
    assert done.stdout.startswith("FINALITY_CONFIRMED: ")


def test_watch_a_declined_payment_exits_1(daemon: Daemon, stripe: StripeServer) -> None:
    pi = stripe.create_payment_intent()
    done = watch_while(
        daemon,
        pi,
        lambda: stripe.confirm(pi, outcome="declined"),
        "--kind",
        "stripe_payment_intent",
        "--ref",
        pi,
        "--json",
    )
    assert done.returncode == 1, done.stderr
    view = json.loads(done.stdout)
    assert (view["verdict"], view["ref"], view["source"]) == ("SETTLEMENT_FAILED", pi, "stripe")


def test_settlement_shows_a_payment_and_waits_for_it(daemon: Daemon, stripe: StripeServer) -> None:
    pi = stripe.create_payment_intent()
    answer = daemon.post("/v1/settlements", {"kind": "stripe_payment_intent", "ref": pi})
    assert answer.status_code == 201, answer.text
    sid = answer.json()["settlement_id"]
    shown = daemon.cli("settlement", sid)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"AWAITING_FINALITY  stripe_payment_intent {pi} via stripe")
    stripe.confirm(pi)
    stripe.settle(pi)
    waited = daemon.cli("settlement", sid, "--wait", "--interval", "0.1", timeout=30)
    assert waited.returncode == 0, waited.stderr
    assert waited.stdout.startswith("FINALITY_CONFIRMED: ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kind", "rq_job"], "watch: --kind rq_job needs --ref"),
        (["0x" + "ab" * 32, "--kind", "rq_job", "--ref", "j1"], "takes --ref, not a tx hash"),
        (["--kind", "rq_job", "--ref", "j1", "--confirmations", "3"], "--confirmations is for EVM"),
        (["--ref", "j1"], "--ref and --source go with --kind"),
        ([], "give the tx hash (or --kind and --ref"),
    ],
)
def test_watch_usage_errors_exit_64_naming_the_option(
    daemon: Daemon, args: list[str], message: str
) -> None:
    done = daemon.cli("watch", *args)
    assert done.returncode == 64, done.stderr
    assert message in done.stderr


def test_an_unknown_settlement_id_exits_64(daemon: Daemon) -> None:
    done = daemon.cli("settlement", "no-such-id")
    assert done.returncode == 64
    assert "no-such-id" in done.stderr
