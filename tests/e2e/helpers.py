"""Small helpers for the end-to-end tests (real processes, real anvil)."""

from __future__ import annotations

import threading
from typing import Any

import requests

from tests.support.anvil import Anvil

ZERO_HASH = "0x" + "00" * 32


def unknown_hash(tag: int) -> str:
    """A well-formed tx hash no node knows."""
    return "0x" + f"{tag:064x}".replace("0", "e")


class Miner:
    """A background thread mining one block every ``interval`` seconds (its own HTTP session).

    Use as a context manager; ``stop()`` joins the thread and re-raises its error, if any.
    """

    def __init__(self, anvil: Anvil, interval: float = 0.1) -> None:
        self.url = anvil.url
        self.interval = interval
        self.blocks = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="miner", daemon=True)

    def _run(self) -> None:
        session = requests.Session()
        try:
            while not self._stop.wait(self.interval):
                body: dict[str, Any] = {
                    "jsonrpc": "2.0",
                    "id": self.blocks,
                    "method": "anvil_mine",
                    "params": ["0x1"],
                }
                answer = session.post(self.url, json=body, timeout=10).json()
                if "error" in answer:
                    raise RuntimeError(f"anvil_mine: {answer['error']}")
                self.blocks += 1
        except BaseException as exc:
            self.error = exc
        finally:
            session.close()

    def start(self) -> Miner:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        if self.error is not None:
            raise self.error

    def __enter__(self) -> Miner:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
