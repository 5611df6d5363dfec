"""The operator console at ``/ui/`` in a real headless chromium, against a real daemon
process on a real anvil, with real tokens and a real receiver.

One browser, one anvil, one daemon for the module. The daemon has two callers: ``backend``
(read, register), who owns every settlement here, and ``ops`` (read, admin), who reads the
whole outbox and replays dead letters. Every test opens a fresh tab, pastes a token into the
page's form, and at the end checks that the tab asked nothing of another origin and opened
no dialog. Screenshots land in tests/artifacts/.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from guard.verify import verify_receipt
from tests.support.anvil import Anvil
from tests.support.browser import ConsolePage, chromium, console_tab, need_chromium
from tests.support.daemon import Daemon, wait_for
from tests.support.receiver import Receiver

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.anvil

BACKEND = "fw-console-backend-" + secrets.token_hex(8)
OPS = "fw-console-ops-" + secrets.token_hex(8)
SECRET = "console-secret"
TOKENS = f"""
[[api.tokens]]
name = "backend"
token = "{BACKEND}"
scopes = ["read", "register"]

[[api.tokens]]
name = "ops"
token = "{OPS}"
scopes = ["read", "admin"]
"""
DELIVERY = {
    "max_attempts": 2,
    "backoff_initial_s": 0.2,
    "backoff_max_s": 0.3,
    "timeout_s": 2.0,
    "receipt_wait_s": 0.5,
    "allow_destinations": ["127.0.0.1"],
}
WAIT_MS = 20_000
"""How long the page may take to show a change (a busy 2-core machine; it refreshes every
2 s and on each live event)."""

POLL_S = 1.0
"""The module daemon's interval poll. New heads wake it over the WebSocket subscription (each
block the tests mine, a reorg's too), so the interval only finds the txs registered after
they were mined; every 0.2 s, through the minutes the file takes, it cost more CPU than the
tests' own requests."""

HOSTILE = "<script>alert('ref')</script><img src=x onerror=alert('img')>"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    need_chromium()
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with Receiver(SECRET) as r:
        yield r


@pytest.fixture(scope="module")
def daemon(
    module_anvil: Anvil, receiver: Receiver, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Daemon]:
    d = Daemon(
        tmp_path_factory.mktemp("console"),
        module_anvil.url,
        start=False,
        heads="ws",
        heads_url=f"ws://127.0.0.1:{module_anvil.port}",
        poll_interval_s=POLL_S,
    )
    listen = f'listen = "127.0.0.1:{d.port}"'
    config = d.config_path.read_text().replace(listen, listen + "\n" + TOKENS.strip() + "\n", 1)
    d.config_path.write_text(config + receiver.daemon_config(SECRET, (), **DELIVERY))
    d.http.headers.update(bearer(BACKEND))
    d.start()
    wait_for(lambda: d.chain_info()["heads"]["subscribed"], WAIT_MS / 1000, what="subscribed")
    yield d
    d.close()


def own_origin_only(tab: ConsolePage, daemon: Daemon) -> None:
    """Nothing left for another origin, no dialog opened, no datum turned into markup."""
    assert tab.requests, "the page made no request at all"
    assert tab.foreign(daemon.url) == []
    assert tab.dialogs == []


def mined_settlement(daemon: Daemon, anvil: Anvil, **fields: Any) -> tuple[str, int]:
    """A tx mined now (anvil automines), registered by ``backend``: (id, its block)."""
    tx = anvil.send()
    block = int(anvil.receipt(tx)["blockNumber"], 16)
    sid = daemon.register(tx, **fields)["settlement_id"]
    wait_for(lambda: daemon.settlement(sid)["block_number"] == block, 15, what="inclusion")
    return sid, block


def test_the_console_is_served_with_strict_headers_and_no_token_in_its_files(
    daemon: Daemon,
) -> None:
    with httpx.Client(base_url=daemon.url, timeout=10) as raw:  # the page itself is data-free
        page = raw.get("/ui/")
        script = raw.get("/ui/console.js")
        missing = raw.get("/ui/nothing.js")
        bare = raw.get("/ui", follow_redirects=False)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    for rule in ("default-src 'self'", "script-src 'self'", "frame-ancestors 'none'"):
        assert rule in csp
    assert "unsafe-inline" not in csp and "http" not in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    assert script.status_code == 200 and script.headers["content-type"].startswith(
        "text/javascript"
    )
    assert script.headers["content-security-policy"] == csp
    assert "<script>" not in page.text.replace('<script type="module" src="/ui/console.js">', "")
    assert missing.status_code == 404 and missing.json()["fields"] == ["path"]
    assert bare.status_code == 308 and bare.headers["location"] == "/ui/"


def test_the_timeline_and_time_to_final_answer_the_callers_own_only(
    daemon: Daemon, module_anvil: Anvil
) -> None:
    sid, block = mined_settlement(daemon, module_anvil, confirmations=2)
    module_anvil.mine(1)
    daemon.wait_verdict(sid, "FINALITY_CONFIRMED")
    # The receipt is built after the verdict, by the receipts thread: wait for it (a whole
    # run read the timeline before it was issued).
    assert daemon.get(f"/v1/settlements/{sid}/receipt?wait=20").status_code == 200
    story = daemon.get(f"/v1/settlements/{sid}/timeline").json()
    steps = story["steps"]
    assert [s["step"] for s in steps][:5] == ["registered", "included", "depth", "depth", "final"]
    assert steps[1]["block_number"] == block
    assert [s["confirmations"] for s in steps if s["step"] == "depth"] == [1, 2]
    times = [s["at"] for s in steps[1:4]]  # the blocks' own times, in order
    assert None not in times and times == sorted(times)
    assert any(s["step"] == "receipt_issued" for s in steps)

    stats = daemon.get("/v1/stats/time-to-final").json()
    [local] = [c for c in stats["chains"] if c["chain"] == "local"]
    took = daemon.settlement(sid)
    assert local["count"] >= 1 and 0 <= local["median_ms"] <= local["p95_ms"]
    assert local["p95_ms"] >= 0 and took["terminal_at"] >= took["initiated_at"]
    bad = daemon.get("/v1/stats/time-to-final", params={"window_s": 0})
    assert bad.status_code == 422 and bad.json()["fields"] == ["window_s"]

    confirmed = daemon.get(f"/v1/settlements/{sid}/events").json()
    assert daemon.get("/v1/events/latest").json()["last_event_id"] >= confirmed[-1]["id"]

    view = daemon.settlement(sid)
    for q in (sid, view["tx_hash"], view["tx_hash"].upper().replace("0X", "0x")):
        assert daemon.get("/v1/search", params={"q": q}).json() == {"settlement_ids": [sid]}
    assert daemon.get("/v1/search", params={"q": "order-nobody"}).json()["settlement_ids"] == []
    long = daemon.get("/v1/search", params={"q": "x" * 257})
    assert long.status_code == 422 and long.json()["fields"] == ["q"]

    ops = bearer(OPS)  # another caller: the settlement is not theirs
    assert daemon.get("/v1/search", params={"q": sid}, headers=ops).json()["settlement_ids"] == []
    assert daemon.get(f"/v1/settlements/{sid}/timeline", headers=ops).status_code == 404
    assert daemon.get("/v1/stats/time-to-final", headers=ops).json()["chains"] == []
    with httpx.Client(base_url=daemon.url, timeout=10) as raw:
        assert raw.get(f"/v1/settlements/{sid}/timeline").status_code == 401
        assert raw.get("/v1/events/latest").status_code == 401


def test_the_chains_page_shows_the_real_head_and_follows_new_blocks(
    browser: Browser, daemon: Daemon, module_anvil: Anvil
) -> None:
    with console_tab(browser, daemon.url, BACKEND) as tab:
        tab.page.goto("/ui/#/chains")
        head = tab.page.locator("[data-field=head]").first
        daemon.wait_head(module_anvil.head())
        wait_for(lambda: head.text_content() == str(module_anvil.head()), 20, what="head shown")
        module_anvil.mine(3)
        target = module_anvil.head()
        wait_for(lambda: head.text_content() == str(target), 20, what=f"head {target} shown")
        assert tab.page.locator("#stream-state[data-state=live]").count() == 1
        row = tab.page.locator("tbody tr").first
        cost = row.locator("td").nth(9)
        wait_for(lambda: (cost.text_content() or "").replace(".", "").isdigit(), 20, what="cost")
        # the depth rule reads neither tag: said in words, no height made up
        tags = row.locator("[data-field=safe], [data-field=finalized]").all_text_contents()
        assert tags == ["not followed", "not followed"]
        tab.shot("chains")
        own_origin_only(tab, daemon)


def test_a_chain_on_the_safe_rule_shows_the_safe_height_its_node_answers(
    browser: Browser, anvil: Anvil, tmp_path: Path
) -> None:
    with Daemon(tmp_path, anvil.url, finality="safe") as safe_daemon:
        tx = anvil.send()  # something watched: the safe tag is read only then
        sid = safe_daemon.register(tx)["settlement_id"]
        wait_for(lambda: safe_daemon.settlement(sid)["block_number"] is not None, 15, what="seen")
        anvil.mine(2)  # a new head: the poll that reads the tag
        with console_tab(browser, safe_daemon.url, None) as tab:
            tab.page.goto("/ui/#/chains")
            safe = tab.page.locator("[data-field=safe]").first

            def shows_the_nodes() -> bool:
                return safe.text_content() == str(int(anvil.block("safe")["number"], 16))

            wait_for(shows_the_nodes, 20, what="the node's safe height shown")
            finalized = tab.page.locator("[data-field=finalized]").first
            assert finalized.text_content() == "not followed"  # the safe rule reads no other tag
            tab.shot("chains-safe")


def test_a_token_nobody_holds_is_told_on_the_page(browser: Browser, daemon: Daemon) -> None:
    with console_tab(browser, daemon.url, "fw-console-nobody-" + secrets.token_hex(8)) as tab:
        tab.page.goto("/ui/#/settlements")
        problem = tab.page.locator("#problem")
        problem.wait_for(timeout=WAIT_MS)
        assert "Not signed in (401)" in (problem.text_content() or "")
        tab.page.locator("#stream-state[data-state=disconnected]").wait_for(timeout=WAIT_MS)
        own_origin_only(tab, daemon)


def test_a_settlement_page_walks_its_timeline_to_final_without_a_reload(
    browser: Browser, daemon: Daemon, module_anvil: Anvil, receiver: Receiver
) -> None:
    sid, block = mined_settlement(
        daemon, module_anvil, confirmations=3, commit_url=receiver.url("/commit")
    )
    with console_tab(browser, daemon.url, BACKEND) as tab:
        tab.page.goto(f"/ui/#/settlement/{sid}")
        steps = tab.page.locator("ol.timeline li")
        included = tab.page.locator("li[data-step=included]")
        included.wait_for(timeout=WAIT_MS)
        assert f"included in block {block}" in (included.text_content() or "")
        tab.page.evaluate("window.sameDocument = true")  # gone if the page reloads
        for k in (2, 3):
            module_anvil.mine(1)
            tab.page.get_by_text(f"depth {k}/3").wait_for(timeout=WAIT_MS)
        tab.page.locator("li[data-step=final]").wait_for(timeout=WAIT_MS)
        tab.page.locator("li[data-step=commit_delivered]").wait_for(timeout=WAIT_MS)
        # The receipt is built after the verdict, by the receipts thread: waited for as the
        # steps above, not assumed to be on the page once the commit is.
        tab.page.locator("li[data-step=receipt_issued]").wait_for(timeout=WAIT_MS)
        assert tab.page.evaluate("window.sameDocument") is True
        shown = [s.split("\n")[0] for s in steps.all_inner_texts()]
        order = [
            tab.page.locator("ol.timeline li").nth(i).get_attribute("data-step")
            for i in range(len(shown))
        ]
        assert order[:6] == ["registered", "included", "depth", "depth", "depth", "final"]
        assert "receipt_issued" in order
        with tab.page.expect_download() as downloaded:
            tab.page.get_by_role("button", name="Download receipt").click()
        receipt = json.loads(Path(downloaded.value.path()).read_text())
        signer = daemon.get("/v1/signers").json()[0]["address"]
        verified = verify_receipt(receipt, trusted_signers=[signer])  # what `finality verify` runs
        assert (
            verified.kind == "settlement_finality_receipt"
            and downloaded.value.suggested_filename == f"{sid}.receipt.json"
        )
        assert tab.page.locator("svg.chart circle").count() == 3  # confirmations against time
        tab.shot("settlement")
        own_origin_only(tab, daemon)


def test_a_reorg_appears_live_with_its_depth_touched_settlements_and_violation(
    browser: Browser, daemon: Daemon, module_anvil: Anvil
) -> None:
    sid, block = mined_settlement(daemon, module_anvil, confirmations=20)
    final, _ = mined_settlement(daemon, module_anvil, confirmations=1)  # in block + 1
    daemon.wait_verdict(final, "FINALITY_CONFIRMED")
    daemon.wait_head(block + 1, module_anvil.block()["hash"])
    raw = module_anvil.raw_tx(daemon.settlement(sid)["tx_hash"])
    with console_tab(browser, daemon.url, BACKEND) as tab:
        tab.page.goto("/ui/#/reorgs")
        tab.page.get_by_role("heading", name="Reorgs").wait_for(timeout=WAIT_MS)
        tab.page.evaluate("window.sameDocument = true")
        module_anvil.reorg(2, [(raw, 0)])
        row = tab.page.locator("tbody tr", has=tab.page.get_by_role("link", name=sid))
        row.wait_for(timeout=WAIT_MS)
        assert row.locator("[data-field=depth]").text_content() == "2"
        assert row.get_by_role("link", name=final).count() == 1
        assert row.locator(".violation").text_content() == "FINALITY VIOLATION"
        assert tab.page.evaluate("window.sameDocument") is True
        tab.shot("reorgs")
        own_origin_only(tab, daemon)
    steps = daemon.get(f"/v1/settlements/{sid}/timeline").json()["steps"]
    names = [s["step"] for s in steps]
    reorged = steps[names.index("reorged")]
    assert reorged["depth"] == 2 and reorged["finality_violation"] is True
    assert names.index("registered") < names.index("reorged") < names.index("included")
    undone = daemon.get(f"/v1/settlements/{final}/timeline").json()["steps"]
    assert {"step": "event", "kind": "finality_violation"}.items() <= next(
        s for s in undone if s["step"] == "event"
    ).items()


def test_a_dead_letter_is_replayed_from_the_page_by_admin_only_and_arrives_once(
    browser: Browser, daemon: Daemon, module_anvil: Anvil
) -> None:
    with Receiver(SECRET) as failing:
        failing.fail_with = 500
        sid, _ = mined_settlement(
            daemon, module_anvil, confirmations=1, commit_url=failing.url("/commit")
        )

        def dead() -> dict[str, Any] | None:
            rows = daemon.get("/v1/deliveries", params={"state": "dead"}).json()
            return next((r for r in rows if r["settlement_id"] == sid), None)

        row = wait_for(dead, 30, what="the commit dead-lettered")
        button = f"button[data-delivery='{row['id']}']"
        with console_tab(browser, daemon.url, BACKEND) as reader:  # no admin scope
            reader.page.goto("/ui/#/deliveries")
            reader.page.get_by_text(f"#{row['id']}", exact=True).wait_for(timeout=WAIT_MS)
            assert reader.page.locator(button).count() == 0
            assert reader.page.get_by_text("Replay needs a token with the admin scope").count() == 1
            sent = reader.page.evaluate(
                """async (id) => {
                    const t = sessionStorage.getItem("finality.token");
                    const r = await fetch(`/v1/deliveries/${id}/replay`, {method: "POST",
                        headers: {"Content-Type": "application/json", Authorization: `Bearer ${t}`},
                        body: "{}"});
                    return [r.status, await r.text()];
                }""",
                row["id"],
            )
            assert sent[0] == 403 and "admin" in sent[1]
            reader.shot("deliveries-read-only")
            own_origin_only(reader, daemon)
        assert dead() is not None and failing.effects() == []

        failing.fail_with = None
        with console_tab(browser, daemon.url, OPS) as admin:
            admin.page.goto("/ui/#/deliveries")
            admin.page.locator(button).click(timeout=WAIT_MS)
            wait_for(lambda: failing.effects(), 20, what="the replayed commit")
            cell = admin.page.locator("tr", has=admin.page.get_by_text(f"#{row['id']}", exact=True))
            cell.locator("[data-field=state]", has_text="delivered").wait_for(timeout=WAIT_MS)
            admin.shot("deliveries-admin")
            own_origin_only(admin, daemon)
        [effect] = failing.effects()
        assert effect["type"] == "commit" and effect["settlement_id"] == sid


def test_markup_in_a_reference_and_in_dependent_state_is_shown_as_text(
    browser: Browser, daemon: Daemon, module_anvil: Anvil
) -> None:
    payment = daemon.post(
        "/v1/settlements",
        {
            "kind": "evm_payment",
            "chain": "local",
            "to": module_anvil.accounts[5].lower(),
            "asset": "native",
            "amount": "1000",
            "reference": HOSTILE,
            "dependent_state": {HOSTILE: HOSTILE},
        },
    )
    assert payment.status_code == 201, payment.text
    pid = payment.json()["settlement_id"]
    with console_tab(browser, daemon.url, BACKEND) as tab:
        tab.page.goto("/ui/#/settlements")
        tab.page.fill("#f-kind", "evm_payment")
        tab.page.press("#f-kind", "Enter")  # the filters by keyboard
        tab.page.get_by_text(HOSTILE, exact=True).first.wait_for(timeout=WAIT_MS)
        tab.page.get_by_role("link", name=pid).focus()
        tab.page.keyboard.press("Enter")
        tab.page.get_by_text("Dependent state").wait_for(timeout=WAIT_MS)
        tab.page.locator("pre", has_text=HOSTILE).first.wait_for(timeout=WAIT_MS)
        tab.page.goto("/ui/#/chains")  # and found again by its reference, from the search box
        tab.page.fill("#search-q", HOSTILE)
        tab.page.press("#search-q", "Enter")
        tab.page.get_by_role("heading", name=f"Settlement {pid}").wait_for(timeout=WAIT_MS)
        tab.page.locator("dd", has_text=HOSTILE).first.wait_for(timeout=WAIT_MS)
        scripts = tab.page.evaluate("[...document.scripts].map((s) => s.src)")
        assert scripts == [f"{daemon.url}/ui/console.js"]
        assert tab.page.locator("main img").count() == 0
        tab.shot("hostile-reference")
        own_origin_only(tab, daemon)


def test_a_live_event_does_not_take_a_focused_link_from_a_keyboard_user(
    browser: Browser, daemon: Daemon, module_anvil: Anvil
) -> None:
    """Blocks mined while a link in the list has focus: the list is redrawn, and Enter still
    opens that link's settlement (focus is not dropped onto the page's body)."""
    sid, _ = mined_settlement(daemon, module_anvil)
    with console_tab(browser, daemon.url, BACKEND) as tab:
        tab.page.goto("/ui/#/settlements")
        link = tab.page.get_by_role("link", name=sid)
        link.wait_for(timeout=WAIT_MS)
        link.focus()
        before = link.element_handle()
        seen = tab.page.locator("#stream-state").get_attribute("data-last-event")
        module_anvil.mine(2)  # head events: the page redraws its list from them
        tab.page.wait_for_function(
            "([old, seen]) => !old.isConnected"
            " && document.getElementById('stream-state').dataset.lastEvent !== seen",
            arg=[before, seen],
            timeout=WAIT_MS,
        )
        focused = tab.page.evaluate("document.activeElement.getAttribute('href')")
        assert focused == f"#/settlement/{sid}"
        tab.page.keyboard.press("Enter")
        tab.page.get_by_role("heading", name=f"Settlement {sid}").wait_for(timeout=WAIT_MS)
        own_origin_only(tab, daemon)


def test_the_charts_and_instances_pages_draw_from_the_api(browser: Browser, daemon: Daemon) -> None:
    stats = daemon.get("/v1/stats/time-to-final").json()["chains"]
    assert stats, "an earlier test made settlements final"
    with console_tab(browser, daemon.url, BACKEND) as tab:
        tab.page.goto("/ui/#/charts")
        bars = tab.page.locator("svg.chart rect.bar")
        bars.first.wait_for(timeout=WAIT_MS)
        assert bars.count() == 2 * len(stats)  # median and p95 of each chain
        assert tab.page.locator("svg.chart title").first.text_content() == (
            "Time to final per chain, last hour"
        )
        tab.shot("charts")
        tab.page.goto("/ui/#/instances")  # not admin: told so, nothing listed
        tab.page.get_by_text("lacks the 'admin' scope").wait_for(timeout=WAIT_MS)
        tab.page.fill("#token", OPS)  # the same tab, another token
        tab.page.press("#token", "Enter")
        leases = daemon.get("/v1/leases", headers=bearer(OPS)).json()
        tab.page.get_by_text(leases["instance_id"]).first.wait_for(timeout=WAIT_MS)
        tab.shot("instances")
        own_origin_only(tab, daemon)


def test_a_stream_that_drops_shows_disconnected_then_resumes_where_it_was(
    browser: Browser, daemon: Daemon, module_anvil: Anvil
) -> None:
    with console_tab(browser, daemon.url, BACKEND) as tab:
        state = tab.page.locator("#stream-state")
        tab.page.locator("#stream-state[data-state=live]").wait_for(timeout=WAIT_MS)
        sid, _ = mined_settlement(daemon, module_anvil, confirmations=1)
        daemon.wait_verdict(sid, "FINALITY_CONFIRMED")
        newest = daemon.get("/v1/events/latest").json()["last_event_id"]
        tab.page.locator(f"#stream-state[data-last-event='{newest}']").wait_for(timeout=WAIT_MS)
        before = len(tab.resumed_from)
        daemon.kill9()
        tab.page.locator("#stream-state[data-state=disconnected]").wait_for(timeout=WAIT_MS)
        assert "disconnected" in (state.text_content() or "")
        tab.shot("disconnected")
        daemon.start()
        tab.page.locator("#stream-state[data-state=live]").wait_for(timeout=60_000)
        resumed = tab.resumed_from[before:]
        assert resumed and set(resumed) == {str(newest)}  # every retry resumes after it
        own_origin_only(tab, daemon)


def test_the_workflows_page_shows_the_callers_workflows_with_holder_and_steps_as_text(
    browser: Browser, daemon: Daemon
) -> None:
    made = daemon.http.post(
        f"{daemon.url}/v1/workflows",
        json={"steps": ["reserve", "pay"], "holder": HOSTILE, "lease_s": 600},
    )
    assert made.status_code == 201, made.text
    with console_tab(browser, daemon.url, BACKEND) as tab:
        tab.page.goto("/ui/#/workflows")
        holder = tab.page.locator("[data-field=holder]", has_text="<script>").first
        holder.wait_for(timeout=WAIT_MS)
        assert holder.text_content() == HOSTILE  # the characters, not an element
        row = tab.page.locator("tr", has=holder)
        cells = row.locator("td").all_text_contents()
        assert made.json()["workflow_id"] in cells[0]
        expires = datetime.fromtimestamp(made.json()["lease_expires_at"] / 1000, UTC)
        assert cells[2:] == [
            "1",
            expires.strftime("%Y-%m-%d %H:%M:%SZ"),
            "held (live)",
            "reserve: pendingpay: pending",
            made.json()["verdict"],  # the lock's first grant is its last change yet
        ]
        assert tab.page.locator("main script, main img").count() == 0
        tab.shot("workflows")
        own_origin_only(tab, daemon)
