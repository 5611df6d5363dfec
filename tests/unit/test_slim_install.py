"""The slim install: the client, the offline verifier and the CLI's client commands import
none of the daemon's packages, and the base dependencies are ranges, not pins.

The imports are checked in a fresh interpreter (this one has imported the whole daemon
already): after importing ``watcher.client``, verifying a real receipt and building the CLI's
parser, ``sys.modules`` holds no module of FastAPI, SQLAlchemy, web3 or the rest of the
``[daemon]`` extra, and every third-party module loaded belongs to the base install.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VECTOR = ROOT / "tests" / "vectors" / "receipts" / "finality_depth.json"

DAEMON_ONLY = {
    "fastapi",
    "starlette",
    "uvicorn",
    "sqlalchemy",
    "alembic",
    "apscheduler",
    "web3",
    "eth_account",
    "eth_keys",
    "eth_utils",
    "aiohttp",
    "requests",
    "websockets",
    "orjson",
    "prometheus_client",
    "uvloop",
}
"""Top-level modules of the ``[daemon]`` extra (and what web3 brings) that a caller of the
client must never pay for."""

BASE_MODULES = {
    # httpx and what it brings
    "httpx",
    "httpcore",
    "h11",
    "anyio",
    "sniffio",
    "idna",
    "certifi",
    # httpx imports its command line when that is installed (the slim install has it not;
    # the test venv has, through the dev tools)
    "click",
    "rich",
    "pygments",
    # pydantic and what it brings
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "typing_extensions",
    "typing_inspection",
    # the verifier's crypto: libsecp256k1 (coincurve) and keccak (safe-pysha3)
    "coincurve",
    "_libsecp256k1",
    "_cffi_backend",
    "asn1crypto",
    "sha3",
    "_pysha3",
    # the sync committees' BLS signatures of a receipt's consensus section (guard/consensus/)
    "py_arkworks_bls12381",
    # the project's own pure parts
    "guard",
    "chains",
    "watcher",
}
"""Every third-party top-level module the slim install may load."""

PROBE = f"""
import json, sys
from watcher.client import AsyncFinalityClient, FinalityClient, verify
from watcher.cli.main import build_parser
build_parser({{}})
vector = json.load(open({str(VECTOR)!r}))
valid = verify(vector["receipt"], signers=vector["trusted_signers"]).valid
tops = sorted({{name.split(".")[0] for name in sys.modules}} - set(sys.stdlib_module_names))
print(json.dumps({{"valid": valid, "modules": tops}}))
"""


def test_client_verifier_and_cli_load_no_daemon_package() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["valid"], "the probe's receipt did not verify: the check proves nothing"
    loaded = {
        name
        for name in answer["modules"]
        if name not in {"__main__", "_distutils_hack"}
        and not name.startswith(("__editable__", "_sysconfigdata"))  # the install's own shims
    }
    assert not loaded & DAEMON_ONLY, f"daemon packages imported: {sorted(loaded & DAEMON_ONLY)}"
    assert loaded <= BASE_MODULES, f"not in the slim install: {sorted(loaded - BASE_MODULES)}"


def test_base_dependencies_are_ranges_and_the_daemon_an_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    base = project["dependencies"]
    assert sorted(d.split(">")[0].split("[")[0] for d in base) == [
        "coincurve",
        "httpx",
        "py-arkworks-bls12381",
        "pydantic",
        "safe-pysha3",
        "typing-extensions",
    ]
    extras = project["optional-dependencies"]
    for name, requirements in [("base", base), *extras.items()]:
        if name == "dev":  # the tools' exact versions are the test environment itself
            continue
        pinned = [r for r in requirements if "==" in r]
        assert not pinned, f"[{name}] pins {pinned}: ranges go in pyproject, pins in the locks"
    assert {"daemon", "postgres", "stripe", "rq", "celery", "mcp", "otel"} <= set(extras)
    for needs_daemon in ("postgres", "stripe", "rq", "celery"):
        assert "finality-watcher[daemon]" in extras[needs_daemon]
