"""Alembic migrations on SQLite and PostgreSQL: a fresh store and the stores older versions made
(version 1 and 2, which kept a `schema_version` table) all reach the schema of `schema.metadata`."""

from __future__ import annotations

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from consumer.store import open_store
from consumer.store.migrations import _config, head_revision, migrate
from consumer.store.schema import metadata
from tests.consumer.helpers import write_events
from tests.support.events import batch_write, table, with_column_lineage

VIEWS = {
    "source_job_lineage",
    "sink_job_lineage",
    "source_snapshot_lineage",
    "sink_snapshot_lineage",
    "source_partition_lineage",
    "sink_partition_lineage",
}


def _legacy_store(url: str, version: int) -> None:
    """A store as version 1 or 2 of the consumer left it: that schema and its schema_version rows."""
    engine = create_engine(url)
    with engine.connect() as connection:
        command.upgrade(_config(connection), f"000{version}")
        connection.commit()
        connection.execute(text("DROP TABLE alembic_version"))
        for applied in range(1, version + 1):
            connection.execute(
                text("INSERT INTO schema_version (version, description, applied_at) VALUES (:v, 'legacy', CURRENT_TIMESTAMP)"),
                {"v": applied},
            )
        connection.commit()
    engine.dispose()


def _schema_differences(url: str) -> list:
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return compare_metadata(MigrationContext.configure(connection), metadata)
    finally:
        engine.dispose()


def _views(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_view_names())
    finally:
        engine.dispose()


def test_a_fresh_store_matches_the_schema(store_url):
    store = open_store(store_url)
    store.dispose()
    assert _schema_differences(store_url) == []
    assert _views(store_url) == VIEWS


def test_version_1_and_2_stores_upgrade_to_the_same_schema_keeping_their_events(store_url):
    for version, expected in ((1, ["0002", "0003", "0004", "0005", "0006"]), (2, ["0003", "0004", "0005", "0006"])):
        _legacy_store(store_url, version)
        store = open_store(store_url, migrate=False)
        with store.engine.begin() as connection:  # what a legacy store holds: a namespace and a raw event
            connection.execute(
                text(
                    "INSERT INTO namespaces (name, created_at, updated_at) VALUES ('kept', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                )
            )
            connection.execute(
                text(
                    "INSERT INTO lineage_events (content_hash, event_time, kind, payload, received_at) "
                    "VALUES ('h', CURRENT_TIMESTAMP, 'RunEvent', '{}', CURRENT_TIMESTAMP)"
                )
            )
        assert migrate(store.engine) == expected
        assert migrate(store.engine) == []
        assert _schema_differences(store_url) == []
        assert _views(store_url) == VIEWS
        assert store.raw_event_count() == 1
        events = batch_write("app.job", [table("raw", "a", ["id"])], table("mart", "b", ["id"]))
        assert write_events(store, events) == 2
        assert "kept" in {row[0] for row in _rows(store, "SELECT name FROM namespaces")}
        _drop_everything(store)


def test_column_lineage_keeps_its_rows_when_its_constraints_go_and_come_back(store_url):
    engine = create_engine(store_url)
    with engine.connect() as connection:
        command.upgrade(_config(connection), "0005")
        connection.commit()
    engine.dispose()
    store = open_store(store_url, migrate=False)
    source = table("raw", "a", ["id", "name"])
    output = with_column_lineage(
        table("mart", "b", ["id", "name"]), {"id": [(source, "id")]}, indirect=[(source, "name", "FILTER")]
    )
    write_events(store, batch_write("app.job", [source], output))
    query = "SELECT * FROM column_lineage ORDER BY id"
    written = _rows(store, query)
    assert written and _foreign_keys(store_url) == 6

    assert migrate(store.engine) == ["0006"]
    assert _rows(store, query) == written and _foreign_keys(store_url) == 0
    with store.engine.connect() as connection:
        command.downgrade(_config(connection), "0005")
        connection.commit()
    assert _rows(store, query) == written and _foreign_keys(store_url) == 6
    assert migrate(store.engine) == ["0006"]
    assert _schema_differences(store_url) == []
    store.dispose()


def _foreign_keys(url: str) -> int:
    engine = create_engine(url)
    try:
        return len(inspect(engine).get_foreign_keys("column_lineage"))
    finally:
        engine.dispose()


def _rows(store, query: str) -> list:  # type: ignore[no-untyped-def]
    with store.engine.connect() as connection:
        return list(connection.execute(text(query)))


def _drop_everything(store) -> None:  # type: ignore[no-untyped-def]
    with store.engine.begin() as connection:
        for view in VIEWS:
            connection.execute(text(f"DROP VIEW {view}"))
        if connection.dialect.name == "sqlite":
            connection.execute(text("PRAGMA foreign_keys=OFF"))
        for name in inspect(connection).get_table_names():
            cascade = " CASCADE" if connection.dialect.name == "postgresql" else ""
            connection.execute(text(f"DROP TABLE {name}{cascade}"))
    store.dispose()


def test_head_revision_is_the_newest_script():
    assert head_revision() == "0006"


def test_the_read_side_loads_nothing_of_the_write_side():
    import subprocess
    import sys

    from tests.support.paths import PROJECT_ROOT

    probe = (
        "import sys, consumer.query.marquez, consumer.query.lineage_store; "
        "print(sorted(m for m in ('consumer.store.writer', 'consumer.ingest.materialize', 'consumer.ingest.validate') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
