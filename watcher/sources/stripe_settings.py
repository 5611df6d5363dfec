"""The settings of a ``stripe_payment_intent`` source, apart from the adapter.

The configuration and the API's webhook routes need these (the kind's name, its keys, their
checks) whether or not the ``stripe`` package is installed; only the adapter,
:mod:`watcher.sources.stripe_source`, imports it. So a daemon without the ``stripe`` extra
starts, and a ``[[sources]]`` table of this kind is a configuration error naming the extra.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from watcher.config.base import KeyedErrors, Loc
from watcher.config.sources import SourceConfig

KIND = "stripe_payment_intent"
"""The settlement kind a Stripe source serves."""


class StripeSettings(SourceConfig):
    """The keys of a ``stripe_payment_intent`` table (docs/sources.md)::

    [[sources]]
    name = "stripe"
    kind = "stripe_payment_intent"
    api_key = "${STRIPE_API_KEY}"          # polling; omit for webhooks only
    webhook_secret = "${STRIPE_WEBHOOK_SECRET}"
    finality_window_s = 604800             # final 7 days after success, if no refund
    timeout_s = 1209600                    # longer than the window
    max_wait_s = 1209600
    """

    api_key: str | None = None
    """Secret API key for polling (``sk_...``); None for webhooks only."""
    api_base: str | None = None
    """API base URL (``https://api.stripe.com`` when None)."""
    webhook_secret: str | None = None
    """The endpoint's signing secret (``whsec_...``); None disables the webhook."""
    webhook_tolerance_s: int = Field(default=300, ge=1)
    """Largest age of a webhook's signed timestamp; older is refused (replay)."""
    finality_window_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """A succeeded payment is final this long after success if no refund or dispute
    appeared; None: final only when its balance transaction is ``available``."""

    @model_validator(mode="after")
    def _check_stripe(self) -> StripeSettings:
        problems: list[tuple[Loc, str]] = []
        if self.api_key is None and self.webhook_secret is None:
            problems.append(
                (("api_key",), "a stripe source needs api_key (polling), webhook_secret, or both")
            )
        if self.api_base is not None and not self.api_base.startswith(("http://", "https://")):
            problems.append((("api_base",), "must be an http:// or https:// URL"))
        window = self.finality_window_s
        if window is not None and window >= self.timeout_s:
            problems.append(
                (
                    ("finality_window_s",),
                    f"must be below timeout_s ({self.timeout_s}): payments would time out "
                    "before the window could confirm them; raise timeout_s",
                )
            )
        if problems:
            raise KeyedErrors(problems)
        return self
