"""The ``[delivery] secret``'s key: Standard Webhooks' ``whsec_<base64>`` form, or raw text.

Receivers verify deliveries with a Standard Webhooks library (``Webhook("whsec_…")``), which
takes the base64 bytes after the prefix as the HMAC key; the config checks the form at load
(a ValueError naming the problem, never the value) and the sender signs with the same bytes.
"""

from __future__ import annotations

import base64
import binascii

WEBHOOK_SECRET_PREFIX = "whsec_"
"""Standard Webhooks' marker of a base64 secret (what its libraries' ``Webhook(secret)`` take)."""


def webhook_key(secret: str) -> bytes:
    """The Standard Webhooks key of ``secret``: the base64 bytes after ``whsec_``, or the
    secret's UTF-8 bytes without that prefix. Raises ValueError on bad base64 (the config
    checks it at load, so a running daemon never does)."""
    if not secret.startswith(WEBHOOK_SECRET_PREFIX):
        return secret.encode()
    try:
        key = base64.b64decode(secret.removeprefix(WEBHOOK_SECRET_PREFIX), validate=True)
    except binascii.Error:
        raise ValueError("a whsec_ secret must be base64 after the prefix") from None
    if not key:
        raise ValueError("a whsec_ secret holds no key after the prefix")
    return key
