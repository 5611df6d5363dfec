"""``finality``: the command line (entry point :func:`watcher.cli.main.main`; also
``python -m watcher.cli``).

Modules (import them by their full path; this ``__init__`` re-exports nothing):

- :mod:`.main`: the parser, the command table and ``main``;
- :mod:`.common`: what every command uses (exit codes, :class:`~.common.CliError`, the
  daemon URL, the HTTP client, the output helpers);
- one module per command group: :mod:`.daemon` (``run``), :mod:`.settlements` (``status``,
  ``watch``, ``settlement``), :mod:`.chains` (``chains``, ``reorgs``), :mod:`.receipts`
  (``verify``...), :mod:`.delivery` (``deliveries``), :mod:`.handoff` (``handoffs``).
"""
