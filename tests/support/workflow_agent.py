"""An agent as its own process, driving a workflow through the daemon's HTTP API with the
client (``watcher.client.FinalityClient``), for the end-to-end handoff tests.

``python -m tests.support.workflow_agent first API TX_HASH LEASE_S``
    registers the tx, creates a workflow (charge, ship, notify; notify idempotent), begins
    ``charge`` bound to the tx's settlement, prints one JSON line (workflow and settlement
    ids), then waits for a line on stdin (the test kills it first, or freezes and thaws
    it); on ``write`` it tries every write under its token and prints their statuses.

``python -m tests.support.workflow_agent successor API WORKFLOW_ID LEASE_S``
    takes over once the lease lets it (a live lease is refused: counted), prints the
    takeover, then follows ``charge``'s recovery until it is ``completed`` or ``failed``
    (each state seen printed, the evidence's receipt checked offline); a completed charge
    is marked completed and the rest run, a failed one is never re-run.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

from watcher.client import FinalityClient, Rejected, verify


def say(**line: Any) -> None:
    print(json.dumps(line), flush=True)


def first(client: FinalityClient, tx_hash: str, lease_s: float) -> None:
    sid = client.register("local", tx_hash, confirmations=3)["settlement_id"]
    wf = client.start_workflow(
        ["charge", "ship", "notify"], "agent-a", lease_s, idempotent_steps=["notify"]
    )
    wid = wf["workflow_id"]
    token = wf["lock"]["fencing_token"]
    client.begin_step(
        wid, "charge", token, "charge card for order 812", recovery={"settlement_id": sid}
    )
    say(workflow_id=wid, settlement_id=sid, fencing_token=token)
    if sys.stdin.readline().strip() != "write":
        return
    statuses = []
    writes: list[Callable[[], object]] = [
        lambda: client.renew_workflow_lease(wid, token),
        lambda: client.complete_step(wid, "charge", token),
        lambda: client.begin_step(wid, "ship", token, "ship order 812"),
        lambda: client.complete_step(wid, "notify", token),
        lambda: client.release_workflow(wid, token),
    ]
    for call in writes:
        try:
            call()
            statuses.append([200, ""])
        except Rejected as exc:
            statuses.append([exc.status, str(exc)])
    say(statuses=statuses)


def successor(client: FinalityClient, wid: str, lease_s: float) -> None:
    refused = 0
    while True:
        try:
            taken = client.take_over_workflow(wid, "agent-b", lease_s)
            break
        except Rejected as exc:
            assert exc.status == 409 and exc.body.get("verdict") == "LOCK_NOT_HELD", exc.body
            refused += 1
            time.sleep(0.1)
    token = taken["fencing_token"]
    states = [r["state"] for r in taken["recovery"]]
    say(
        taken=True,
        refused=refused,
        verdict=taken["verdict"],
        fencing_token=token,
        charge=states,
        receipts=sorted(taken["receipts"]),
    )
    seen = [states[0]]
    deadline = time.monotonic() + 90
    while seen[-1] not in ("completed", "failed"):
        if time.monotonic() > deadline:
            say(timeout=True, seen=seen)
            return
        time.sleep(0.1)
        client.renew_workflow_lease(wid, token)
        entry = client.get_workflow(wid)["recovery"][0]
        if entry["state"] != seen[-1]:
            seen.append(entry["state"])
    receipt = entry["evidence"]["receipt"]
    checked = verify(receipt)
    say(seen=seen, receipt_kind=receipt["kind"], receipt_valid=checked.valid)
    if seen[-1] == "completed":
        effects = {"charge_receipt": checked.receipt.digest if checked.receipt else None}
        client.complete_step(wid, "charge", token, side_effects=effects)
        for step in ("ship", "notify"):
            client.begin_step(wid, step, token, f"{step} order 812")
            client.complete_step(wid, step, token, side_effects={"done": step})
    final = client.get_workflow(wid)
    say(final=[(s["name"], s["state"]) for s in final["steps"]], holder=final["holder"])


def main(argv: list[str]) -> None:
    role, api, subject, lease_s = argv
    with FinalityClient(api) as client:
        if role == "first":
            first(client, subject, float(lease_s))
        else:
            successor(client, subject, float(lease_s))


if __name__ == "__main__":
    main(sys.argv[1:])
