"""BIP-32 public derivation: the fresh address of each invoice, from an extended public key.

The operator configures an account-level extended **public** key (``xpub…``, or ``tpub…``
for test networks) and a derivation template such as ``m/0/{index}``, relative to that key.
Only non-hardened public derivation (CKDpub) is possible from a public key, which is the
point: the watcher can derive every address and spend none. An extended private key
(``xprv``/``tprv``) is refused when parsed, so it is never kept.

An Ethereum address is the last 20 bytes of keccak256 of the uncompressed public key
without its ``04`` prefix.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

from coincurve import PublicKey

from guard.hashing import keccak256

_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_PUBLIC = {bytes.fromhex("0488b21e"): "xpub", bytes.fromhex("043587cf"): "tpub"}
_PRIVATE = {bytes.fromhex("0488ade4"): "xprv", bytes.fromhex("04358394"): "tprv"}
_ORDER = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
_HARDENED = 2**31
_STEP = re.compile(r"\d+|\{index\}")


class ExtendedKeyError(ValueError):
    """An extended key or derivation template that cannot be used (the message says why)."""


class PrivateKeyRefused(ExtendedKeyError):
    """An extended *private* key where a public one belongs."""


@dataclass(frozen=True)
class ExtendedPublicKey:
    """A parsed BIP-32 extended public key."""

    key: bytes
    """The compressed secp256k1 public key (33 bytes)."""
    chain_code: bytes
    """The chain code (32 bytes)."""
    depth: int
    """Depth from the master key (0 for the master)."""

    def child(self, index: int) -> ExtendedPublicKey:
        """CKDpub: the non-hardened child ``index``; raises :class:`ExtendedKeyError` for a
        hardened index or the (astronomically rare) invalid child, which BIP-32 says to skip."""
        if not 0 <= index < _HARDENED:
            raise ExtendedKeyError(f"index {index}: public derivation needs 0 <= index < 2**31")
        mac = hmac.new(self.chain_code, self.key + index.to_bytes(4, "big"), hashlib.sha512)
        digest = mac.digest()
        tweak, code = digest[:32], digest[32:]
        if int.from_bytes(tweak, "big") >= _ORDER:
            raise ExtendedKeyError(f"index {index}: invalid child (skip it)")
        try:
            point = PublicKey(self.key).add(tweak)
        except ValueError as exc:  # the point at infinity
            raise ExtendedKeyError(f"index {index}: invalid child (skip it)") from exc
        return ExtendedPublicKey(point.format(compressed=True), code, self.depth + 1)

    def address(self) -> str:
        """The Ethereum address of this key (lower-case 0x)."""
        raw = PublicKey(self.key).format(compressed=False)[1:]
        return "0x" + keccak256(raw)[-20:].hex()


def parse_extended_public_key(text: str) -> ExtendedPublicKey:
    """An ``xpub``/``tpub`` string as a key; raises :class:`PrivateKeyRefused` for an
    ``xprv``/``tprv`` and :class:`ExtendedKeyError` for anything else that is not one."""
    raw = _b58check_decode(text.strip())
    if len(raw) != 78:
        raise ExtendedKeyError(f"an extended key is 78 bytes, this one {len(raw)}")
    version, depth, key, code = raw[:4], raw[4], raw[45:], raw[13:45]
    if version in _PRIVATE:
        raise PrivateKeyRefused(
            f"this is an extended private key ({_PRIVATE[version]}…); give the account's "
            "extended public key (xpub…): the watcher never holds a key that can spend"
        )
    if version not in _PUBLIC:
        raise ExtendedKeyError(f"unknown version bytes 0x{version.hex()} (expected xpub or tpub)")
    try:
        PublicKey(key)
    except ValueError as exc:
        raise ExtendedKeyError("its public key is not a point of secp256k1") from exc
    return ExtendedPublicKey(key, code, depth)


def parse_template(template: str) -> list[int | None]:
    """``m/0/{index}`` as steps (None: the invoice's index); exactly one ``{index}`` step,
    and no hardened step (a public key cannot derive one)."""
    parts = template.strip().split("/")
    if not parts or parts[0] != "m":
        raise ExtendedKeyError(f"{template!r}: must start with 'm/' (relative to the xpub)")
    steps: list[int | None] = []
    for part in parts[1:]:
        if _STEP.fullmatch(part) is None:
            raise ExtendedKeyError(
                f"{template!r}: step {part!r} is not a number or {{index}} (hardened steps"
                " cannot be derived from a public key)"
            )
        steps.append(None if part == "{index}" else int(part))
    if steps.count(None) != 1:
        raise ExtendedKeyError(f"{template!r}: needs exactly one {{index}} step")
    if any(s is not None and s >= _HARDENED for s in steps):
        raise ExtendedKeyError(f"{template!r}: a step is a hardened index")
    return steps


def derive_address(xpub: ExtendedPublicKey, steps: list[int | None], index: int) -> str:
    """The address at ``index`` of the template ``steps`` below ``xpub``."""
    key = xpub
    for step in steps:
        key = key.child(index if step is None else step)
    return key.address()


def key_id(text: str) -> str:
    """A short stable name of an extended key (16 hex of sha256): invoices' indexes are
    counted per key, so a new key starts at 0 and no address is derived twice."""
    return hashlib.sha256(text.strip().encode()).hexdigest()[:16]


def _b58check_decode(text: str) -> bytes:
    if not text or any(c not in _B58 for c in text):
        raise ExtendedKeyError("not base58 text")
    number = 0
    for c in text:
        number = number * 58 + _B58.index(c)
    body = number.to_bytes((number.bit_length() + 7) // 8, "big")
    pad = len(text) - len(text.lstrip("1"))
    raw = b"\x00" * pad + body
    if len(raw) < 5:
        raise ExtendedKeyError("too short")
    payload, check = raw[:-4], raw[-4:]
    if hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4] != check:
        raise ExtendedKeyError("base58 checksum does not match (a typo?)")
    return payload
