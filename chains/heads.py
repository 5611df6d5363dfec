"""New heads pushed by the node: an ``eth_subscribe("newHeads")`` kept alive over WebSocket.

A head notification is a *hint* that the chain moved, never a fact the watcher decides on:
whoever listens (the daemon's poller wake-up) still reads the blocks over JSON-RPC and runs
them through the head tracker, with its reorg detection. So a missed, duplicated or lying
notification costs latency, not correctness, and nothing here needs to be exact beyond the
number and hash it passes on.

:class:`HeadSubscription` runs in its own daemon thread:

* connect, send ``eth_subscribe ["newHeads"]``, call ``on_head`` with every notification;
* on any error (refused, handshake failed, connection dropped, a frame that is not a head)
  or on silence (no head for ``silence_s``: a stuck node or a half-open TCP connection
  looks exactly like a quiet chain), close, record the reason, back off (exponential,
  capped) and reconnect; the backoff resets once a head arrives on a new connection;
* :meth:`HeadSubscription.stop` ends it promptly (it closes the live connection, which
  wakes the blocked read).

:meth:`HeadSubscription.status` is what health reports show: the state, heads received,
reconnects, time since the last head, the last error, and how often a live subscription
was lost (each loss leaves the poller on its interval alone: a fallback to polling).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from websockets.sync.client import ClientConnection

from chains.redact import redact_text
from chains.ws_transport import WS_ERRORS, close_quietly, open_websocket
from guard.types import BlockHash, BlockNumber

SubscriptionState = Literal["connecting", "subscribed", "backoff", "stopped"]
"""``connecting``: dialing or waiting for the subscription id; ``subscribed``: heads flow;
``backoff``: the last attempt failed, waiting to retry; ``stopped``: :meth:`stop` was called."""


@dataclass(frozen=True)
class NewHead:
    """One ``newHeads`` notification, as far as anyone here needs it."""

    number: BlockNumber
    """Height of the new head."""
    hash: BlockHash
    """Its block hash (lower-case 0x hex)."""


@dataclass(frozen=True)
class SubscriptionStatus:
    """A snapshot of a subscription for health reports (API, metrics)."""

    url: str
    """The WebSocket URL subscribed on (unredacted: redact before showing it)."""
    state: SubscriptionState
    """See :data:`SubscriptionState`."""
    heads: int
    """Head notifications received since start."""
    connects: int
    """Connection attempts made (the first included)."""
    reconnects: int
    """Connection attempts after the first one."""
    drops: int
    """Times a live subscription (one that had been set up) ended with an error: from each,
    the chain is followed by interval polling alone until the subscription is back."""
    errors: int
    """Failures of any kind: refused connections, failed subscriptions, drops, silences."""
    last_error: str | None
    """Why the last attempt or subscription ended (kept after a recovery, for diagnosis)."""
    last_head_number: int | None
    """Height of the last head received."""
    seconds_since_last_head: float | None
    """Seconds since the last head arrived; None before the first."""
    subscribed_for_s: float | None
    """Seconds the current subscription has been up; None when it is not."""


class SubscriptionError(Exception):
    """The node refused or broke the subscription protocol (a reason to reconnect)."""


def _parse_head(result: Any) -> NewHead:
    if not isinstance(result, Mapping):
        raise SubscriptionError(f"newHeads result is not an object: {result!r:.120}")
    number, block_hash = result.get("number"), result.get("hash")
    try:
        height = int(number, 16) if isinstance(number, str) else -1
    except ValueError:
        height = -1
    if height < 0:
        raise SubscriptionError(f"newHeads number is not a hex quantity: {number!r:.80}")
    if not (isinstance(block_hash, str) and block_hash.startswith("0x") and len(block_hash) == 66):
        raise SubscriptionError(f"newHeads hash is not 32-byte hex: {block_hash!r:.80}")
    return NewHead(number=BlockNumber(height), hash=BlockHash(block_hash.lower()))


class HeadSubscription:
    """``eth_subscribe("newHeads")`` on ``url``, kept alive in a daemon thread.

    ``on_head`` is called in the subscription's thread for every head (keep it short: hand
    the work to another thread); an exception from it is recorded, not fatal. ``silence_s``
    is how long without a head counts as a dead subscription (pick a multiple of the block
    time). Backoff between attempts starts at ``min_backoff_s`` and doubles up to
    ``max_backoff_s``."""

    def __init__(
        self,
        url: str,
        on_head: Callable[[NewHead], None],
        *,
        silence_s: float = 60.0,
        min_backoff_s: float = 0.25,
        max_backoff_s: float = 10.0,
        open_timeout_s: float = 5.0,
        name: str = "heads",
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        if silence_s <= 0 or min_backoff_s <= 0 or max_backoff_s < min_backoff_s:
            raise ValueError(
                "silence_s and min_backoff_s must be > 0 and max_backoff_s >= min_backoff_s"
            )
        self.url = url
        self.on_head = on_head
        self.on_error = on_error
        self.silence_s = silence_s
        self.min_backoff_s = min_backoff_s
        self.max_backoff_s = max_backoff_s
        self.open_timeout_s = open_timeout_s
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._conn: ClientConnection | None = None
        self._thread = threading.Thread(target=self._run, name=f"{name}-ws", daemon=True)
        self._state: SubscriptionState = "connecting"
        self._heads = 0
        self._connects = 0
        self._drops = 0
        self._errors = 0
        self._last_error: str | None = None
        self._last_head: NewHead | None = None
        self._last_head_at: float | None = None
        self._subscribed_at: float | None = None

    # -- life cycle ----------------------------------------------------------------------

    def start(self) -> HeadSubscription:
        """Start the thread (returns at once; the first connection is made in the thread)."""
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """End the subscription and wait (up to ``timeout_s``) for the thread to finish."""
        self._stop.set()
        with self._lock:
            conn = self._conn
            self._state = "stopped"
        close_quietly(conn)
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    @property
    def alive(self) -> bool:
        """The thread is running."""
        return self._thread.is_alive()

    def status(self) -> SubscriptionStatus:
        """A consistent snapshot of the subscription's state and counters."""
        now = time.monotonic()
        with self._lock:
            return SubscriptionStatus(
                url=self.url,
                state=self._state,
                heads=self._heads,
                connects=self._connects,
                reconnects=max(0, self._connects - 1),
                drops=self._drops,
                errors=self._errors,
                last_error=self._last_error,
                last_head_number=None if self._last_head is None else int(self._last_head.number),
                seconds_since_last_head=None
                if self._last_head_at is None
                else now - self._last_head_at,
                subscribed_for_s=None if self._subscribed_at is None else now - self._subscribed_at,
            )

    # -- the thread ----------------------------------------------------------------------

    def _run(self) -> None:
        backoff = self.min_backoff_s
        while not self._stop.is_set():
            attempt = _Attempt()
            try:
                self._session(attempt)
            except (SubscriptionError, *WS_ERRORS) as exc:
                if self._stop.is_set():
                    break
                self._failed(_describe(exc), dropped=attempt.subscribed)
            if attempt.got_head:
                backoff = self.min_backoff_s
            with self._lock:
                if self._stop.is_set():
                    break
                self._state = "backoff"
                self._subscribed_at = None
            if self._stop.wait(backoff):
                break
            backoff = min(self.max_backoff_s, backoff * 2)
        with self._lock:
            self._state = "stopped"
            self._subscribed_at = None

    def _failed(self, reason: str, dropped: bool) -> None:
        reason = redact_text(reason, [self.url])  # websockets' errors quote the URL
        with self._lock:
            self._errors += 1
            self._last_error = reason
            if dropped:
                self._drops += 1
        if self.on_error is not None:
            with contextlib.suppress(Exception):  # a reporting hook must not end the subscription
                self.on_error(reason)

    def _session(self, attempt: _Attempt) -> None:
        """One connection: subscribe, then pass heads on until it fails (raises) or
        :meth:`stop` is called (returns)."""
        with self._lock:
            if self._stop.is_set():
                return
            self._state = "connecting"
            self._connects += 1
        conn = open_websocket(self.url, self.open_timeout_s)
        with self._lock:
            self._conn = conn
            stopped = self._stop.is_set()
        try:
            if stopped:  # stop() ran while we were dialing: it could not close this one
                return
            subscription = self._subscribe(conn)
            attempt.subscribed = True
            with self._lock:
                if self._stop.is_set():
                    return
                self._state = "subscribed"
                self._subscribed_at = time.monotonic()
            while not self._stop.is_set():
                try:
                    text = conn.recv(timeout=self.silence_s)
                except TimeoutError:
                    raise SubscriptionError(
                        f"no new head for {self.silence_s:g} s: the subscription is presumed dead"
                    ) from None
                head = self._notification(text, subscription)
                if head is not None:
                    attempt.got_head = True
                    self._deliver(head)
        finally:
            with self._lock:
                self._conn = None
            close_quietly(conn)

    def _deliver(self, head: NewHead) -> None:
        with self._lock:
            self._heads += 1
            self._last_head = head
            self._last_head_at = time.monotonic()
        try:
            self.on_head(head)
        except Exception as exc:  # the listener's bug is not the node's: keep the subscription
            with self._lock:
                self._errors += 1
                self._last_error = f"on_head failed: {type(exc).__name__}: {exc}"

    def _subscribe(self, conn: ClientConnection) -> str:
        """Send ``eth_subscribe``; return the subscription id (or raise SubscriptionError)."""
        conn.send(
            json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": ["newHeads"]}
            )
        )
        deadline = time.monotonic() + self.open_timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SubscriptionError(f"no answer to eth_subscribe in {self.open_timeout_s:g} s")
            try:
                answer = json.loads(conn.recv(timeout=remaining))
            except TimeoutError:
                continue
            except ValueError as exc:
                raise SubscriptionError(f"eth_subscribe answer is not JSON: {exc}") from exc
            if not isinstance(answer, Mapping) or answer.get("id") != 1:
                continue  # not our answer (a stray notification): keep waiting
            if answer.get("error") is not None:
                raise SubscriptionError(f"the node refused eth_subscribe: {answer['error']}")
            result = answer.get("result")
            if not isinstance(result, str) or not result:
                raise SubscriptionError(f"eth_subscribe returned no subscription id: {result!r}")
            return result

    def _notification(self, text: str | bytes, subscription: str) -> NewHead | None:
        """The head in a frame, None for a frame that is not ours (ignored)."""
        try:
            message = json.loads(text)
        except ValueError as exc:
            raise SubscriptionError(f"notification is not JSON: {text!r:.120}") from exc
        if not isinstance(message, Mapping) or message.get("method") != "eth_subscription":
            return None
        params = message.get("params")
        if not isinstance(params, Mapping) or params.get("subscription") != subscription:
            return None
        return _parse_head(params.get("result"))


class _Attempt:
    """How far one connection attempt got (to tell a drop from a failed dial)."""

    def __init__(self) -> None:
        self.subscribed = False
        self.got_head = False


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SubscriptionError):
        return str(exc)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
