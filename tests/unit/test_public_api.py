"""The public library surface stays put: every name docs/library.md lists imports, as its kind.

Third parties import the verifier and the proof code as a library. The table in
docs/library.md is the promise; this test reads it, imports each name from its module and
checks the kind written there (function, class, exception, constant, module), and fails
when a name the project promised third parties has no row. ``python -m watcher.cli verify`` is
part of the promise too: it is run as a process on a golden receipt vector.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "library.md"
VECTOR = ROOT / "tests" / "vectors" / "receipts" / "finality_depth.json"

PROMISED = {
    ("guard.rlp", "encode"),
    ("guard.rlp", "decode"),
    ("guard.rlp", "encode_uint"),
    ("guard.rlp", "RlpError"),
    ("guard.headers", "header_hash"),
    ("guard.headers", "header_json"),
    ("guard.headers", "HeaderError"),
    ("guard.headers", "REQUIRED_FIELDS"),
    ("guard.headers", "OPTIONAL_FIELDS"),
    ("guard.txs", "decode_signed"),
    ("guard.txs", "canonical_bytes"),
    ("guard.txs", "transaction_hash"),
    ("guard.txs", "recover_address"),
    ("guard.txs", "TransactionError"),
    ("guard.tx_encode", "encode_checked"),
    ("guard.tx_encode", "encode_tx"),
    ("guard.errors", "ReceiptInvalid"),
    ("guard.mpt", "verify_proof"),
    ("guard.mpt", "ProofError"),
    ("guard.verify_chain", "verify_inclusion"),
    ("guard.verify_chain", "receipt_status"),
    ("guard.verify", "verify_receipt"),
    ("guard.receipts", "KINDS"),
    ("guard.receipts", "message_hash"),
    ("guard", "eip712"),
    ("guard.hashing", "keccak256"),
    ("chains.proofs", "Trie"),
    ("chains.proofs", "index_key"),
    ("chains.proofs", "encode_receipt"),
    ("chains.proofs", "fetch_block_tries"),
    ("chains.proofs", "inclusion_proof"),
    ("chains.rpc", "RpcClient"),
    ("chains.errors", "ChainError"),
    ("chains.errors", "RpcErrorResponse"),
}
"""The names promised third parties (a stable public API), whatever the page says."""

KINDS = ("function", "class", "exception", "constant", "module")
ROW = re.compile(r"^\| `(?P<module>[\w.]+)` \| `(?P<name>\w+)` \| (?P<kind>\w+) \|")


def documented() -> list[tuple[str, str, str]]:
    """(module, name, kind) of every row of the page's table."""
    rows = []
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if match:
            rows.append((match["module"], match["name"], match["kind"]))
    return rows


def kind_of(value: object) -> str:
    """What ``value`` is, in the page's words."""
    if inspect.ismodule(value):
        return "module"
    if inspect.isclass(value):
        return "exception" if issubclass(value, BaseException) else "class"
    if inspect.isroutine(value):
        return "function"
    return "constant"


def resolve(module: str, name: str) -> object:
    """``module.name``, importing it as a submodule when it is one."""
    parent = importlib.import_module(module)
    if not hasattr(parent, name):
        with contextlib.suppress(ModuleNotFoundError):
            importlib.import_module(f"{module}.{name}")
    return getattr(parent, name)


def test_the_page_lists_every_promised_name_once() -> None:
    rows = documented()
    pairs = [(module, name) for module, name, _ in rows]
    assert len(pairs) == len(set(pairs)), "a name is listed twice"
    missing = sorted(PROMISED - set(pairs))
    assert not missing, f"docs/library.md lacks rows for {missing}"
    unknown = sorted({kind for _, _, kind in rows} - set(KINDS))
    assert not unknown, f"kinds not in {KINDS}: {unknown}"


@pytest.mark.parametrize(("module", "name", "kind"), documented(), ids=lambda v: str(v))
def test_each_documented_name_imports_as_its_kind(module: str, name: str, kind: str) -> None:
    value = resolve(module, name)
    assert kind_of(value) == kind, f"{module}.{name} is a {kind_of(value)}, documented {kind}"


def test_checker_tells_the_kinds_apart() -> None:
    from guard import eip712, rlp

    assert [kind_of(v) for v in (rlp.encode, rlp.RlpError, eip712, rlp, 3, ("a",))] == [
        "function",
        "exception",
        "module",
        "module",
        "constant",
        "constant",
    ]
    assert kind_of(Path) == "class"


def test_python_m_watcher_cli_verify_checks_a_receipt(tmp_path: Path) -> None:
    """The golden finality vector verifies (exit 0); one changed digit of its body makes the
    same command exit 1 with the reason."""
    receipt = json.loads(VECTOR.read_text(encoding="utf-8"))["receipt"]
    good = tmp_path / "good.json"
    good.write_text(json.dumps(receipt), encoding="utf-8")
    tampered = dict(receipt, issued_at=receipt["issued_at"] + 1)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(tampered), encoding="utf-8")
    for path, code, words in ((good, 0, "settlement_finality_receipt"), (bad, 1, "digest")):
        done = subprocess.run(
            [sys.executable, "-m", "watcher.cli", "verify", str(path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == code, done.stdout + done.stderr
        assert words in done.stdout + done.stderr
