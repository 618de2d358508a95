"""Versioned schema migrations (Alembic): the scripts in `versions/` ship inside the package and
run programmatically, by `open_store(..., migrate=True)` and `consumer migrate`. Revision 0001 is
the baseline (the schema release 0.1.0 creates); each later change of the schema is a revision
of its own after it."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text

# Any constant both writers agree on: concurrent `migrate`s on PostgreSQL run one after the other.
_PG_MIGRATION_LOCK = 7_340_001


def _config(connection: Connection) -> Config:
    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parent))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(_config(None)).get_current_head()  # type: ignore[arg-type]
    assert head is not None  # noqa: S101 - the migrations always have a head (narrows the type)
    return head


def current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def is_current(engine: Engine) -> bool:
    """The store is at the newest revision already (nothing to migrate)."""
    with engine.connect() as connection:
        return current_revision(connection) == head_revision()


def migrate(engine: Engine) -> list[str]:
    """Upgrade the store to the newest revision; the revisions applied, oldest first."""
    with engine.connect() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
            connection.commit()
        try:
            return _upgrade(connection)
        finally:
            if connection.dialect.name == "postgresql":
                connection.rollback()
                connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _PG_MIGRATION_LOCK})
                connection.commit()


def _upgrade(connection: Connection) -> list[str]:
    config = _config(connection)
    before = current_revision(connection)
    connection.commit()
    command.upgrade(config, "head")
    connection.commit()
    script = ScriptDirectory.from_config(config)
    applied = [revision.revision for revision in script.iterate_revisions("head", before)]
    return list(reversed(applied))
