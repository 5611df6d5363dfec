"""What a caller's application does with the slim install, run by the *oldest* allowed
versions of its dependencies (tests/e2e/test_min_versions.py runs it in a venv built from
constraints-min.txt; it imports nothing from tests/ and no dev tool).

``python min_client_check.py DAEMON_URL CHAIN TX_HASH VECTORS_DIR`` registers the tx with the
daemon, waits for its verdict on the event stream, verifies the receipt offline, verifies the
stored receipt vectors (and refuses an altered one), and prints a JSON summary.
"""

from __future__ import annotations

import asyncio
import json
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

from watcher.client import AsyncFinalityClient, FinalityClient, verify


def vectors(directory: Path) -> dict[str, bool]:
    """Each stored receipt vector's verification, and an altered copy of the first one's."""
    results: dict[str, bool] = {}
    for path in sorted(directory.glob("*.json")):
        vector = json.loads(path.read_text(encoding="utf-8"))
        if "receipt" not in vector:
            continue
        result = verify(vector["receipt"], signers=vector["trusted_signers"])
        results[path.stem] = result.valid and result.receipt is not None
        if "altered" not in results:
            altered = {**vector["receipt"], "tx_hash": "0x" + "ab" * 32}
            results["altered"] = verify(altered, signers=vector["trusted_signers"]).valid
    return results


async def async_view(url: str, settlement_id: str) -> str:
    async with AsyncFinalityClient(url) as client:
        view = await client.get(settlement_id)
    return str(view["verdict"])


def main(url: str, chain: str, tx_hash: str, vectors_dir: str) -> dict[str, Any]:
    with FinalityClient(url) as client:
        sid = client.register(chain, tx_hash, confirmations=2, timeout_s=120)["settlement_id"]
        final = client.wait(sid, timeout_s=90)
        receipt = client.receipt(sid) if final["verdict"] == "FINALITY_CONFIRMED" else None
    return {
        "versions": {name: version(name) for name in ("httpx", "pydantic", "coincurve")},
        "verdict": final["verdict"],
        "async_verdict": asyncio.run(async_view(url, sid)),
        "receipt_valid": receipt is not None and verify(receipt).valid,
        "vectors": vectors(Path(vectors_dir)),
    }


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:5])))
