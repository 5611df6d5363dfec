"""Off-chain settlement sources: payment processors and job queues behind one interface.

Each adapter implements :class:`guard.source.SettlementSource`; :mod:`.registry` finds them
by kind (built-ins, and third-party ones through the ``finality_watcher.sources`` entry
points; each kind's settings model is found the same way: watcher.config.source_kinds);
:mod:`.poller` polls the watched settlements of every configured source on the daemon's
scheduler and records decisions exactly as the chain engine does (:mod:`.record`);
:mod:`.inbox` keeps verified webhooks until the source's lease owner applies them;
:mod:`.settlements` makes and shows their rows. The HTTP side is in watcher/api/
(``source_settlements`` registers them, ``sources`` receives Stripe's webhooks).

A source settlement is a row of ``settlements`` like any other: ``chain`` is the source's
configured name, ``tx_hash`` the reference (PaymentIntent id, job id, task id), and
``finality_mode`` the source's kind.
"""
