"""A bounded memo of a pure function's successes, shared by threads (pure).

The proof and signer checks remember what they proved by the exact content it depends on
(guard/verify_chain.py, chains/block_checks.py): a content seen again returns the same answer,
a failure is never put here, and the oldest entries go first once the memo is full. Entries
are put without a lock: dicts keep their insertion order and each step is atomic, so a
concurrent put at worst evicts one entry too few or too many (a memo, not a record).
"""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


def remember(memo: dict[K, V], key: K, value: V, held: int) -> None:
    """Put ``key`` → ``value`` in ``memo``, first dropping its oldest entries down to fewer
    than ``held``."""
    while len(memo) >= held:
        try:  # the oldest first; another thread may have changed the dict meanwhile
            memo.pop(next(iter(memo)), None)
        except (RuntimeError, StopIteration):
            break
    memo[key] = value
