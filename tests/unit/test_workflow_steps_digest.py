"""The checkpoint's digest written step by step (watcher/workflows/steps.py keeps each step's
canonical text) is the guard's digest of the whole list, byte for byte, and refuses what
the guard refuses: a receipt verified offline recomputes it with guard/canonical.py."""

from __future__ import annotations

import random
from typing import Any

import pytest

from guard.canonical import CanonicalError, digest
from watcher.workflows.steps import begun, completed, new_steps, steps_digest

NAMES = ["charge", "ship", "notify"]


def _moves() -> list[list[dict[str, Any]]]:
    first = new_steps(NAMES)
    going = begun(
        first, "charge", 'charge "card" \u2028\x01\x7f\\', {"idempotency_key": "k\n"}, "w"
    )
    done = completed(
        going,
        "charge",
        {"a": [1, 2, {"z": None, "b": True, "ü": "é"}], "n": -(2**53) + 1, "\U0001f600": 2},
        "w",
    )
    return [first, going, done, begun(done, "ship", "ship", {"settlement_id": "stl_1"}, "w")]


@pytest.mark.parametrize("index", range(4))
def test_the_digest_is_the_guards_digest_of_the_steps(index: int) -> None:
    steps = _moves()[index]
    assert steps_digest(steps) == digest(steps)
    assert steps_digest(steps) == digest(steps)  # again, from the kept texts


def test_equal_looking_values_of_other_types_digest_as_the_guard_says() -> None:
    going = begun(new_steps(NAMES), "charge", "charge", None, "w")
    for effects in ({"n": 1}, {"n": True}, {"n": "1"}, {"n": None}):
        steps = completed(going, "charge", effects, "w")
        assert steps_digest(steps) == digest(steps), effects


@pytest.mark.parametrize("bad", [{"x": 1.5}, {"x": 2**60}, {"x": 2**70}, {"x": "\ud800"}])
def test_what_the_guard_refuses_is_refused_every_time(bad: dict[str, Any]) -> None:
    steps = completed(begun(new_steps(NAMES), "charge", "charge", None, "w"), "charge", bad, "w")
    with pytest.raises(CanonicalError) as guard_says:
        digest(steps)
    for _ in range(2):  # a refusal is never kept
        with pytest.raises(CanonicalError) as refused:
            steps_digest(steps)
        assert str(refused.value) == str(guard_says.value)


def test_any_text_digests_as_the_guard_says() -> None:
    rng = random.Random(7)
    going = begun(new_steps(NAMES), "charge", "charge", None, "w")
    for _ in range(300):
        text = "".join(
            chr(
                rng.choice(
                    [rng.randint(0, 0x80), rng.randint(0x80, 0xD7FF), rng.randint(0xE000, 0x10FFFF)]
                )
            )
            for _ in range(6)
        )
        steps = completed(going, "charge", {text: text, "k": [text]}, "w")
        assert steps_digest(steps) == digest(steps), repr(text)
