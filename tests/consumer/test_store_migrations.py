"""Alembic migrations on SQLite and PostgreSQL: the baseline revision creates exactly the schema
`schema.metadata` declares (and the views), every revision upgrades to the newest and downgrades to
the one before it, down to an empty database, with the store's rows in it; and the answers and
stored formats that revisions must keep."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, create_engine, inspect, text

from consumer.store import open_store
from consumer.store.compressed_text import FACETS_DICTIONARY, FACETS_V1
from consumer.store.migrations import _config, current_revision, head_revision, migrate
from consumer.store.schema import metadata
from tests.consumer.helpers import write_events
from tests.support.events import BASE_TIME
from tests.support.paths import PROJECT_ROOT

DEMO_EVENTS = PROJECT_ROOT / "tests" / "fixtures" / "demo_events.jsonl"

VIEWS = {
    "source_job_lineage",
    "sink_job_lineage",
    "source_snapshot_lineage",
    "sink_snapshot_lineage",
    "source_partition_lineage",
    "sink_partition_lineage",
}


def _revisions() -> list[str]:
    """Every revision id, oldest first."""
    script = ScriptDirectory.from_config(_config(None))  # type: ignore[arg-type]
    return [revision.revision for revision in reversed(list(script.walk_revisions()))]


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


def _described(connection: Connection) -> dict[str, Any]:
    """Every table of the database but alembic_version as the database describes it: its columns
    (type, nullability, default), primary key, foreign keys, indexes and unique constraints."""
    inspector = inspect(connection)

    def listed(items: list[Any]) -> list[str]:
        return sorted(json.dumps(item, sort_keys=True, default=str) for item in items)

    return {
        name: {
            "columns": listed(
                [
                    {
                        "name": column["name"],
                        "type": repr(column["type"]),
                        "nullable": column["nullable"],
                        "default": column["default"],
                    }
                    for column in inspector.get_columns(name)
                ]
            ),
            "primary key": inspector.get_pk_constraint(name),
            "foreign keys": listed(inspector.get_foreign_keys(name)),
            "indexes": listed(inspector.get_indexes(name)),
            "unique constraints": listed(inspector.get_unique_constraints(name)),
        }
        for name in sorted(inspector.get_table_names())
        if name != "alembic_version"
    }


def _storage(connection: Connection, table: str, column: str) -> str:
    """PostgreSQL's storage strategy of a column (p plain, e external, m main, x extended)."""
    query = "SELECT attstorage FROM pg_attribute WHERE attrelid = CAST(:table AS regclass) AND attname = :column"
    return connection.execute(text(query), {"table": table, "column": column}).scalar_one()


def _move(store, direction, revision: str) -> None:  # type: ignore[no-untyped-def]
    """Alembic's upgrade or downgrade of `store` to `revision`."""
    with store.engine.connect() as connection:
        direction(_config(connection), revision)
        connection.commit()


def _revision_of(store) -> str | None:  # type: ignore[no-untyped-def]
    with store.engine.connect() as connection:
        return current_revision(connection)


def test_the_migrations_create_what_the_models_declare(store_url):
    """The newest revision's tables, column by column (types, nullability, defaults), with their keys,
    references, indexes and unique constraints, are those `metadata.create_all` makes (and Alembic's
    `compare_metadata` finds no difference); and its views and the raw events' storage, which the
    models do not declare."""
    store = open_store(store_url)
    assert _schema_differences(store_url) == []
    with store.engine.connect() as connection:
        migrated = _described(connection)
        if connection.dialect.name == "postgresql":  # frames: TOAST moves them out of line uncompressed
            assert _storage(connection, "lineage_events", "payload") == "e"
    assert _views(store_url) == VIEWS
    _move(store, command.downgrade, "base")
    assert _views(store_url) == set()
    with store.engine.begin() as connection:
        assert _described(connection) == {}
        metadata.create_all(connection)
    with store.engine.connect() as connection:
        declared = _described(connection)
    with store.engine.begin() as connection:
        metadata.drop_all(connection)
    store.dispose()
    assert set(migrated) == set(metadata.tables)
    assert migrated == declared


def test_every_revision_downgrades_and_upgrades_again_with_the_stores_rows(store_url):
    """From the newest revision down to each earlier one and up to the newest again, then down to an
    empty database and up again: each step runs on a store holding rows, and the newest answers,
    reads and writes as before."""
    from tests.consumer.helpers import dump

    revisions = _revisions()
    store = open_store(store_url)
    demo = [json.loads(line) for line in DEMO_EVENTS.read_text().splitlines() if line.strip()]
    written = write_events(store, demo)
    before, derived = _answers(store), dump(store)
    for step in reversed(range(1, len(revisions))):  # to each revision before the newest and back
        _move(store, command.downgrade, revisions[step - 1])
        assert _revision_of(store) == revisions[step - 1]
        assert migrate(store.engine) == revisions[step:]
        assert _schema_differences(store_url) == []
        assert _answers(store) == before
        assert dump(store) == derived

    _move(store, command.downgrade, "base")
    assert _revision_of(store) is None
    assert inspect(store.engine).get_table_names() == ["alembic_version"]
    assert _views(store_url) == set()
    assert migrate(store.engine) == revisions
    assert migrate(store.engine) == []
    assert _schema_differences(store_url) == []
    assert _views(store_url) == VIEWS
    assert write_events(store, demo) == written
    assert _answers(store) == before
    store.dispose()


def test_head_revision_is_the_newest_script():
    assert _revisions() == ["0001"]
    assert head_revision() == "0001"


def test_the_read_side_loads_nothing_of_the_write_side():
    import subprocess
    import sys

    probe = (
        "import sys, consumer.query.marquez, consumer.query.lineage_store; "
        "print(sorted(m for m in ('consumer.store.writer', 'consumer.ingest.materialize', 'consumer.ingest.validate') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def _answers(store) -> dict:  # type: ignore[no-untyped-def]
    """Every Marquez API answer about the store's namespaces, jobs, runs, datasets and their versions,
    lineage and column lineage (depth 20) from every dataset and job."""
    from consumer.query import marquez as mq

    answers: dict = {"namespaces": mq.list_namespaces(store, 1000, 0)}
    for namespace in answers["namespaces"]["namespaces"]:
        name = namespace["name"]
        datasets = mq.list_datasets(store, name, 1000, 0)
        jobs = mq.list_jobs(store, name, 1000, 0)
        answers[f"datasets {name}"], answers[f"jobs {name}"] = datasets, jobs
        for dataset in datasets["datasets"]:
            key = f"dataset:{name}:{dataset['name']}"
            answers[f"versions {key}"] = mq.list_dataset_versions(store, name, dataset["name"], 1000, 0)
            answers[f"lineage {key}"] = mq.lineage_graph(store, key, 20)
            answers[f"column lineage {key}"] = mq.column_lineage_graph(store, key, 20, True)
        for job in jobs["jobs"]:
            key = f"job:{name}:{job['name']}"
            answers[f"runs {key}"] = mq.list_runs(store, name, job["name"], 1000, 0)
            answers[f"lineage {key}"] = mq.lineage_graph(store, key, 20)
    answers["events"] = mq.lineage_events(store, None, None, "asc", 1000, 0)
    return json.loads(json.dumps(answers, sort_keys=True, default=str))


def _answer_digests(store) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {key: hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest() for key, value in _answers(store).items()}


def test_every_answer_is_the_recorded_one(store):
    """Every API answer on a varied set of events (Marquez's and this project's demos, the OpenLineage
    samples, a job run three times) is the one recorded (digests) before lineage was stored as job
    versions, which changed how the store keeps lineage but no answer."""
    from tests.consumer.answer_events import answer_events

    recorded = json.loads((PROJECT_ROOT / "tests" / "fixtures" / "answers_of_store_revision_0009.json").read_text())["answers"]
    write_events(store, answer_events(PROJECT_ROOT / "tests" / "fixtures"))
    digests = _answer_digests(store)
    assert [key for key in sorted(recorded.keys() | digests.keys()) if recorded.get(key) != digests.get(key)] == []


def test_compressed_json_reads_frames_and_json_text_written_around_it(store):
    """A value written through the type reads back; JSON text a bulk load wrote straight into the
    column (bypassing the type) reads as JSON rather than failing the answer."""
    from consumer.store import schema as s

    facets = {"spark_version": {"_producer": "p", "version": "4.0.0"}, "n": [1, 1.0, True, None]}
    with store.engine.begin() as connection:
        connection.execute(s.namespaces.insert().values(id=77, name="ns", created_at=BASE_TIME, updated_at=BASE_TIME))
        connection.execute(
            s.jobs.insert().values(
                id=77,
                namespace_id=77,
                name="j",
                type="BATCH",
                facets={},
                created_at=BASE_TIME,
                updated_at=BASE_TIME,
                last_seen=BASE_TIME,
            )
        )
        run = {"job_id": 77, "state": "COMPLETED", "created_at": BASE_TIME, "updated_at": BASE_TIME}
        connection.execute(s.runs.insert().values(id=77, uuid="u-77", run_seq=1, facets=facets, **run))
        connection.execute(s.runs.insert().values(id=78, uuid="u-78", run_seq=2, facets={}, **run))
        connection.execute(text("UPDATE runs SET facets = :raw WHERE id = 78"), {"raw": json.dumps(facets).encode()})
        stored = dict(connection.execute(text("SELECT id, facets FROM runs WHERE id IN (77, 78)")).all())
        read = dict(
            connection.execute(
                s.runs.select().with_only_columns(s.runs.c.id, s.runs.c.facets).where(s.runs.c.id.in_([77, 78]))
            ).all()
        )
    assert bytes(stored[77]).startswith(FACETS_V1) and len(bytes(stored[77])) < len(json.dumps(facets))
    assert read == {77: facets, 78: facets}


def test_the_facets_dictionary_is_the_one_stored_frames_were_made_with():
    """Stored facets need the built-in dictionary of their version byte to be read: its text may not
    change (a new dictionary needs a new version byte, and the old one kept for the frames made with it)."""
    assert FACETS_V1 == b"\x01"
    assert (
        hashlib.sha256(FACETS_DICTIONARY.data).hexdigest() == "0eaa8cd205338a33309a4e3cb190e4894a0afe2781667fff4205eb623e999fdc"
    )
