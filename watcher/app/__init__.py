"""The daemon's one wiring point, and its run loop (import the submodules by full path).

- :mod:`.build`: :func:`~watcher.app.build.build` constructs every part in order (store,
  outbox plan, chain clients and engines, signer, handoff, delivery, receipts, sources,
  heads) and hands each one the narrow collaborators it needs; nothing is wired later.
- :mod:`.chains`: each chain's poll job (start-up check, catch-up, health).
- :mod:`.daemon`: :class:`~watcher.app.daemon.App`, the built parts and their life cycle
  (scheduler jobs, start, stop, ``finality run``). The HTTP API sits above and is passed in.
"""
