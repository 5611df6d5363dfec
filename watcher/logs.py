"""Logging, configured once for the daemon and the CLI.

Every record passes :class:`RedactingFilter` on its way out: the configured URLs and
secrets (:func:`watcher.config.secrets.configured_secrets`, handed over with
:func:`protect`) and any URL carrying credentials, a path or a query are scrubbed from the
message and from the traceback (web3, requests, aiohttp and websockets exceptions embed the
full URL they failed on). Error texts are redacted where they are made (chains/errors.py);
this is the safety net for the ones nobody thought of.
"""

import logging
import sys
from collections.abc import Iterable

from chains.redact import redact_text


class RedactingFilter(logging.Filter):
    """Scrubs secrets from a record's message, arguments and traceback (in place)."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: tuple[str, ...] = ()
        """The configured URLs and secret values to scrub (see :func:`protect`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Always passes the record, after redacting it: its text is rendered once here, so
        handlers and formatters downstream only ever see the redacted text."""
        message = record.getMessage()
        record.msg, record.args = redact_text(message, self.secrets), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text, self.secrets)
        if record.stack_info:
            record.stack_info = redact_text(record.stack_info, self.secrets)
        return True


REDACTING = RedactingFilter()
"""The one filter on the root handler."""


CHATTY = ("alembic", "uvicorn.error", "httpx", "mcp")
"""Libraries whose INFO lines repeat what the daemon says once in its own words (Alembic's
line per revision and context, uvicorn's "Started server process" and "running on", a line
per HTTP request): shown only at debug."""


def configure(level: str = "INFO") -> None:
    """One line per record on stderr: time, level, logger, message (redacted). Below debug,
    the start-up says one line per fact an operator needs; the libraries' details are at
    debug."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(REDACTING)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    quiet = logging.NOTSET if root.getEffectiveLevel() <= logging.DEBUG else logging.WARNING
    for name in CHATTY:
        logging.getLogger(name).setLevel(quiet)


def protect(secrets: Iterable[str]) -> None:
    """Scrub ``secrets`` (configured URLs, secret values) from every log line from now on."""
    REDACTING.secrets = tuple(sorted({*REDACTING.secrets, *secrets}, key=len, reverse=True))
