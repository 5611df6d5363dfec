"""Golden vectors of the settlement guard, shared with any other implementation.

``tests/vectors/settlement_verdicts.json`` is a JSON list; each entry is one evaluation::

    {
      "name": "awaiting_one_ms_before_deadline",       unique, snake_case
      "settlement": {"settlement_id": str, "initiated": bool,
                     "initiated_at": int ms, "timeout_ms": int},
      "observation": {"finality": EVIDENCE | null, "failure": EVIDENCE | null,
                      "progress": EVIDENCE | null},
      "policy": {"max_wait_ms": int},
      "now": int ms,
      "expected": {"verdict": str, "deadline": int ms | null, "elapsed_ms": int,
                   "remaining_ms": int, "late_finality": EVIDENCE | null,
                   "digest": "sha256:<64 hex>"}
    }

    EVIDENCE = {"kind": str, "observed_at": int ms, "facts": {str: int | str | bool | null}}

Integers are within +-(2**53 - 1). Finality confirms when evaluated before the deadline
(``now < deadline``) or observed before it (``observed_at < deadline``); at ``now >= deadline``
finality observed at or after the deadline gives ``TIMEOUT_TREATED_AS_FAILURE`` with that
finality as ``late_finality`` (null in every other case).

The digest is SHA-256 over the canonical JSON (RFC 8785 style: sorted keys, no white space,
UTF-8, no floats) of ``{"verdict", "settlement_id", "initiated", "initiated_at",
"timeout_ms", "deadline", "evidence"}`` plus ``"elapsed_ms"`` for ``AWAITING_FINALITY`` only
and ``"late_finality"`` only when it is not null, where ``evidence`` is the EVIDENCE the
verdict rests on (the failure, the finality, or the progress for awaiting and timeout; null
for no settlement).

The test evaluates the inputs of the committed file and compares every expected field, so a
change of behaviour or encoding shows up as a failing vector. After an intended change,
regenerate the file with ``.venv/bin/python tests/unit/test_guard_vectors.py`` and review the
diff.
"""

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from guard.settlement import (
    Decision,
    Evidence,
    Observation,
    Settlement,
    SettlementPolicy,
    Verdict,
    evaluate_settlement,
)
from guard.types import SettlementId, UnixMillis

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "settlement_verdicts.json"

# --- decoding -----------------------------------------------------------------------------


def evidence_from_json(raw: dict[str, Any] | None) -> Evidence | None:
    """Build guard evidence from its vector form."""
    if raw is None:
        return None
    return Evidence.of(raw["kind"], UnixMillis(raw["observed_at"]), **raw["facts"])


def inputs_from_json(
    vector: dict[str, Any],
) -> tuple[Settlement, Observation, SettlementPolicy, UnixMillis]:
    """Build the four arguments of ``evaluate_settlement`` from one vector."""
    s = vector["settlement"]
    o = vector["observation"]
    return (
        Settlement(
            settlement_id=SettlementId(s["settlement_id"]),
            initiated=s["initiated"],
            initiated_at=UnixMillis(s["initiated_at"]),
            timeout_ms=s["timeout_ms"],
        ),
        Observation(
            finality=evidence_from_json(o["finality"]),
            failure=evidence_from_json(o["failure"]),
            progress=evidence_from_json(o["progress"]),
        ),
        SettlementPolicy(max_wait_ms=vector["policy"]["max_wait_ms"]),
        UnixMillis(vector["now"]),
    )


def expected_of(decision: Decision) -> dict[str, Any]:
    """The fields of a decision a vector pins."""
    return {
        "verdict": decision.verdict.value,
        "deadline": decision.deadline,
        "elapsed_ms": decision.elapsed_ms,
        "remaining_ms": decision.remaining_ms,
        "late_finality": (
            decision.late_finality.as_json() if decision.late_finality is not None else None
        ),
        "digest": decision.digest,
    }


def load_vectors() -> list[dict[str, Any]]:
    with VECTORS.open(encoding="utf-8") as handle:
        vectors: list[dict[str, Any]] = json.load(handle)
    return vectors


# --- the tests ----------------------------------------------------------------------------

# Missing file: test_vector_file_is_well_formed fails (and the generator can still run).
_VECTORS = load_vectors() if VECTORS.exists() else []


def test_vector_file_is_well_formed() -> None:
    names = [vector["name"] for vector in _VECTORS]
    assert len(names) == len(set(names)), "vector names must be unique"
    assert len(_VECTORS) >= 12
    for vector in _VECTORS:
        assert set(vector) == {"name", "settlement", "observation", "policy", "now", "expected"}
        assert set(vector["expected"]) == {
            "verdict",
            "deadline",
            "elapsed_ms",
            "remaining_ms",
            "late_finality",
            "digest",
        }
        assert set(vector["observation"]) == {"finality", "failure", "progress"}


def test_vectors_cover_every_verdict() -> None:
    covered = {vector["expected"]["verdict"] for vector in _VECTORS}
    assert covered == {verdict.value for verdict in Verdict}


def test_vectors_cover_both_sides_of_the_late_finality_rule() -> None:
    def deadline_and_finality(vector: dict[str, Any]) -> tuple[int | None, dict[str, Any] | None]:
        return vector["expected"]["deadline"], vector["observation"]["finality"]

    # Finality observed before the deadline, evaluated at or after it: confirmed.
    assert any(
        v["expected"]["verdict"] == "FINALITY_CONFIRMED"
        and v["now"] >= deadline
        and finality["observed_at"] < deadline
        for v in _VECTORS
        for deadline, finality in [deadline_and_finality(v)]
        if deadline is not None and finality is not None
    )
    # Finality observed exactly at the deadline: a timeout carrying it as late finality.
    assert any(
        v["expected"]["verdict"] == "TIMEOUT_TREATED_AS_FAILURE"
        and finality["observed_at"] == deadline
        and v["expected"]["late_finality"] == finality
        for v in _VECTORS
        for deadline, finality in [deadline_and_finality(v)]
        if deadline is not None and finality is not None
    )


@pytest.mark.parametrize("vector", _VECTORS, ids=[vector["name"] for vector in _VECTORS])
def test_vector(vector: dict[str, Any]) -> None:
    decision = evaluate_settlement(*inputs_from_json(vector))
    expected = vector["expected"]
    actual = expected_of(decision)
    for key in ("verdict", "deadline", "elapsed_ms", "remaining_ms", "late_finality", "digest"):
        assert actual[key] == expected[key], f"{vector['name']}: {key}"


@pytest.mark.parametrize("vector", _VECTORS, ids=[vector["name"] for vector in _VECTORS])
def test_verdict_follows_the_documented_rules(vector: dict[str, Any]) -> None:
    # Recomputed from the vector alone, as another implementation would.
    s, o, now = vector["settlement"], vector["observation"], vector["now"]
    expected = vector["expected"]
    if not s["initiated"]:
        assert expected["verdict"] == "NO_SETTLEMENT"
        return
    deadline = s["initiated_at"] + min(s["timeout_ms"], vector["policy"]["max_wait_ms"])
    assert expected["deadline"] == deadline
    finality = o["finality"]
    if o["failure"] is not None:
        verdict = "SETTLEMENT_FAILED"
    elif finality is not None and (now < deadline or finality["observed_at"] < deadline):
        verdict = "FINALITY_CONFIRMED"
    elif now >= deadline:
        verdict = "TIMEOUT_TREATED_AS_FAILURE"
    else:
        verdict = "AWAITING_FINALITY"
    assert expected["verdict"] == verdict
    assert expected["remaining_ms"] == (deadline - now if verdict == "AWAITING_FINALITY" else 0)
    assert expected["elapsed_ms"] == max(0, now - s["initiated_at"])


@pytest.mark.parametrize("vector", _VECTORS, ids=[vector["name"] for vector in _VECTORS])
def test_digest_follows_the_documented_recipe(vector: dict[str, Any]) -> None:
    # Recomputed from the vector alone with hashlib and json, as another implementation would.
    expected = vector["expected"]
    verdict = expected["verdict"]
    observation = vector["observation"]
    evidence = {
        "NO_SETTLEMENT": None,
        "SETTLEMENT_FAILED": observation["failure"],
        "FINALITY_CONFIRMED": observation["finality"],
        "TIMEOUT_TREATED_AS_FAILURE": observation["progress"],
        "AWAITING_FINALITY": observation["progress"],
    }[verdict]
    bound = {
        **vector["settlement"],
        "verdict": verdict,
        "deadline": expected["deadline"],
        "evidence": evidence,
    }
    if verdict == "AWAITING_FINALITY":
        bound["elapsed_ms"] = expected["elapsed_ms"]
    # Late finality: the finality of a timeout (observed at or after the deadline).
    late = observation["finality"] if verdict == "TIMEOUT_TREATED_AS_FAILURE" else None
    assert expected["late_finality"] == late
    if late is not None:
        assert late["observed_at"] >= expected["deadline"]
        bound["late_finality"] = late
    preimage = json.dumps(bound, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = "sha256:" + hashlib.sha256(preimage.encode("utf-8")).hexdigest()
    assert digest == expected["digest"]


def test_generator_inputs_match_the_committed_file() -> None:
    # The expected values are checked above; this keeps the documented generator honest.
    committed = [{k: v for k, v in vector.items() if k != "expected"} for vector in _VECTORS]
    generated = [
        {"name": n, "settlement": s, "observation": o, "policy": p, "now": now}
        for n, s, o, p, now in CASES
    ]
    assert committed == generated


# --- the generator ------------------------------------------------------------------------

T0 = 1_700_000_000_000
BLOCK_A = "0x" + "aa" * 32
BLOCK_B = "0x" + "bb" * 32


def _settlement(
    initiated: bool = True, initiated_at: int = T0, timeout_ms: int = 60_000
) -> dict[str, Any]:
    return {
        "settlement_id": "vec-1",
        "initiated": initiated,
        "initiated_at": initiated_at,
        "timeout_ms": timeout_ms,
    }


def _evidence(kind: str, observed_at: int, **facts: Any) -> dict[str, Any]:
    return {"kind": kind, "observed_at": observed_at, "facts": facts}


def _observation(
    finality: dict[str, Any] | None = None,
    failure: dict[str, Any] | None = None,
    progress: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {"finality": finality, "failure": failure, "progress": progress}


INCLUDED = _evidence("included", T0 + 12_000, block_number=812, block_hash=BLOCK_A, depth=1)
DEPTH_A = _evidence("depth", T0 + 48_000, block_number=812, block_hash=BLOCK_A, depth=12, head=823)
DEPTH_B = _evidence("depth", T0 + 48_000, block_number=812, block_hash=BLOCK_B, depth=12, head=823)
REVERTED = _evidence("reverted", T0 + 12_000, block_number=812, block_hash=BLOCK_A, status=0)
POLICY = {"max_wait_ms": 600_000}

# name, settlement, observation, policy, now
CASES: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any], int]] = [
    ("not_initiated", _settlement(initiated=False), _observation(), POLICY, T0 + 1_000),
    (
        "not_initiated_ignores_evidence",
        _settlement(initiated=False),
        _observation(finality=DEPTH_A, failure=REVERTED),
        POLICY,
        T0 + 1_000,
    ),
    ("awaiting_at_initiation", _settlement(), _observation(), POLICY, T0),
    ("awaiting_included", _settlement(), _observation(progress=INCLUDED), POLICY, T0 + 15_000),
    ("awaiting_one_ms_before_deadline", _settlement(), _observation(), POLICY, T0 + 59_999),
    ("timeout_at_deadline_inclusive", _settlement(), _observation(), POLICY, T0 + 60_000),
    (
        "timeout_after_deadline_with_progress",
        _settlement(),
        _observation(progress=INCLUDED),
        POLICY,
        T0 + 90_000,
    ),
    (
        "awaiting_policy_caps_wait_one_ms_before",
        _settlement(timeout_ms=3_600_000),
        _observation(),
        POLICY,
        T0 + 599_999,
    ),
    (
        "timeout_policy_caps_wait",
        _settlement(timeout_ms=3_600_000),
        _observation(),
        POLICY,
        T0 + 600_000,
    ),
    (
        "confirmed_depth_block_a",
        _settlement(),
        _observation(finality=DEPTH_A, progress=INCLUDED),
        POLICY,
        T0 + 50_000,
    ),
    (
        "confirmed_depth_block_b",
        _settlement(),
        _observation(finality=DEPTH_B, progress=INCLUDED),
        POLICY,
        T0 + 50_000,
    ),
    (
        "confirmed_observed_at_zero",
        _settlement(initiated_at=0, timeout_ms=1_000),
        _observation(finality=_evidence("finalized", 0, block_number=0, block_hash=BLOCK_A)),
        POLICY,
        0,
    ),
    (
        "confirmed_at_deadline",
        _settlement(),
        _observation(finality=DEPTH_A),
        POLICY,
        T0 + 60_000,
    ),
    ("failed_reverted", _settlement(), _observation(failure=REVERTED), POLICY, T0 + 13_000),
    (
        "failed_dominates_finality",
        _settlement(),
        _observation(finality=DEPTH_A, failure=REVERTED),
        POLICY,
        T0 + 50_000,
    ),
    (
        "confirmed_observed_before_deadline_evaluated_after",
        _settlement(),
        _observation(finality=DEPTH_A, progress=INCLUDED),
        POLICY,
        T0 + 90_000,
    ),
    (
        "confirmed_observed_one_ms_before_deadline_evaluated_at_it",
        _settlement(),
        _observation(finality=_evidence("finalized", T0 + 59_999, block_number=812)),
        POLICY,
        T0 + 60_000,
    ),
    (
        "confirmed_one_ms_before_deadline",
        _settlement(),
        _observation(finality=_evidence("finalized", T0 + 59_999, block_number=812)),
        POLICY,
        T0 + 59_999,
    ),
    (
        "timeout_finality_observed_at_deadline_is_late",
        _settlement(),
        _observation(finality=_evidence("finalized", T0 + 60_000, block_number=812)),
        POLICY,
        T0 + 60_000,
    ),
    (
        "timeout_late_finality_with_progress",
        _settlement(),
        _observation(
            finality=_evidence(
                "depth", T0 + 75_000, block_number=812, block_hash=BLOCK_A, depth=12, head=823
            ),
            progress=INCLUDED,
        ),
        POLICY,
        T0 + 80_000,
    ),
    (
        "timeout_late_finality_policy_caps_wait",
        _settlement(timeout_ms=3_600_000),
        _observation(
            finality=_evidence(
                "depth", T0 + 600_000, block_number=812, block_hash=BLOCK_B, depth=12, head=823
            )
        ),
        POLICY,
        T0 + 700_000,
    ),
    (
        "failed_dominates_late_finality",
        _settlement(),
        _observation(
            finality=_evidence("finalized", T0 + 70_000, block_number=812),
            failure=REVERTED,
        ),
        POLICY,
        T0 + 70_000,
    ),
    (
        "failed_after_deadline",
        _settlement(),
        _observation(failure=_evidence("replaced", T0 + 70_000, by="0x" + "cc" * 32, nonce=7)),
        POLICY,
        T0 + 70_000,
    ),
]


def generate() -> list[dict[str, Any]]:
    """Evaluate every case with the current guard and return the vector list."""
    vectors: list[dict[str, Any]] = []
    for name, settlement, observation, policy, now in CASES:
        vector: dict[str, Any] = {
            "name": name,
            "settlement": settlement,
            "observation": observation,
            "policy": policy,
            "now": now,
        }
        vector["expected"] = expected_of(evaluate_settlement(*inputs_from_json(vector)))
        vectors.append(vector)
    return vectors


if __name__ == "__main__":
    VECTORS.parent.mkdir(parents=True, exist_ok=True)
    VECTORS.write_text(json.dumps(generate(), indent=2) + "\n", encoding="utf-8")
    print(f"wrote {len(CASES)} vectors to {VECTORS}")
