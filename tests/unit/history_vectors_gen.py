"""Regenerates the receipt vectors with a ``proof.ancestry`` (tests/vectors/receipts/):
``.venv/bin/python -m tests.unit.history_vectors_gen`` (needs anvil; review the diff).

* ``finality_history_storage``: tx 1 of a 3-tx block at depth 64 on anvil's default
  hardfork, which has the EIP-2935 history contract: the inclusion header, block 64's
  header and the contract's account and storage proofs instead of 64 headers;
* ``finality_header_chain_no_contract``: the same at depth 12 on a Cancun anvil, which has
  no history contract: the header chain, and ``proof.ancestry`` saying why.

Both are built by the daemon's own code (the watcher, the receipts component) and signed
with the test key; tests/unit/test_history_ancestry.py tampers with the first.
"""

from __future__ import annotations

import tempfile

from tests.unit.receipt_vectors_gen import _write


def _receipt(fork: tuple[str, ...], confirmations: int, db: str) -> dict[str, object]:
    from tests.integration.receipts_helpers import TxFactory, receipts_for
    from tests.support.anvil import Anvil
    from tests.support.rigs import make_watcher

    with Anvil("--no-mining", *fork) as anvil:
        rig = make_watcher(anvil, db, confirmations=confirmations)
        rig.watcher.poll()
        factories = [TxFactory(anvil, i) for i in range(3)]
        hashes = [f.send(f.dynamic()) for f in factories]
        sid = rig.register(hashes[1]).settlement_id
        rig.watcher.poll()
        rig.mine_and_poll(confirmations)
        receipts = receipts_for(rig)
        receipts.run(rig)
        body = receipts.latest(sid)
        rig.store.close()
        return body


def regenerate() -> None:
    """Write both vectors (needs anvil)."""
    from tests.integration.receipts_helpers import SIGNING_KEY
    from watcher.receipts.signer import Signer

    signer = Signer(SIGNING_KEY, "env").address
    tmp = tempfile.mkdtemp(prefix="fw-history-vectors-")
    _write(
        "finality_history_storage",
        "tx 1 of a 3-tx block, N=64, anvil's default hardfork: the inclusion header and "
        "proof.ancestry (history_storage: block 64's header, the EIP-2935 contract's account "
        "and storage proofs) instead of 64 headers",
        _receipt((), 64, f"sqlite:///{tmp}/h.db"),
        signer,
    )
    _write(
        "finality_header_chain_no_contract",
        "the same at N=12 on a Cancun anvil (no history contract): the header chain, and "
        "proof.ancestry saying why (header_chain, no_history_contract)",
        _receipt(("--hardfork", "cancun"), 12, f"sqlite:///{tmp}/c.db"),
        signer,
    )


if __name__ == "__main__":
    regenerate()
