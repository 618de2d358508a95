"""Versioned schema migrations: each step runs once, in order, recorded in `schema_version`."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Callable

from sqlalchemy import Connection, Engine, inspect, select

from consumer.store.schema import VIEWS, metadata, schema_version


def _v1_initial(connection: Connection) -> None:
    metadata.create_all(connection)
    for name, body in VIEWS.items():
        connection.exec_driver_sql(f"CREATE VIEW {name} AS {body}")


def _v2_dataset_versions_by_run(connection: Connection) -> None:
    # v1 stores were created before this index existed; create_all gives it to new stores already
    connection.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_dataset_versions_run ON dataset_versions (run_id)")


MIGRATIONS: tuple[tuple[int, str, Callable[[Connection], None]], ...] = (
    (1, "tables, indexes and the Paimon lineage views", _v1_initial),
    (2, "index dataset versions by the run that wrote them", _v2_dataset_versions_by_run),
)
LATEST_VERSION = MIGRATIONS[-1][0]


def current_version(connection: Connection) -> int:
    if not inspect(connection).has_table("schema_version"):
        return 0
    versions = connection.execute(select(schema_version.c.version)).scalars().all()
    return max(versions, default=0)


def migrate(engine: Engine) -> list[int]:
    """Apply every pending migration, each in its own transaction; the versions applied."""
    applied: list[int] = []
    for version, description, step in MIGRATIONS:
        with engine.begin() as connection:
            if current_version(connection) >= version:
                continue
            step(connection)
            connection.execute(schema_version.insert().values(
                version=version, description=description, applied_at=datetime.now(timezone.utc),
            ))
            applied.append(version)
    return applied
