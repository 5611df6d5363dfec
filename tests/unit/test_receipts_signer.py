"""Where the signing key comes from, and what a signature over a receipt body is."""

from __future__ import annotations

import json
import logging
import stat
from pathlib import Path

import pytest
from eth_account import Account

from guard.errors import ReceiptInvalid
from guard.receipt_format import body_hashes
from guard.receipts import BindingTerms, Subject, binding_body
from guard.verify import verify_receipt
from watcher.config.sections import SigningConfig
from watcher.receipts.signer import Signer, SigningKeyError, load_signer

KEY = "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
ADDRESS = Account.from_key(KEY).address.lower()
LOCAL = [("local", 31337)]


def _body(signer: str) -> dict[str, object]:
    subject = Subject("stl_x", "local", 31337, "0x" + "ab" * 32, signer)
    terms = BindingTerms("sha256:" + "00" * 32, 3, "depth", 60_000, 1_000, 61_000)
    return binding_body(subject, 2_000, terms)


def test_key_from_the_environment(tmp_path: Path) -> None:
    config = SigningConfig(dev_key_file=str(tmp_path / "dev"))
    signer = load_signer(config, [("ethereum", 1)], {"FINALITY_SIGNING_KEY": "0x" + KEY})
    assert (signer.address, signer.source) == (ADDRESS, "env")
    assert KEY not in repr(signer)
    assert not (tmp_path / "dev").exists()


def test_bad_key_is_refused_without_echoing_it() -> None:
    with pytest.raises(SigningKeyError) as caught:
        load_signer(SigningConfig(), LOCAL, {"FINALITY_SIGNING_KEY": "0x1234zz"})
    assert "1234zz" not in str(caught.value)
    assert "FINALITY_SIGNING_KEY" in str(caught.value)


def test_key_from_an_encrypted_keystore(tmp_path: Path) -> None:
    keystore = tmp_path / "key.json"
    keystore.write_text(json.dumps(Account.encrypt(bytes.fromhex(KEY), "pw", iterations=2)))
    config = SigningConfig(keystore=str(keystore))
    signer = load_signer(config, [("ethereum", 1)], {"FINALITY_KEYSTORE_PASSWORD": "pw"})
    assert (signer.address, signer.source) == (ADDRESS, "keystore")
    with pytest.raises(SigningKeyError, match="cannot decrypt"):
        load_signer(config, [("ethereum", 1)], {"FINALITY_KEYSTORE_PASSWORD": "wrong"})
    with pytest.raises(SigningKeyError, match="FINALITY_KEYSTORE_PASSWORD"):
        load_signer(config, [("ethereum", 1)], {})


def test_dev_key_only_when_every_chain_is_local(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "dev-key"
    config = SigningConfig(dev_key_file=str(path))
    with caplog.at_level(logging.WARNING, logger="finality.signer"):
        first = load_signer(config, [("local", 31337), ("hardhat", 1337)], {})
    assert first.source == "dev"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "DEVELOPMENT key" in caplog.text and first.address in caplog.text
    again = load_signer(config, LOCAL, {})
    assert again.address == first.address  # generated once, then reused

    with pytest.raises(SigningKeyError) as caught:
        load_signer(config, [("local", 31337), ("base", 8453)], {})
    message = str(caught.value)
    assert "base (8453)" in message and "FINALITY_SIGNING_KEY" in message
    assert "\n" not in message


def test_signature_recovers_the_signer_and_binds_the_body() -> None:
    signer = Signer(bytes.fromhex(KEY), "env")
    receipt = signer.sign(_body(signer.address))
    verified = verify_receipt(receipt, trusted_signers=[ADDRESS.upper().replace("0X", "0x")])
    assert verified.signer == ADDRESS
    with pytest.raises(ValueError, match="names signer"):
        signer.sign(_body("0x" + "00" * 20))


def test_the_self_check_reuses_the_sealed_hashes_and_still_checks_the_seal() -> None:
    signer = Signer(bytes.fromhex(KEY), "env")
    body = _body(signer.address)
    receipt, hashes = signer.seal(body)
    assert hashes == body_hashes(body)  # exactly what a verifier computes from the body
    assert verify_receipt(receipt, [ADDRESS], signed_hashes=hashes) == verify_receipt(
        receipt, [ADDRESS]
    )
    # The hashes of another body: the digest field no longer matches, nor would the signature.
    other = body_hashes(_body(signer.address) | {"issued_at": 2_001})
    with pytest.raises(ReceiptInvalid, match="digest"):
        verify_receipt(receipt, [ADDRESS], signed_hashes=other)
    with pytest.raises(ReceiptInvalid, match="signature: recovers"):
        verify_receipt(receipt, [ADDRESS], signed_hashes=(receipt["digest"], other[1]))
