"""Errors raised by the pure core.

::

    GuardError(Exception)            anything the core refuses in normal operation
    ├── InvalidHash(ValueError)      a block or tx hash that is not 0x + 64 hex digits
    ├── InvalidAddress(ValueError)   an address that is not 0x + 40 hex digits
    ├── InvalidPolicy(ValueError)    a policy or settlement with impossible numbers
    ├── CanonicalError(TypeError)    a value with no canonical JSON form (guard.canonical)
    ├── ReceiptInvalid(ValueError)   a signed receipt that does not verify; ``reason`` says
    │                                which check failed (``header 812: parentHash does not
    │                                match block 811``, ``signature: signer 0x… is not trusted``)
    └── ReceiptUnreadable(ValueError)  a receipt's text that is not JSON at all (not UTF-8,
                                     a syntax error): nothing was there to verify

The receipt verifier's lower-level errors (``RlpError``, ``HeaderError``, ``ProofError``,
``TransactionError``) are GuardErrors too; :func:`guard.verify.verify_receipt` turns each
into a ``ReceiptInvalid`` naming where in the receipt it happened.
"""


class GuardError(Exception):
    """Base of every error the core raises on bad input."""


class InvalidHash(GuardError, ValueError):
    """A hash is not 0x followed by 64 hex digits."""

    def __init__(self, what: str, value: object) -> None:
        super().__init__(f"{what}: {value!r} is not a 0x-prefixed 32-byte hex hash")
        self.what = what
        self.value = value


class InvalidAddress(GuardError, ValueError):
    """An address is not 0x followed by 40 hex digits (or its EIP-55 case is wrong)."""

    def __init__(self, what: str, value: object, problem: str | None = None) -> None:
        super().__init__(
            f"{what}: {value!r} {problem or 'is not a 0x-prefixed 20-byte hex address'}"
        )
        self.what = what
        self.value = value


class InvalidPolicy(GuardError, ValueError):
    """A timeout, wait or confirmation count that cannot be honoured."""


class ReceiptInvalid(GuardError, ValueError):
    """A receipt failed verification; ``reason`` is the one-line, precise cause. A reason
    quotes values from the receipt, which anyone writes: any character that is not
    printable (a newline, a terminal control, a lone surrogate) is shown escaped, so the
    reason stays one line that any terminal or log can print."""

    def __init__(self, reason: str) -> None:
        reason = printable(reason)
        super().__init__(reason)
        self.reason = reason


def printable(text: str) -> str:
    """``text`` with each character that is not printable written as its escape (``\n``,
    ``\x1b``, ``\ud800``)."""
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text
    )


class ReceiptUnreadable(GuardError, ValueError):
    """A receipt's text is not JSON (not UTF-8, a syntax error); ``reason`` says where (one
    printable line, as :class:`ReceiptInvalid`'s)."""

    def __init__(self, reason: str) -> None:
        reason = printable(reason)
        super().__init__(reason)
        self.reason = reason
