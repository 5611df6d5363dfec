"""The HTTP API (FastAPI): register settlements, follow them, ask about any tx hash.

Every error answers ``{"error": "<one line naming the field and the problem>", "fields":
[...]}`` with a 4xx status (:mod:`.errors`); nothing a client sends can corrupt stored state
(registration is one insert, idempotent on (chain, tx hash)). OpenAPI is served at
``/docs`` and ``/openapi.json``.

Modules (import them by their full path; this ``__init__`` re-exports nothing):

- :mod:`.server`: ``create_app``, the one place the routers are mounted;
- :mod:`.deps`: ``ApiDeps``, the narrow collaborators the routes use (never the service);
- :mod:`.errors`: ``ApiError`` and the error shape; :mod:`.views`: settlement, event and
  chain views shared by several routers; :mod:`.registration`: request bodies and their
  checks; :mod:`.sender_facts`, :mod:`.recorded_heads`: what those read;
- routers, one per topic, none importing another: :mod:`.settlements`, :mod:`.chains`,
  :mod:`.events`, :mod:`.deliveries`, :mod:`.receipts`, :mod:`.handoff`, :mod:`.sources`,
  :mod:`.health` (``/healthz``, ``/metrics``); the Prometheus collector in :mod:`.metrics`.
"""
