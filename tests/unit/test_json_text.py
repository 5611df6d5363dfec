"""watcher.store.json_text: the same JSON document the stdlib writes, and the stdlib's answer
wherever orjson would refuse (nothing writable before is refused now)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from watcher.store.json_text import json_bytes, json_text


def plain_values(rng: random.Random, depth: int = 0) -> Any:
    """A random JSON value of the kinds the store writes (no floats: none are stored)."""
    kind = rng.randrange(7 if depth < 4 else 4)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.randrange(-(2**63), 2**63)
    if kind in (2, 3):
        return "".join(rng.choice('aé"\\\n\t\x01\u2028€𝄞/<>') for _ in range(rng.randrange(12)))
    if kind == 4:
        return [plain_values(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {
        str(plain_values(rng, 3)): plain_values(rng, depth + 1) for _ in range(rng.randrange(4))
    }


def test_the_same_document_as_the_stdlib() -> None:
    rng = random.Random(5)
    for _ in range(2_000):
        value = plain_values(rng)
        assert json.loads(json_bytes(value)) == value
        stdlib = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        assert json_text(value) == stdlib  # and, for these values, the same text


@pytest.mark.parametrize(
    "value",
    [
        {"amount": 2**70},  # past 64 bits
        {"n": -(2**64)},
        {1: "an integer key"},  # json.dumps writes it as "1"
        json.loads("[" * 300 + "]" * 300),  # deeper than orjson's 254
    ],
    ids=["big", "big-negative", "int-key", "deep"],
)
def test_what_orjson_refuses_is_written_by_the_stdlib(value: Any) -> None:
    assert json_text(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
