"""What may be shown of a configured URL, and of an error text that may carry one.

Providers put API keys in an endpoint's path (``https://eth.example/v2/KEY``) or query
(``?apikey=KEY``) and credentials in its userinfo (``https://user:pw@host/``); a Slack
webhook URL is itself the secret, a store URL carries a password. Whatever goes out of the
daemon (API answers, stored events, alert bodies, log lines, start-up errors, CLI output)
shows such a URL only as :func:`redact_url` makes it: scheme, host and port, so a reader
still knows *which* endpoint it was, and ``/…`` where something was left out.

Error texts are the other way a URL leaks: requests, aiohttp, websockets and web3 put the
full URL into their exceptions, sometimes in pieces (``HTTPConnectionPool(host='h',
port=1): Max retries exceeded with url: /v2/KEY?apikey=…``). :func:`redact_text` scrubs a
text of every configured URL and of each secret piece of it (userinfo, password, path,
query, path segments and query values long enough to be keys), and of any other URL that
carries userinfo, a path or a query. Pieces shorter than :data:`MIN_PIECE` are left alone:
they cannot be told apart from ordinary words (a path ``/rpc`` would blank out
``rpc_unhealthy``), and keys are long.

This is the one redaction of the project: ``chains.health.redact`` and the API's views
use :func:`redact_url`; the chain errors, the delivery outcomes and the logging filter
(``watcher/logs.py``) use :func:`redact_text`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, unquote, urlsplit

MARK = "/…"
"""What a redacted URL ends with when a path, query or fragment was left out."""

HIDDEN = "[redacted]"
"""What a secret piece of a URL is replaced with inside a text."""

MIN_PIECE = 8
"""Shortest path segment or query value scrubbed on its own (API keys are longer)."""

MIN_PASSWORD = 4
"""Shortest password or user name scrubbed on its own."""

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]+")
_TRAILING = ".,;:!?)]}'\""
_LOCAL_SCHEMES = ("sqlite:", "file:")


def redact_url(url: str, *, mark: bool = True) -> str:
    """``url`` without userinfo, path, query and fragment: ``scheme://host:port`` (an IPv6
    host in brackets), then :data:`MARK` if anything but userinfo was dropped (``mark``;
    off for a signed receipt's ``observed_by``, which names endpoints by origin)."""
    scheme, sep, _ = url.partition("://")
    if not sep:
        return "…"
    try:
        parts = urlsplit(url)
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # a port that is not a number: nothing of the rest is trusted
        return f"{scheme}://…"
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    dropped = bool(parts.path.strip("/") or parts.query or parts.fragment)
    return f"{parts.scheme}://{host}{port}{MARK if mark and dropped else ''}"


@functools.lru_cache(maxsize=1024)
def secret_pieces(url: str) -> tuple[str, ...]:
    """The parts of ``url`` a text must not show, longest first (the URL itself is replaced
    by its redacted form first, see :func:`redact_text`): its userinfo, password (or a user
    name standing alone), path with query, path, query, fragment, and path
    segments and query values of :data:`MIN_PIECE` characters or more (each also
    percent-decoded, as clients log either form)."""
    try:
        parts = urlsplit(url)
        username, password = parts.username, parts.password
    except ValueError:
        return ()
    pieces: set[str] = set()
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    # A user name is a credential only when it stands alone (``https://KEY@host``): beside
    # a password it is a name like ``postgres``, which ordinary text contains.
    for value in (userinfo, password, None if password else username):
        if value and (len(value) >= MIN_PASSWORD or ":" in value):
            pieces.add(value)
    path_query = parts.path + (f"?{parts.query}" if parts.query else "")
    for value in (path_query, parts.path, parts.query, parts.fragment):
        if len(value.strip("/")) >= MIN_PASSWORD:
            pieces.add(value)
    pieces.update(s for s in parts.path.split("/") if len(s) >= MIN_PIECE)
    pieces.update(v for _, v in parse_qsl(parts.query) if len(v) >= MIN_PIECE)
    pieces |= {unquote(p) for p in pieces}
    return tuple(sorted((p for p in pieces if p), key=len, reverse=True))


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with each URL of ``secrets`` shown as :func:`redact_url` shows it, each of
    their :func:`secret_pieces` replaced by :data:`HIDDEN`, and any other URL in it that
    carries userinfo, a path or a query redacted too."""
    urls = [s for s in secrets if s]
    for url in sorted(urls, key=len, reverse=True):
        if url in text:
            text = text.replace(url, redact_url(url))
    text = _URL.sub(_redact_match, text)
    pieces = sorted({p for url in urls for p in secret_pieces(url)}, key=len, reverse=True)
    for piece in pieces:
        if piece in text:
            text = text.replace(piece, HIDDEN)
    return text


def _redact_match(match: re.Match[str]) -> str:
    """One URL found in a text, redacted (trailing punctuation kept as text)."""
    found = match.group(0)
    if found.lower().startswith(_LOCAL_SCHEMES):
        return found  # a file's path, not a network address with a key in it
    url = found.rstrip(_TRAILING)
    return redact_url(url) + found[len(url) :]
