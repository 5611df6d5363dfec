"""Events stored by an older version keep a failing endpoint's full URL in their payload
(events are now redacted where they are made); the API scrubs them at read time, in the
JSON listing, the SSE stream and a settlement's events alike."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable

import httpx

from tests.support.anvil import Anvil, free_port
from tests.support.daemon import Daemon, toml_value

MARK = "zq9OLDROWSECRET"
"""Planted in the path and query of a configured alert URL, as a provider key would be."""


def test_an_old_event_row_with_a_configured_url_is_scrubbed_on_read(
    anvil: Anvil, make_daemon: Callable[..., Daemon]
) -> None:
    secret_url = f"http://127.0.0.1:{free_port()}/hooks/{MARK}path?key={MARK}query"
    daemon = make_daemon(
        anvil.url, extra_config=f'\n[[alerts]]\ntype = "webhook"\nurl = {toml_value(secret_url)}\n'
    )
    tx = anvil.send()
    sid = daemon.register(tx)["settlement_id"]
    # The row an older version wrote: the full URL in the reason and the endpoint.
    payload = {"endpoint": secret_url, "reason": f"HTTPError for url: {secret_url}", "n": 1}
    db = sqlite3.connect(daemon.db_path, timeout=10.0)
    with db:
        db.execute(
            "INSERT INTO events (chain, settlement_id, kind, severity, payload, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                "local",
                sid,
                "rpc_unhealthy",
                "warning",
                json.dumps(payload),
                int(time.time() * 1000),
            ),
        )
    listing = daemon.get("/v1/events", params={"limit": 1000})
    assert listing.status_code == 200
    old = [e for e in listing.json() if e["kind"] == "rpc_unhealthy" and e["payload"].get("n") == 1]
    assert len(old) == 1, listing.json()
    assert old[0]["payload"]["endpoint"].startswith("http://127.0.0.1:")  # still says which
    own = daemon.get(f"/v1/settlements/{sid}/events")
    with httpx.stream(
        "GET",
        f"{daemon.url}/v1/events",
        headers={"Accept": "text/event-stream"},
        timeout=10,
    ) as stream:
        frames = ""
        for chunk in stream.iter_text():
            frames += chunk
            if '"n":1' in frames:
                break
    assert '"n":1' in frames
    for shown in (listing.text, own.text, frames):
        assert MARK not in shown
