"""The settlement guard's decision boundary as an answer an agent acts on: COMMIT, WAIT, DISCARD.

Pure functions of a settlement view (and its signed receipt), so the mapping is the same
whoever asks. COMMIT and DISCARD carry the signed receipt that proves them; a terminal
verdict whose receipt is not signed yet is still WAIT (an agent should never act on an
unsigned decision), with a reason saying so.
"""

from __future__ import annotations

from typing import Any

from guard.settlement import TERMINAL_VERDICTS, Verdict


def is_terminal(view: dict[str, Any]) -> bool:
    """Whether the view's verdict will not change any more (short of a finality violation)."""
    return view.get("verdict") in TERMINAL_VERDICTS


def decision(view: dict[str, Any], receipt: dict[str, Any] | None) -> dict[str, Any]:
    """``{"decision", "verdict", "directive", "receipt", ...}`` for ``view``.

    WAIT adds ``why`` (what is still missing) and ``until`` (the deadline, unix milliseconds, after
    which the settlement times out and the answer becomes DISCARD; null when there is none)."""
    verdict = view.get("verdict")
    base = {
        "settlement_id": view.get("settlement_id"),
        "verdict": verdict,
        "directive": view.get("directive"),
    }
    if verdict in TERMINAL_VERDICTS and receipt is not None:
        decided = "COMMIT" if verdict == Verdict.FINALITY_CONFIRMED else "DISCARD"
        return {"decision": decided, **base, "receipt": receipt}
    return {
        "decision": "WAIT",
        **base,
        "receipt": None,
        "why": why_wait(view),
        "until": view.get("deadline"),
    }


def why_wait(view: dict[str, Any]) -> str:
    """One sentence: what the settlement still lacks before it can be acted on."""
    verdict = view.get("verdict")
    if verdict in TERMINAL_VERDICTS:
        return f"the verdict is {verdict} but its signed receipt is not built yet; ask again"
    if view.get("block_number") is None:
        return "the transaction is not included in a block yet"
    depth = view.get("confirmations") or 0
    required = view.get("required_confirmations")
    reorgs = view.get("reorg_count") or 0
    text = f"included at depth {depth} of the {required} required"
    if view.get("finality_mode") not in (None, "depth"):
        text = f"included at depth {depth}; waiting for {view.get('waiting_for')}"
        text += f" (finality mode {view.get('finality_mode')})"
    return text + (f"; {reorgs} reorg(s) seen so far" if reorgs else "")


def progress_line(view: dict[str, Any]) -> str:
    """The progress message while waiting: verdict, depth (and, under a rule on the
    ``finalized`` tag, what it waits for rather than a depth it does not), reorgs."""
    depth = f"depth {view.get('confirmations') or 0}"
    if view.get("finality_mode") not in (None, "depth") and view.get("waiting_for"):
        depth += f"; waiting for {view.get('waiting_for')}"
    else:
        depth += f"/{view.get('required_confirmations')}"
    return f"{view.get('verdict')}: {depth}, reorgs {view.get('reorg_count') or 0}"
