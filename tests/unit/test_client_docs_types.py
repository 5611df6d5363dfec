"""docs/client.md's examples type-check under ``mypy --strict``, as a user's code would.

Each ``python`` block of the page becomes a module of its own, after a preamble declaring the
names the prose leaves to the reader (``tx_hash``, ``order``, ``ship_the_goods`` …). A
control module misspells a keyword and passes a wrong type: mypy must refuse exactly those
two lines, so the check is seen to bite (an untyped ``**opts: Any`` would let both through).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "client.md"

PREAMBLE = """\
from __future__ import annotations

import os
from typing import Any

from watcher.client import AsyncFinalityClient, FinalityClient, verify

tx_hash: str = "0x" + "00" * 32
sender: str = "0x" + "11" * 20
nonce: int = 0
raw_tx: str = "0x02"
PINNED_SIGNER: str = "0x" + "22" * 20
order: dict[str, Any] = {}
last_id: int = 0
client: FinalityClient = FinalityClient("http://127.0.0.1:8710")


def ship_the_goods(order: dict[str, Any], proof: dict[str, Any]) -> None: ...
def release_the_reservation(order: dict[str, Any]) -> None: ...
def handle(event: dict[str, Any]) -> None: ...

"""

CONTROL = """
client.register("local", tx_hash, provisonal=True)
client.register("local", tx_hash, confirmations="3")
"""


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)


def test_the_client_docs_examples_pass_mypy_strict(tmp_path: Path) -> None:
    blocks = examples()
    assert len(blocks) >= 5, "docs/client.md lost its examples"
    files = []
    for index, block in enumerate([*blocks, CONTROL]):
        path = tmp_path / f"example_{index}.py"
        path.write_text(PREAMBLE + block, encoding="utf-8")
        files.append(path)
    control = files[-1]
    # Errors in the user's modules only: the package itself passes its own strict run.
    mypy = [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent"]
    done = subprocess.run(
        [*mypy, "--cache-dir", str(tmp_path / "cache"), *(path.name for path in files)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        # The work tree on mypy's path, as an installed package would be on a user's.
        env={**os.environ, "MYPYPATH": str(ROOT)},
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    in_examples = [line for line in errors if not line.startswith(control.name)]
    assert not in_examples, "\n".join(in_examples)
    caught = sorted(int(line.split(":")[1]) for line in errors if line.startswith(control.name))
    first = PREAMBLE.count("\n") + 2  # the control's first statement
    assert caught == [first, first + 1], done.stdout
