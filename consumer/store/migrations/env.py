"""Alembic environment: run by `consumer.store.migrations.migrate` on the connection it passes in
`config.attributes["connection"]` (never from a URL in an ini file). SQLite alters tables in batch
mode (copy and rename), the only way it can change constraints."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    render_as_batch=connection.dialect.name == "sqlite",
    transaction_per_migration=True,
)
with context.begin_transaction():
    context.run_migrations()
