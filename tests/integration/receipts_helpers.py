"""Shared by the receipt tests: signed txs of every type, and a receipts issuer on a Rig.

Transactions are signed here with eth-account using anvil's well-known dev keys, so each
type can be sent raw (legacy, access list, EIP-1559, blob with its sidecar, EIP-7702 with a
signed authorization); anvil mines them like any other. Nothing is mocked.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from eth_account import Account
from eth_utils.address import to_checksum_address

from guard import rlp
from tests.support.anvil import Anvil
from tests.support.rigs import Rig
from watcher.receipts.builder import ReceiptBuilder
from watcher.receipts.component import ReceiptIssuer
from watcher.receipts.signer import Signer
from watcher.store.leaves_store import leaves_store
from watcher.store.receipts_store import ReceiptStore, receipt_store

DEV_KEYS = (
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
)
"""Private keys of anvil's first three accounts (public test keys, worthless)."""

SIGNING_KEY = bytes.fromhex("4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318")
"""The receipts' signing key in tests."""

GWEI = 10**9

ZERO_BLOB_POINT = b"\xc0" + b"\x00" * 47
"""KZG commitment (and proof) of the all-zero blob: the compressed G1 point at infinity."""


class TxFactory:
    """Signs txs of each type from one dev account, tracking its nonce."""

    def __init__(self, anvil: Anvil, account: int = 0) -> None:
        self.anvil = anvil
        self.account = Account.from_key(DEV_KEYS[account])
        assert self.account.address.lower() == anvil.accounts[account].lower()
        self.nonce = int(anvil.rpc("eth_getTransactionCount", self.account.address, "pending"), 16)
        self.to = to_checksum_address(anvil.accounts[1])

    def _base(self, **extra: Any) -> dict[str, Any]:
        tx = {"chainId": 31337, "nonce": self.nonce, "to": self.to, "value": 1, "gas": 100_000}
        tx.update(extra)
        self.nonce += 1
        return tx

    def legacy(self) -> bytes:
        """Type 0 with an EIP-155 signature."""
        return self._sign(self._base(gasPrice=10 * GWEI))

    def access_list(self) -> bytes:
        """Type 1 (EIP-2930)."""
        slot = "0x" + "00" * 32
        return self._sign(
            self._base(
                gasPrice=10 * GWEI,
                accessList=[{"address": self.to, "storageKeys": [slot]}],
            )
        )

    def dynamic(self, max_fee: int = 10 * GWEI, **extra: Any) -> bytes:
        """Type 2 (EIP-1559)."""
        return self._sign(self._base(maxFeePerGas=max_fee, maxPriorityFeePerGas=1, **extra))

    def blob(self, wrapper: str = "7594") -> bytes:
        """Type 3 (EIP-4844) in its network form, one all-zero blob as sidecar.

        The KZG commitment and every proof of the zero blob are the point at infinity, so the
        sidecar is built without a KZG library (eth-account's takes seconds per blob).
        ``wrapper``: ``"4844"`` ([tx, blobs, commitments, proofs], Cancun and Prague) or
        ``"7594"`` ([tx, 1, blobs, commitments, cell_proofs], Osaka)."""
        commitment = ZERO_BLOB_POINT
        versioned = b"\x01" + hashlib.sha256(commitment).digest()[1:]
        tx = self._base(
            type=3,
            maxFeePerGas=10 * GWEI,
            maxPriorityFeePerGas=1,
            maxFeePerBlobGas=10 * GWEI,
            blobVersionedHashes=[versioned],
        )
        canonical = self._sign(tx)
        fields = rlp.decode(canonical[1:])
        blob = b"\x00" * 131072
        if wrapper == "4844":
            network: list[rlp.Item] = [fields, [blob], [commitment], [ZERO_BLOB_POINT]]
        else:
            network = [fields, b"\x01", [blob], [commitment], [ZERO_BLOB_POINT] * 128]
        return b"\x03" + rlp.encode(network)

    def set_code(self) -> bytes:
        """Type 4 (EIP-7702) carrying one authorization signed by this account."""
        auth = self.account.sign_authorization(
            {
                "chainId": 31337,
                "address": to_checksum_address(self.anvil.accounts[2]),
                "nonce": self.nonce + 1,
            }
        )
        return self._sign(
            self._base(maxFeePerGas=10 * GWEI, maxPriorityFeePerGas=1, authorizationList=[auth])
        )

    def _sign(self, tx: dict[str, Any]) -> bytes:
        return bytes(self.account.sign_transaction(tx).raw_transaction)

    def send(self, raw: bytes) -> str:
        """Broadcast; returns the tx hash."""
        return str(self.anvil.rpc("eth_sendRawTransaction", "0x" + raw.hex()))


@dataclass
class Receipts:
    """A receipts issuer working on a Rig's store and node."""

    issuer: ReceiptIssuer
    store: ReceiptStore
    signer: Signer

    def run(self, rig: Rig) -> None:
        """What the daemon does after a poll."""
        self.issuer.after_poll(rig.config.name)

    def latest(self, settlement_id: str) -> dict[str, Any]:
        """The latest current decision receipt, which must exist."""
        record = self.store.latest(settlement_id)
        assert record is not None, f"no receipt for {settlement_id}"
        return record.body


def receipts_for(rig: Rig, store: ReceiptStore | None = None) -> Receipts:
    """A fresh issuer (cursor at 0, as after a restart) over the rig's store and node
    (``store``: a receipt store over it of the test's own, e.g. one noting its writes)."""
    signer = Signer(SIGNING_KEY, "env")
    store = receipt_store(rig.store) if store is None else store
    store.use_signer(signer.address, signer.source, rig.clock())
    builder = ReceiptBuilder(
        rig.config, rig.client, signer.address, rig.store.compact_headers, leaves_store(rig.store)
    )
    issuer = ReceiptIssuer(signer, store, {rig.config.name: builder}, rig.clock)
    return Receipts(issuer, store, signer)


def registered_in_one_block(rig: Rig, count: int) -> list[str]:
    """``count`` txs of every type the factory signs, from three accounts, registered while
    pending and mined together in one block (automine off meanwhile); their settlement ids."""
    factories = [TxFactory(rig.anvil, account) for account in range(3)]
    rig.anvil.rpc("evm_setAutomine", False)
    try:
        hashes = [factories[i % 3].send(factories[i % 3].dynamic()) for i in range(count)]
        ids = [rig.register(h).settlement_id for h in hashes]
        rig.anvil.mine(1)
    finally:
        rig.anvil.rpc("evm_setAutomine", True)
    return ids
