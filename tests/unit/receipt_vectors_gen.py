"""Regenerates tests/vectors/receipts/ from a real anvil: ``.venv/bin/python -m
tests.unit.receipt_vectors_gen`` (then review the diff: vectors change only on purpose).

Each valid vector is a receipt the daemon's own code built from anvil blocks and signed
with the test signing key; the tampered vectors (``tampered.json``) each change one value
of a valid vector and record the exact reason the verifier gives.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import tempfile
from pathlib import Path
from typing import Any

from guard.errors import ReceiptInvalid
from guard.receipts import Subject, revocation_body
from guard.verify import verify_receipt

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "receipts"


def _write(name: str, description: str, receipt: dict[str, Any], signer: str) -> None:
    verified = verify_receipt(receipt, trusted_signers=[signer])
    vector = {
        "description": description,
        "trusted_signers": [signer],
        "receipt": receipt,
        "expected": {
            "valid": True,
            "kind": verified.kind,
            "digest": verified.digest,
            "signer": verified.signer,
            "summary": verified.facts.summary,
            "claims": list(verified.claims),
            "anchor": list(verified.anchor) if verified.anchor else None,
        },
    }
    (VECTORS / f"{name}.json").write_text(json.dumps(vector, indent=1, sort_keys=True) + "\n")


def _scenarios() -> dict[str, tuple[str, dict[str, Any]]]:
    from tests.integration.receipts_helpers import TxFactory, receipts_for
    from tests.support.anvil import Anvil
    from tests.support.rigs import make_watcher

    out: dict[str, tuple[str, dict[str, Any]]] = {}
    tmp = tempfile.mkdtemp(prefix="fw-vectors-")
    with Anvil("--no-mining") as anvil:
        start = int(anvil.block()["timestamp"], 16) + 10
        # The header chain form (proof.ancestry absent): history proofs have their own
        # vectors (tests/unit/history_vectors_gen.py).
        rig = make_watcher(anvil, f"sqlite:///{tmp}/a.db", receipt_ancestry="headers")
        rig.clock.now = start * 1000
        rig.watcher.poll()
        receipts = receipts_for(rig)
        factories = [TxFactory(anvil, i) for i in range(3)]
        many = [factories[i % 3].send(factories[i % 3].dynamic()) for i in range(20)]
        legacy = TxFactory(anvil, 0)
        timeout_sid = rig.register("0x" + "ab" * 32, timeout_s=20).settlement_id
        anvil.rpc("evm_setNextBlockTimestamp", start + 2)
        anvil.mine(1)  # block 1: 20 type-2 txs
        sid_many = rig.register(many[7], dependent_state={"order": "A-1", "amount": "12.50"})
        single = legacy.send(legacy.legacy())
        anvil.rpc("evm_setNextBlockTimestamp", start + 4)
        anvil.mine(1)  # block 2: one legacy tx
        sid_single = rig.register(single).settlement_id
        reverted = str(
            anvil.rpc(
                "eth_sendTransaction",
                {"from": anvil.accounts[1], "data": "0x60006000fd", "gas": hex(100_000)},
            )
        )
        anvil.rpc("evm_setNextBlockTimestamp", start + 6)
        anvil.mine(1)  # block 3: a reverted contract creation
        sid_reverted = rig.register(reverted).settlement_id
        replacer = TxFactory(anvil, 2)
        watched = replacer.send(replacer.dynamic(max_fee=3 * 10**9))
        sid_replaced = rig.register(watched).settlement_id
        rig.watcher.poll()  # sees the watched tx pending: sender, nonce, signed bytes
        replacer.nonce -= 1
        replacer.send(replacer.dynamic(max_fee=3 * 10**9 + 1))
        for offset in (8, 10, 12, 14, 22, 24):
            anvil.rpc("evm_setNextBlockTimestamp", start + offset)
            anvil.mine(1)  # block 4 holds the replacement; the deadline (+20 s) falls in 7..8
        rig.clock.now = (start + 24) * 1000
        rig.watcher.catch_up()
        receipts.run(rig)

        def latest(sid: str) -> dict[str, Any]:
            return receipts.latest(sid)

        binding = receipts.issuer.binding(rig.settlement(sid_many.settlement_id))
        assert binding is not None
        finality = latest(sid_many.settlement_id)
        out["finality_depth"] = (
            "tx 7 of a 20-tx block (type 2), N=3: headers, receipt and tx proofs",
            finality,
        )
        out["finality_single_legacy_tx"] = (
            "the only tx of its block (legacy, EIP-155): the trie is one leaf",
            latest(sid_single),
        )
        out["failure_reverted"] = (
            "a contract creation that reverted (status 0)",
            latest(sid_reverted),
        )
        out["failure_replaced"] = (
            "replaced by a tx with the same sender and nonce; the watched tx's signed bytes "
            "prove the link",
            latest(sid_replaced),
        )
        rec = rig.settlement(sid_replaced)
        builder = receipts.issuer.builders["local"]
        body = builder.decision_body(dataclasses.replace(rec, raw_tx=None), rig.clock())
        out["failure_replaced_link_claimed"] = (
            "replaced, but the watched tx's bytes were never seen: the link is a claim",
            receipts.signer.sign(body),
        )
        out["timeout_head_proven"] = (
            "timed out; the head at the deadline and its child prove which block was head",
            latest(timeout_sid),
        )
        out["binding"] = ("the dependent state bound at registration", binding)
        subject = Subject(
            finality["settlement_id"], "local", 31337, finality["tx_hash"], receipts.signer.address
        )
        evidence = {"event": "finality_violation", "event_id": 1}
        out["revocation"] = (
            "withdraws finality_depth after a finality violation",
            receipts.signer.sign(
                revocation_body(
                    subject, rig.clock(), finality, "finality violation (vector)", evidence
                )
            ),
        )
        rig.store.close()
    with Anvil("--slots-in-an-epoch", "1") as anvil:
        rig = make_watcher(
            anvil,
            f"sqlite:///{tmp}/b.db",
            confirmations=50,
            finality="finalized",
            receipt_ancestry="headers",
        )
        rig.watcher.poll()
        receipts = receipts_for(rig)
        anvil.mine(3)
        tx = anvil.send()
        anvil.receipt(tx)
        sid = rig.register(tx).settlement_id
        rig.watcher.poll()
        rig.mine_and_poll(2)
        receipts.run(rig)
        out["finality_finalized"] = (
            "final by the node's finalized tag (basis finalized): a stated claim",
            receipts.latest(sid),
        )
        rig.store.close()
    return out


TAMPERS: list[tuple[str, str, list[Any], Any]] = [
    # (name, base vector, path, new value)
    (
        "header_parent_hash",
        "finality_depth",
        ["proof", "headers", 1, "parentHash"],
        "0x" + "11" * 32,
    ),
    ("header_extra_data", "finality_depth", ["proof", "headers", 2, "extraData"], "0x01"),
    ("header_claimed_hash", "finality_depth", ["proof", "headers", 0, "hash"], "0x" + "22" * 32),
    ("header_number_padded", "finality_depth", ["proof", "headers", 0, "number"], "0x01"),
    ("header_dropped", "finality_depth", ["proof", "headers"], "drop-last"),
    ("receipt_proof_node_missing", "finality_depth", ["proof", "receipt_proof"], "drop-last"),
    ("receipt_proof_node_changed", "finality_depth", ["proof", "receipt_proof", 0], "flip-last"),
    ("tx_proof_node_changed", "finality_depth", ["proof", "transaction_proof", 1], "flip-last"),
    ("tx_index_other", "finality_depth", ["proof", "tx_index"], 8),
    ("confirmations_overstated", "finality_depth", ["finality", "confirmations"], 4),
    ("evidence_block", "finality_depth", ["evidence", "facts", "block_hash"], "0x" + "33" * 32),
    ("issued_at_changed", "finality_depth", ["issued_at"], "plus-one"),
    ("digest_changed", "finality_depth", ["digest"], "flip-last"),
    ("signature_changed", "finality_depth", ["signature"], "flip-middle"),
    ("signature_v", "finality_depth", ["signature"], "v-29"),
    ("replaced_raw_tx", "failure_replaced", ["failure", "watched_raw_tx"], "flip-last"),
    ("reverted_as_final", "failure_reverted", ["kind"], "settlement_finality_receipt"),
    ("timeout_deadline", "timeout_head_proven", ["timeout", "deadline"], "plus-one"),
    ("version_2", "binding", ["version"], 2),
]


def _apply(receipt: dict[str, Any], path: list[Any], how: Any) -> dict[str, Any]:
    out = copy.deepcopy(receipt)
    parent: Any = out
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    old = parent[key]
    if how == "drop-last":
        parent[key] = old[:-1]
    elif how == "flip-last":
        parent[key] = old[:-1] + ("0" if old[-1] != "0" else "1")
    elif how == "flip-middle":
        middle = len(old) // 2
        parent[key] = old[:middle] + ("0" if old[middle] != "0" else "1") + old[middle + 1 :]
    elif how == "plus-one":
        parent[key] = old + 1
    elif how == "v-29":
        parent[key] = old[:-2] + "1d"
    else:
        parent[key] = how
    return out


def regenerate() -> None:
    """Write every vector file (needs anvil)."""
    from tests.integration.receipts_helpers import SIGNING_KEY
    from watcher.receipts.signer import Signer

    signer = Signer(SIGNING_KEY, "env").address
    VECTORS.mkdir(parents=True, exist_ok=True)
    scenarios = _scenarios()
    for name, (description, receipt) in scenarios.items():
        _write(name, description, receipt, signer)
    tampered = []
    for name, base, path, how in TAMPERS:
        receipt = _apply(scenarios[base][1], path, how)
        try:
            verify_receipt(receipt, trusted_signers=[signer])
        except ReceiptInvalid as exc:
            reason = exc.reason
        else:
            raise AssertionError(f"tamper {name} still verifies")
        tampered.append(
            {"name": name, "base": base, "path": path, "change": how, "expected_reason": reason}
        )
    untrusted = {
        "name": "untrusted_signer",
        "base": "finality_depth",
        "path": [],
        "change": None,
        "trusted_signers": ["0x" + "99" * 20],
        "expected_reason": f"signature: signer {signer} is not trusted",
    }
    tampered.append(untrusted)
    (VECTORS / "tampered.json").write_text(json.dumps(tampered, indent=1) + "\n")
    print(f"wrote {len(scenarios)} receipts and {len(tampered)} tampered cases to {VECTORS}")


if __name__ == "__main__":
    regenerate()
