"""The daemon's sender check (chains/block_checks.py ``signed_tx``, a memo over
guard.txs.decode_signed) against an independent oracle: eth-account's
``Account.recover_transaction`` (eth-keys, eth-rlp), on every signed tx of the real blocks
(tests/vectors/real-blocks/: legacy, EIP-2930, EIP-1559, EIP-4844) and every valid official
TransactionTests vector. The memo answers a second read of the same bytes without a second
recovery, and never remembers bytes that failed.
"""

from __future__ import annotations

import pytest
from eth_account import Account

from chains import block_checks
from chains.block_checks import sender_mismatch, signed_tx
from guard.txs import UNSIGNED_TYPES, TransactionError, decode_signed
from tests.unit.test_official_vectors_txs import ALL, _reference
from tests.unit.test_real_blocks import WITH_OBJECTS, WITH_RAW, tx_leaves


def _signed_real_txs() -> list[bytes]:
    found: list[bytes] = []
    for name in (*WITH_OBJECTS, *WITH_RAW):
        found += [raw for raw in tx_leaves(name) if raw[0] not in UNSIGNED_TYPES]
    return found


REAL = _signed_real_txs()


def _valid_official() -> list[bytes]:
    found: list[bytes] = []
    for param in ALL:
        vector = param.values[0]
        if "sender" in _reference(vector) and "exception" not in _reference(vector):
            found.append(bytes.fromhex(vector["txbytes"].removeprefix("0x")))
    return found


OFFICIAL = _valid_official()


def test_the_real_blocks_hold_every_signed_type_the_memo_sees() -> None:
    types = {0 if raw[0] >= 0xC0 else raw[0] for raw in REAL}
    assert types >= {0, 1, 2, 3}
    assert len(OFFICIAL) > 20


@pytest.mark.parametrize("raw", REAL + OFFICIAL, ids=lambda raw: raw[:1].hex() + str(len(raw)))
def test_the_sender_is_the_oracles(raw: bytes) -> None:
    oracle = Account.recover_transaction(raw).lower()
    first = signed_tx(raw)
    assert first.sender == oracle == decode_signed(raw).sender
    again = signed_tx(bytes(bytearray(raw)))  # equal bytes, another object
    if len(raw) <= block_checks.SIGNED_BYTES_HELD:
        assert again is first  # remembered: not recovered again
    else:
        assert again == first and again is not first  # too big to be remembered
    tx_hash, nonce = first.tx_hash, first.nonce
    assert nonce is not None
    assert sender_mismatch(tx_hash, oracle, nonce, raw) is None
    wrong = "0x" + "00" * 20
    assert "its signed bytes say" in str(sender_mismatch(tx_hash, wrong, nonce, raw))


def test_a_tx_whose_signature_fails_is_refused_every_time() -> None:
    raw = next(raw for raw in REAL if raw[-33] == 0xA0)  # s is the last 32 bytes
    broken = raw[:-32] + b"\xff" * 32  # s above n / 2 (EIP-2): no valid signature
    for _ in range(2):
        with pytest.raises(TransactionError):
            signed_tx(broken)
        assert broken not in block_checks._signed
        assert "cannot be read" in str(sender_mismatch("0x" + "11" * 32, "0x", 0, broken))


def test_the_memo_stays_bounded() -> None:
    for raw in REAL * 2 + OFFICIAL:
        signed_tx(raw)
    assert len(block_checks._signed) <= block_checks.SIGNED_HELD
