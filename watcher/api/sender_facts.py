"""What a caller that broadcast the tx may tell at registration: its sender and nonce, or its
signed bytes. Checked here, so the watcher never needs to look the tx up by hash.

A caller that signed and sent the tx knows ``sender`` and ``nonce`` (and has ``raw_tx``).
Given them, the engine skips the probe (``eth_getTransactionByHash``) and a replacement by
the same sender and nonce stays provable. ``raw_tx`` is the stronger form: its hash must be
``tx_hash`` (keccak256 of the canonical bytes; a blob tx may come with its sidecar), and its
signature gives the sender and nonce, which must agree with ``sender``/``nonce`` when those
are given too. Bare ``sender``/``nonce`` are the caller's word, taken as if a probe had
seen them: a wrong pair makes another tx of that sender and nonce count as a replacement
(SETTLEMENT_FAILED), so a caller that has the signed bytes should give ``raw_tx``.
"""

from __future__ import annotations

from dataclasses import dataclass

from guard.txs import TransactionError, decode_signed


class FieldProblem(ValueError):
    """A field of the registration that does not hold; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class SenderFacts:
    """The checked sender, nonce and signed bytes (all None: the caller gave none)."""

    sender: str | None = None
    nonce: int | None = None
    raw_tx: str | None = None


def _address(value: object) -> str:
    if not isinstance(value, str) or len(value) != 42 or value[:2] not in ("0x", "0X"):
        raise FieldProblem("sender", "must be a 0x-prefixed 20-byte hex address")
    try:
        bytes.fromhex(value[2:])
    except ValueError:
        raise FieldProblem("sender", "must be a 0x-prefixed 20-byte hex address") from None
    return "0x" + value[2:].lower()


def _nonce(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**64:
        raise FieldProblem("nonce", "must be an integer from 0 to 2**64 - 1")
    return value


def sender_facts(
    tx_hash: str, sender: object = None, nonce: object = None, raw_tx: object = None
) -> SenderFacts:
    """Check what the caller gave; raises :class:`FieldProblem` naming the first bad field."""
    if raw_tx is None:
        if sender is None and nonce is None:
            return SenderFacts()
        if sender is None or nonce is None:
            missing = "nonce" if nonce is None else "sender"
            raise FieldProblem(missing, "sender and nonce go together (or give raw_tx)")
        return SenderFacts(_address(sender), _nonce(nonce))
    if not isinstance(raw_tx, str) or raw_tx[:2] != "0x" or len(raw_tx) < 4:
        raise FieldProblem("raw_tx", "must be the signed tx as 0x hex")
    try:
        signed = decode_signed(bytes.fromhex(raw_tx[2:]))
    except (ValueError, TransactionError) as exc:
        raise FieldProblem("raw_tx", f"not a signed transaction: {exc}") from None
    if signed.tx_hash != tx_hash:
        raise FieldProblem("raw_tx", f"hashes to {signed.tx_hash}, not tx_hash {tx_hash}")
    if sender is not None and _address(sender) != signed.sender:
        raise FieldProblem("sender", f"raw_tx is signed by {signed.sender}")
    if nonce is not None and _nonce(nonce) != signed.nonce:
        raise FieldProblem("nonce", f"raw_tx has nonce {signed.nonce}")
    return SenderFacts(signed.sender, signed.nonce, raw_tx.lower())
