"""The API's request and response models (pydantic only, no FastAPI): what ``/openapi.json``
describes, and what a client library imports to read the answers without the daemon.

- :mod:`.errors`: the one error shape ``{"error", "fields"}``;
- :mod:`.settlements`: registration bodies, the settlement view, the listing page, the batch.
- :mod:`.console`: the operator console's reads (timeline, search, time to final, newest event).
"""
