"""The service: config, store, scheduler, HTTP API, CLI."""
