"""Invoice addresses: BIP-32 public derivation checked against BIP-32's published vectors
and against eth-account's own HD derivation from a mnemonic (an independent implementation:
private derivation, the way a wallet derives the addresses it will spend from)."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest
from eth_account import Account
from eth_account.hdaccount import seed_from_mnemonic
from eth_account.hdaccount.deterministic import HardNode, derive_child_key

from guard.invoice import invoice_state, payment_uri
from guard.settlement import Verdict
from watcher.invoices.xpub import (
    ExtendedKeyError,
    PrivateKeyRefused,
    derive_address,
    parse_extended_public_key,
    parse_template,
)

VECTORS = json.loads((Path(__file__).parents[1] / "vectors/bip32/vector1.json").read_text())
MNEMONIC = "test test test test test test test test test test test junk"  # anvil's default
B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def b58check(payload: bytes) -> str:
    raw = payload + hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4]
    number, text = int.from_bytes(raw, "big"), ""
    while number:
        number, rest = divmod(number, 58)
        text = B58[rest] + text
    return "1" * (len(raw) - len(raw.lstrip(b"\0"))) + text


def account_xpub(mnemonic: str) -> str:
    """The xpub of m/44'/60'/0' computed with eth-account's own CKDpriv (the test's oracle)."""
    Account.enable_unaudited_hdwallet_features()
    seed = seed_from_mnemonic(mnemonic, "")
    master = hmac.new(b"Bitcoin seed", seed, hashlib.sha512).digest()
    key, code = master[:32], master[32:]
    for index in (44, 60, 0):
        key, code = derive_child_key(key, code, HardNode(index))
    public = Account.from_key(key)._key_obj.public_key.to_compressed_bytes()
    body = bytes.fromhex("0488b21e") + b"\x03" + b"\0" * 4 + (2**31).to_bytes(4, "big")
    return b58check(body + code + public)


@pytest.mark.parametrize("step", VECTORS["public_steps"], ids=lambda s: s["parent"])
def test_public_derivation_matches_bip32_test_vector_1(step: dict[str, object]) -> None:
    parent = parse_extended_public_key(str(step["parent_xpub"]))
    expected = parse_extended_public_key(str(step["child_xpub"]))
    child = parent.child(int(str(step["index"])))
    assert (child.key, child.chain_code, child.depth) == (
        expected.key,
        expected.chain_code,
        expected.depth,
    )


def test_addresses_match_eth_accounts_hd_wallet_from_the_same_mnemonic() -> None:
    xpub = parse_extended_public_key(account_xpub(MNEMONIC))
    steps = parse_template("m/0/{index}")
    for index in range(5):
        wallet = Account.from_mnemonic(MNEMONIC, account_path=f"m/44'/60'/0'/0/{index}")
        assert derive_address(xpub, steps, index) == wallet.address.lower()
    # anvil's first default account, as every Ethereum developer knows it
    assert derive_address(xpub, steps, 0) == "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"


def test_an_extended_private_key_is_refused_by_name() -> None:
    with pytest.raises(PrivateKeyRefused, match="extended private key"):
        parse_extended_public_key(VECTORS["private"]["xprv"])


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("xpub-not-base58-0OIl", "not base58"),
        (VECTORS["public_steps"][0]["parent_xpub"][:-1] + "x", "checksum"),
    ],
)
def test_a_bad_extended_key_says_why(text: str, problem: str) -> None:
    with pytest.raises(ExtendedKeyError, match=problem):
        parse_extended_public_key(text)


@pytest.mark.parametrize(
    ("template", "problem"),
    [("0/{index}", "start with"), ("m/0'/{index}", "hardened"), ("m/0/1", "exactly one")],
)
def test_a_template_that_cannot_be_derived_publicly_is_refused(template: str, problem: str) -> None:
    with pytest.raises(ExtendedKeyError, match=problem):
        parse_template(template)


def test_payment_uri_is_eip681() -> None:
    to = "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"
    token = "0x5fbdb2315678afecb367f032d93f642f64180aa3"
    assert payment_uri(31337, to, "native", 1000) == (
        "ethereum:0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266@31337?value=1000"
    )
    assert payment_uri(1, to, token, 5) == (
        "ethereum:0x5FbDB2315678afecb367f032d93F642f64180aa3@1/transfer"
        "?address=0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266&uint256=5"
    )


@pytest.mark.parametrize(
    ("previous", "verdict", "paid", "accepted", "state"),
    [
        ("new", Verdict.AWAITING_FINALITY, 0, False, "new"),
        ("new", Verdict.AWAITING_FINALITY, 400, False, "paid_partial"),
        ("paid_partial", Verdict.AWAITING_FINALITY, 1000, False, "processing"),
        ("processing", Verdict.FINALITY_CONFIRMED, 1000, False, "settled"),
        ("processing", Verdict.FINALITY_CONFIRMED, 1500, False, "paid_over"),
        ("new", Verdict.TIMEOUT_TREATED_AS_FAILURE, 0, False, "expired"),
        ("paid_partial", Verdict.TIMEOUT_TREATED_AS_FAILURE, 400, False, "paid_partial"),
        ("expired", Verdict.TIMEOUT_TREATED_AS_FAILURE, 1000, False, "paid_late"),
        ("paid_late", Verdict.TIMEOUT_TREATED_AS_FAILURE, 1000, True, "settled"),
        ("settled", Verdict.AWAITING_FINALITY, 0, False, "invalid"),
        ("invalid", Verdict.FINALITY_CONFIRMED, 1000, False, "settled"),
    ],
)
def test_invoice_states(
    previous: str, verdict: Verdict, paid: int, accepted: bool, state: str
) -> None:
    assert invoice_state(previous, verdict, 1000, paid, accepted) == state
