"""The alert channels ``[[alerts]] type`` may name: the built-in ones and any registered.

A new channel is one module defining an :class:`~watcher.delivery.channel.AlertChannel`
plus one line here (or a :func:`register` call before the daemon is built, for a channel
that lives outside this package). The ``type`` also has to be accepted by the config's
``[[alerts]]`` model (watcher/config).
"""

from __future__ import annotations

from watcher.delivery.channel import AlertChannel
from watcher.delivery.log_channel import LOG
from watcher.delivery.slack import SLACK
from watcher.delivery.webhook import WEBHOOK

_CHANNELS: dict[str, AlertChannel] = {c.name: c for c in (WEBHOOK, SLACK, LOG)}


def register(channel: AlertChannel) -> None:
    """Make ``channel`` selectable by its name (replacing a channel of the same name)."""
    _CHANNELS[channel.name] = channel


def channel(name: str) -> AlertChannel | None:
    """The channel called ``name``, or None if there is none."""
    return _CHANNELS.get(name)


def names() -> list[str]:
    """Every channel's name, sorted."""
    return sorted(_CHANNELS)
