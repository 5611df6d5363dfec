"""Alembic environment: migrations run on the connection the store hands over."""

from alembic import context

from watcher.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
context.run_migrations()
