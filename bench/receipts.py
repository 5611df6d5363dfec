"""Benchmarks of the signed receipts, run by hand: ``python -m bench.receipts``.

Every figure is printed beside a baseline measured in the same run, against a real anvil:

* building a finality receipt for a tx in a block of 500 txs (target <= 150 ms): fetching
  the headers, the block's receipts (``eth_getBlockReceipts``) beside the block's tx objects
  (``eth_getBlockByHash(hash, true)``), rebuilding each signed tx from its object, both tries
  and the proofs, signing, and checking the result with the offline verifier; against the
  previous way (the same, but the 500 signed txs fetched with ``eth_getRawTransactionByHash``,
  batched, after the receipts) and the naive way: one ``eth_getTransactionReceipt`` and one
  ``eth_getRawTransactionByHash`` per tx, tries built key by key with py-trie;
* verifying a receipt with 64 headers (target <= 10 ms) with ``guard.verify_receipt``;
  against the same checks assembled from the usual libraries (pyrlp, py-trie's proof
  walk, eth-account's typed-data recovery);
* the size of a receipt for N = 64 (JSON, and gzipped), beside N = 3.
"""

from __future__ import annotations

import argparse
import gzip
import json
import tempfile
from typing import Any

import watcher.receipts.builder
from bench.common import Anvil, median_ms
from chains.proofs import (
    BlockTries,
    Trie,
    TxObjectCache,
    encode_receipt,
    fetch_block_tries,
    fetch_receipts_and_block,
    index_key,
)
from chains.rpc import connect
from guard.headers import OPTIONAL_FIELDS, QUANTITY, REQUIRED_FIELDS
from guard.receipts import body_of, typed_data
from guard.settlement import Verdict
from guard.tx_encode import encode_checked
from guard.verify import verify_receipt
from tests.integration.receipts_helpers import TxFactory, receipts_for
from tests.support.rigs import make_watcher
from watcher.receipts.builder import ReceiptBuilder


def _chain_with_block_of(anvil: Anvil, count: int) -> list[str]:
    """Block 1 holds ``count`` transfers (from three accounts); returns their hashes."""
    factories = [TxFactory(anvil, i) for i in range(3)]
    raws = [factories[i % 3].dynamic() for i in range(count)]
    hashes = [factories[0].send(raw) for raw in raws]
    anvil.mine(1)
    assert len(anvil.block(1)["transactions"]) == count, "block 1 did not take every tx"
    return hashes


def _previous_tries(client: Any, block: Any, cache: Any = None) -> BlockTries:
    """The tries as built before tx objects were used: receipts, then 500 raw txs."""
    answers = client.raw_block_receipts(block["hash"])
    receipts = Trie([encode_receipt(r) for r in answers])
    hashes = [str(r["transactionHash"]) for r in answers]
    txs = Trie([bytes.fromhex(r[2:]) for r in client.raw_transactions(hashes)])
    assert "0x" + receipts.root.hex() == block["receiptsRoot"]
    assert "0x" + txs.root.hex() == block["transactionsRoot"]
    return BlockTries(str(block["hash"]), hashes, receipts, txs, "raw")


def _naive_build(url: str, hashes: list[str], index: int) -> None:
    """Per-tx calls, and tries built key by key (py-trie), as a first implementation would."""
    from trie.hexary import HexaryTrie

    client = connect(url)
    receipts = [client.call("eth_getTransactionReceipt", [h]) for h in hashes]
    raws = [client.call("eth_getRawTransactionByHash", [h]) for h in hashes]
    receipt_trie, tx_trie = HexaryTrie({}), HexaryTrie({})
    for i, (receipt, raw) in enumerate(zip(receipts, raws, strict=True)):
        receipt_trie[index_key(i)] = encode_receipt(receipt)
        tx_trie[index_key(i)] = bytes.fromhex(raw[2:])
    receipt_trie.get_proof(index_key(index))
    tx_trie.get_proof(index_key(index))


def _naive_verify(receipt: dict[str, Any]) -> None:
    """The receipt's checks with pyrlp, py-trie and eth-account (no own code)."""
    import rlp
    from eth_account import Account
    from eth_account.messages import encode_typed_data
    from eth_utils.crypto import keccak
    from trie.hexary import HexaryTrie

    previous = None
    for header in receipt["proof"]["headers"]:
        fields = []
        for name, kind in (*REQUIRED_FIELDS, *OPTIONAL_FIELDS):
            if name in header:
                value = header[name]
                fields.append(
                    rlp.sedes.big_endian_int.serialize(int(value, 16))
                    if kind == QUANTITY
                    else bytes.fromhex(value[2:])
                )
        computed = "0x" + keccak(rlp.encode(fields)).hex()
        assert computed == header["hash"]
        assert previous is None or header["parentHash"] == previous
        previous = computed
    first = receipt["proof"]["headers"][0]
    key = index_key(receipt["proof"]["tx_index"])
    for root, nodes in (
        (first["receiptsRoot"], receipt["proof"]["receipt_proof"]),
        (first["transactionsRoot"], receipt["proof"]["transaction_proof"]),
    ):
        proof = [rlp.decode(bytes.fromhex(n[2:])) for n in nodes]
        assert HexaryTrie.get_from_proof(bytes.fromhex(root[2:]), key, proof)
    message = encode_typed_data(full_message=typed_data(body_of(receipt)))
    signer = Account.recover_message(message, signature=receipt["signature"])
    assert signer.lower() == receipt["signer"]


def build_500(runs: int) -> None:
    with Anvil("--no-mining") as anvil:
        hashes = _chain_with_block_of(anvil, 500)
        watched = 250
        rig = make_watcher(anvil, f"sqlite:///{tempfile.mkdtemp()}/b.db", confirmations=3)
        receipts = receipts_for(rig)  # as in the daemon: the builder sees what the tracker reads
        builder = receipts.issuer.builders["local"]
        assert isinstance(builder, ReceiptBuilder)
        rig.watcher.poll()
        sid = rig.register(hashes[watched]).settlement_id
        anvil.mine(2)
        rig.watcher.catch_up()
        rec = rig.settlement(sid)
        assert rec.verdict == Verdict.FINALITY_CONFIRMED, rec.verdict

        def ours(watched_rec: Any = rec, cold: bool = True) -> None:
            if cold:
                builder._tries.clear()  # the block's tries not built yet: fetch and build
            receipt = receipts.signer.sign(builder.decision_body(watched_rec, rig.clock()))
            verify_receipt(receipt, trusted_signers=[receipts.signer.address])

        ours()  # warm the HTTP connections, as in the daemon
        cold = median_ms(ours, runs)
        held, builder.tx_objects = builder.tx_objects, TxObjectCache()  # as after a restart
        ours()
        unheld = median_ms(ours, runs)
        builder.tx_objects = held
        setattr(watcher.receipts.builder, "fetch_block_tries", _previous_tries)  # noqa: B010
        try:
            ours()
            previous = median_ms(ours, runs)
        finally:
            setattr(watcher.receipts.builder, "fetch_block_tries", fetch_block_tries)  # noqa: B010
        other = rig.register(hashes[251]).settlement_id
        rig.watcher.catch_up()
        warm = median_ms(lambda: ours(rig.settlement(other), cold=False), runs)
        client = builder.client
        block = client.raw_blocks([1])[0]
        assert block is not None
        block_hash = str(block["hash"])
        assert fetch_block_tries(client, block).tx_source == "local"

        def fetch_before() -> tuple[Any, Any]:
            return client.raw_block_receipts(block_hash), client.raw_transactions(hashes)

        def fetch_now() -> tuple[Any, Any]:
            return fetch_receipts_and_block(client, block_hash)

        node_before = median_ms(fetch_before, runs)
        node_now = median_ms(fetch_now, runs)
        answers, full = fetch_now()
        body = builder.decision_body(rec, rig.clock())

        def compute() -> None:
            receipts_trie = Trie([encode_receipt(r) for r in answers])
            txs_trie = Trie([encode_checked(tx).committed for tx in full["transactions"]])
            assert receipts_trie.root.hex() == block["receiptsRoot"][2:]
            assert txs_trie.root.hex() == block["transactionsRoot"][2:]
            receipts_trie.proof(watched), txs_trie.proof(watched)
            receipt = receipts.signer.sign(body)
            verify_receipt(receipt, trusted_signers=[receipts.signer.address])

        own = median_ms(compute, runs)
        naive = median_ms(lambda: _naive_build(anvil.url, hashes, watched), max(1, runs // 3))
        print("== building a finality receipt, tx 250 of a 500-tx block (target <= 150 ms)")
        print(f"   ours, end to end, first tx of the block: {cold:7.1f} ms")
        print("     (tx objects kept from head tracking: one eth_getBlockReceipts call)")
        print(f"   ours, tx objects not held (after a restart): {unheld:7.1f} ms")
        print(f"     anvil serving receipts beside the block's tx objects: {node_now:7.1f} ms")
        print(f"     our work (rebuild 500 txs, both tries, proofs, sign, verify): {own:7.1f} ms")
        print(f"   ours, another tx of the same block (tries cached): {warm:7.1f} ms")
        print(
            f"   previous, end to end (500 raw txs fetched after the receipts): {previous:7.1f} ms"
        )
        print(f"     anvil serving receipts, then 500 raw txs: {node_before:7.1f} ms")
        print(f"   naive, end to end: {naive:7.1f} ms  (1,000 single requests, py-trie key by key)")
        print(f"   ratio (previous / ours, end to end): {previous / cold:5.2f}x")
        print(f"   ratio (naive / ours, end to end): {naive / cold:5.1f}x")
        rig.store.close()


def verify_64(runs: int) -> None:
    with Anvil() as anvil:
        sizes = {}
        receipts_by_n = {}
        for n in (3, 64):
            rig = make_watcher(anvil, f"sqlite:///{tempfile.mkdtemp()}/v.db", confirmations=n)
            rig.watcher.poll()
            tx = anvil.send()
            anvil.receipt(tx)
            sid = rig.register(tx).settlement_id
            anvil.mine(n - 1)
            rig.watcher.catch_up()
            receipts = receipts_for(rig)
            receipts.run(rig)
            receipt = receipts.latest(sid)
            assert len(receipt["proof"]["headers"]) == n
            text = json.dumps(receipt, separators=(",", ":")).encode()
            sizes[n] = (len(text), len(gzip.compress(text)))
            receipts_by_n[n] = receipt
            rig.store.close()
        receipt = receipts_by_n[64]
        signer = receipt["signer"]
        mine = median_ms(lambda: verify_receipt(receipt, trusted_signers=[signer]), runs)
        naive = median_ms(lambda: _naive_verify(receipt), max(1, runs // 5))
        print("== verifying a receipt with 64 headers (target <= 10 ms)")
        print(f"   ours:  {mine:7.2f} ms  (guard.verify_receipt: own RLP, headers, MPT walk)")
        print(f"   naive: {naive:7.2f} ms  (pyrlp + py-trie + eth-account recover_message)")
        print(f"   ratio: {naive / mine:5.1f}x")
        print("== receipt size (compact JSON; gzipped)")
        for n, (raw, packed) in sizes.items():
            print(f"   N = {n:2d}: {raw / 1024:6.1f} KiB; {packed / 1024:5.1f} KiB gzipped")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15, help="timed runs per figure (median)")
    parser.add_argument("--only", choices=["build", "verify"], help="one benchmark only")
    args = parser.parse_args()
    if args.only in (None, "build"):
        build_500(args.runs)
    if args.only in (None, "verify"):
        verify_64(args.runs * 4)


if __name__ == "__main__":
    main()
