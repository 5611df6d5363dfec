"""The receipt signing key: where it comes from, and signing with it (EIP-712, eth-account).

Where the key comes from, in this order (``[signing]`` of the config):

1. the environment variable named by ``key_env`` (default ``FINALITY_SIGNING_KEY``): a hex
   private key, with or without ``0x``;
2. an encrypted JSON keystore (``keystore``), its password in the environment variable
   named by ``keystore_password_env``;
3. only when **every** configured chain is a local development chain (chain id 31337 or
   1337): a development key, generated once into ``dev_key_file`` (mode 0600, relative to
   the daemon's working directory) and announced with a loud warning, since anyone who can
   read that file can sign receipts.

Anything else refuses to start with :class:`SigningKeyError`: receipts signed by a key that
was silently generated on a real chain would look like evidence and prove nothing.

The key never leaves this module: not in logs, reprs or error messages.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import coincurve
from eth_account import Account

from guard.receipts import body_hashes
from watcher.config.chains import DEV_CHAIN_IDS as _DEV_CHAIN_IDS
from watcher.config.sections import SigningConfig
from watcher.store.files import FileRefused, check_directory, check_existing

log = logging.getLogger("finality.signer")

DEV_CHAIN_IDS = _DEV_CHAIN_IDS
"""Chain ids of local development chains (anvil, hardhat, ganache, geth --dev)."""


class SigningKeyError(Exception):
    """No usable signing key: the daemon must not start (one-line reason)."""


class Signer:
    """Signs receipt bodies with one key."""

    def __init__(self, private_key: bytes, source: str) -> None:
        account = Account.from_key(private_key)
        self._key = private_key
        self._private = coincurve.PrivateKey(private_key)
        self.address = str(account.address).lower()
        """0x lower-case address of the key."""
        self.source = source
        """``env``, ``keystore`` or ``dev``."""

    def __repr__(self) -> str:
        return f"Signer(address={self.address}, source={self.source})"

    def sign(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The sealed receipt: ``body`` with its digest and EIP-712 signature."""
        return self.seal(body)[0]

    def seal(self, body: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, bytes]]:
        """The sealed receipt, and the body's (digest, EIP-712 message) it was sealed over:
        the issuer's self-check (``verify_receipt(..., signed_hashes=...)``) reuses them
        instead of encoding the body again."""
        if body.get("signer") != self.address:
            raise ValueError(f"body names signer {body.get('signer')}, not {self.address}")
        # The EIP-712 digest computed once here (guard), signed with libsecp256k1 through
        # coincurve (what eth-keys' coincurve backend calls, without its objects: about half
        # the time): the same deterministic, low-s signature eth-account's sign_typed_data
        # gives (tests/integration/test_receipts_batch.py); a block's receipts are signed in a row.
        body_digest, message = body_hashes(body)  # one canonical encoding for both
        signature = self._private.sign_recoverable(message, hasher=None)  # r || s || recid
        sealed = "0x" + signature[:64].hex() + f"{signature[64] + 27:02x}"
        receipt = {**body, "digest": body_digest, "signature": sealed}  # guard's seal
        return receipt, (body_digest, message)


def _parse_key(text: str, what: str) -> bytes:
    value = text.strip().removeprefix("0x").removeprefix("0X")
    try:
        key = bytes.fromhex(value)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise SigningKeyError(f"signing: {what} is not a 32-byte hex private key")
    return key


def load_signer(
    config: SigningConfig,
    chains: Sequence[tuple[str, int]],
    environ: Mapping[str, str] | None = None,
) -> Signer:
    """The signer for a daemon following ``chains`` ((name, chain id) pairs); see the module
    doc for the order. Raises :class:`SigningKeyError` with a one-line reason."""
    env = os.environ if environ is None else environ
    if env.get(config.key_env):
        return Signer(_parse_key(env[config.key_env], f"${config.key_env}"), "env")
    if config.keystore is not None:
        return Signer(_from_keystore(config, env), "keystore")
    non_dev = [f"{name} ({chain_id})" for name, chain_id in chains if chain_id not in DEV_CHAIN_IDS]
    if non_dev:
        raise SigningKeyError(
            f"signing: no signing key: set ${config.key_env} to a hex private key, or "
            "[signing] keystore (password in "
            f"${config.keystore_password_env}); a development key is generated only when "
            f"every chain is a local one (chain id 31337 or 1337), not for {', '.join(non_dev)}"
        )
    return Signer(_dev_key(Path(config.dev_key_file)), "dev")


def _from_keystore(config: SigningConfig, env: Mapping[str, str]) -> bytes:
    path = Path(str(config.keystore))
    password = env.get(config.keystore_password_env)
    if password is None:
        raise SigningKeyError(
            f"signing: keystore {path} needs its password in ${config.keystore_password_env}"
        )
    try:
        encrypted = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SigningKeyError(f"signing: cannot read keystore {path}: {exc.strerror}") from None
    try:
        return bytes(Account.decrypt(encrypted, password))
    except (ValueError, KeyError, TypeError) as exc:
        raise SigningKeyError(f"signing: cannot decrypt keystore {path}: {exc}") from None


def _dev_key(path: Path) -> bytes:
    """Read the development key, or create it (exclusively, mode 0600) on first run; a key
    file of another user's, or in a directory anyone may write to, is refused (they could
    sign in this daemon's name), one readable by others is narrowed to 0600."""
    try:
        check_directory(path, "dev key file")
        if path.exists():
            check_existing(path, "dev key file")
    except FileRefused as exc:
        raise SigningKeyError(f"signing: {exc}") from None
    except OSError as exc:
        raise SigningKeyError(f"signing: dev key file {path}: {exc.strerror}") from None
    try:
        key = _parse_key(path.read_text(encoding="utf-8"), f"dev key file {path}")
        created = False
    except FileNotFoundError:
        key = secrets.token_bytes(32)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another daemon created it meanwhile: use theirs
            return _dev_key(path)
        except OSError as exc:
            raise SigningKeyError(
                f"signing: cannot create dev key file {path}: {exc.strerror}"
            ) from None
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write("0x" + key.hex() + "\n")
        created = True
    except OSError as exc:
        raise SigningKeyError(f"signing: cannot read dev key file {path}: {exc.strerror}") from None
    address = str(Account.from_key(key).address).lower()
    log.warning(
        "\n%s\nWARNING: receipts are signed with a DEVELOPMENT key (%s %s), address %s.\n"
        "Anyone who can read that file can sign receipts in this daemon's name. This is allowed "
        "only because every chain is a local dev chain; set $FINALITY_SIGNING_KEY or a keystore "
        "for anything else.\n%s",
        "*" * 78,
        "generated into" if created else "read from",
        path.resolve(),
        address,
        "*" * 78,
    )
    return key
