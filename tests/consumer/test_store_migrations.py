"""Alembic migrations on SQLite and PostgreSQL: a fresh store and the stores older versions made
(version 1 and 2, which kept a `schema_version` table) all reach the schema of `schema.metadata`."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import datetime, timedelta

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from consumer.store import open_store
from consumer.store.compressed_text import FACETS_DICTIONARY, FACETS_V1
from consumer.store.migrations import _config, head_revision, migrate
from consumer.store.schema import metadata
from tests.consumer.helpers import write_events
from tests.support.events import BASE_TIME, batch_write, table, with_column_lineage
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


def _revisions(first: int, last: int) -> list[str]:
    return [f"{number:04}" for number in range(first, last + 1)]


def test_version_1_and_2_stores_upgrade_to_the_same_schema_keeping_their_events(store_url):
    for version, expected in ((1, _revisions(2, 16)), (2, _revisions(3, 16))):
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
        assert list(store.raw_payloads()) == [["{}"]]
        events = batch_write("app.job", [table("raw", "a", ["id"])], table("mart", "b", ["id"]))
        assert write_events(store, events) == 2
        assert "kept" in {row[0] for row in _rows(store, "SELECT name FROM namespaces")}
        _drop_everything(store)


def test_column_lineage_keeps_its_rows_when_its_constraints_go_and_come_back(store_url):
    store = open_store(store_url)
    source = table("raw", "a", ["id", "name"])
    output = with_column_lineage(
        table("mart", "b", ["id", "name"]), {"id": [(source, "id")]}, indirect=[(source, "name", "FILTER")]
    )
    write_events(store, batch_write("app.job", [source], output))
    _move(store, command.downgrade, "0005")
    query = "SELECT * FROM column_lineage ORDER BY id"
    written = _rows(store, query)
    assert written and _foreign_keys(store_url) == 6

    _move(store, command.upgrade, "0006")
    assert _rows(store, query) == written and _foreign_keys(store_url) == 0
    _move(store, command.downgrade, "0005")
    assert _rows(store, query) == written and _foreign_keys(store_url) == 6
    assert migrate(store.engine) == ["0006", "0007", "0008", "0009", "0010", "0011", "0012", "0013", "0014", "0015", "0016"]
    assert _schema_differences(store_url) == []
    store.dispose()


def _move(store, direction, revision: str) -> None:  # type: ignore[no-untyped-def]
    """Alembic's upgrade or downgrade of `store` to `revision`."""
    with store.engine.connect() as connection:
        direction(_config(connection), revision)
        connection.commit()


def test_raw_events_are_compressed_in_place_and_every_answer_stays_the_same(store_url):
    """A store as the release before compression wrote it (revision 0006: each raw event's text as
    received), upgraded: the same raw events, the same events API and replay answers, the same
    derived rows; and down again, the texts as they were."""
    from consumer.query.marquez.catalog import lineage_events
    from tests.consumer.helpers import dump

    demo = [line for line in DEMO_EVENTS.read_text().splitlines() if line.strip()]
    store = open_store(store_url)
    write_events(store, [json.loads(line) for line in demo])
    derived = dump(store)
    _move(store, command.downgrade, "0006")
    texts = sorted(row[0] for row in _rows(store, "SELECT payload FROM lineage_events"))
    assert texts == sorted(
        json.dumps(json.loads(line), sort_keys=True, separators=(",", ":"), ensure_ascii=False) for line in demo
    )

    assert migrate(store.engine) == ["0007", "0008", "0009", "0010", "0011", "0012", "0013", "0014", "0015", "0016"]
    assert _schema_differences(store_url) == []
    assert dump(store) == derived
    stored = _rows(store, "SELECT payload FROM lineage_events")
    assert all(isinstance(payload, bytes) for (payload,) in stored)
    assert sum(len(payload) for (payload,) in stored) < 0.5 * sum(len(text.encode()) for text in texts)
    assert sorted(text for chunk in store.raw_payloads() for text in chunk) == texts
    answer = lineage_events(store, None, None, "asc", 1000, 0)
    assert answer["totalCount"] == len(demo)
    assert sorted(json.dumps(event, sort_keys=True) for event in answer["events"]) == sorted(
        json.dumps(json.loads(text), sort_keys=True) for text in texts
    )

    _move(store, command.downgrade, "0006")
    assert sorted(row[0] for row in _rows(store, "SELECT payload FROM lineage_events")) == texts
    store.dispose()


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


def test_dataset_version_contents_are_moved_in_place_and_every_answer_stays_the_same(store_url):
    """A store in the shape revision 0007 gave it (each version with its fields and facets), made by
    the downgrade of one written now, upgraded again: every API answer is the same, and versions
    of one content share its row."""
    from tests.consumer.helpers import dump

    store = open_store(store_url)
    demo = [json.loads(line) for line in DEMO_EVENTS.read_text().splitlines() if line.strip()]
    repeated = batch_write("app.daily", [table("raw", "a", ["id"], snapshot="a1")], table("mart", "b", ["id"], snapshot="b1"))
    repeated += batch_write("app.daily", [table("raw", "a", ["id"], snapshot="a2")], table("mart", "b", ["id"], snapshot="b2"))
    write_events(store, demo + repeated)
    before, derived = _answers(store), dump(store)
    _move(store, command.downgrade, "0007")
    assert _rows(store, "SELECT count(*) FROM dataset_versions WHERE fields IS NOT NULL")[0][0] > 0

    assert migrate(store.engine) == ["0008", "0009", "0010", "0011", "0012", "0013", "0014", "0015", "0016"]
    assert _schema_differences(store_url) == []
    assert _answers(store) == before
    assert dump(store) == derived
    versions, contents = (
        _rows(store, f"SELECT count(*) FROM {name}")[0][0] for name in ("dataset_versions", "dataset_version_contents")
    )
    assert contents < versions
    shared = "SELECT count(DISTINCT content_id) FROM dataset_versions v JOIN datasets d ON d.id = v.dataset_id WHERE d.name LIKE '%mart.db/b'"
    assert _rows(store, shared)[0][0] == 1
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
    assert head_revision() == "0016"


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


def _answer_digests(store) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {key: hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest() for key, value in _answers(store).items()}


def test_job_versions_are_made_in_place_and_every_answer_stays_the_releases(store_url):
    """Every API answer on a varied set of events (Marquez's and this project's demos, the OpenLineage
    samples, a job run three times) is the one the release before job versions gave (digests
    recorded with it); a store in that release's shape (revision 0009, made by the downgrade)
    upgraded in place answers the same again; the job's next run with the same lineage then points
    to the version the upgrade made."""
    from tests.consumer.answer_events import answer_events
    from tests.consumer.helpers import dump

    recorded = json.loads((PROJECT_ROOT / "tests" / "fixtures" / "answers_of_store_revision_0009.json").read_text())["answers"]
    store = open_store(store_url)
    write_events(store, answer_events(PROJECT_ROOT / "tests" / "fixtures"))
    digests = _answer_digests(store)
    assert [key for key in sorted(recorded.keys() | digests.keys()) if recorded.get(key) != digests.get(key)] == []
    derived = dump(store)

    _move(store, command.downgrade, "0009")
    assert "job_version_id" not in {column["name"] for column in inspect(store.engine).get_columns("runs")}
    assert migrate(store.engine) == ["0010", "0011", "0012", "0013", "0014", "0015", "0016"]
    assert _schema_differences(store_url) == []
    assert _answer_digests(store) == digests
    assert dump(store) == derived

    versions = _rows(store, "SELECT count(*) FROM job_versions")[0][0]
    next_run = batch_write(
        "app.daily",
        [table("raw", "a", ["id", "x"], snapshot="a9")],
        table("mart", "b", ["id", "x"], snapshot="b9"),
        run_id="00000000-0000-0000-0000-000000000009",
        start=BASE_TIME + timedelta(days=9),
    )
    write_events(store, next_run)
    assert _rows(store, "SELECT count(*) FROM job_versions")[0][0] == versions
    daily = "SELECT count(*) FROM runs r JOIN jobs j ON j.id = r.job_id WHERE j.name = 'app.daily' AND r.job_version_id = j.current_version_id"
    assert _rows(store, daily)[0][0] == 1
    store.dispose()


def _facet_bytes(store) -> int:  # type: ignore[no-untyped-def]
    """The stored bytes of every run's and dataset version's facets."""
    size = "length(facets)" if store.engine.dialect.name == "sqlite" else "pg_column_size(facets)"
    return sum(_rows(store, f"SELECT coalesce(sum({size}), 0) FROM {name}")[0][0] for name in ("runs", "dataset_versions"))


def test_per_run_facets_are_compressed_in_place_and_every_answer_stays_the_same(store_url):
    """A store with the per-run facets as JSON (revision 0012, made by the downgrade of one written
    now), upgraded again: the facets are frames that take less than half their JSON, and every API
    answer and derived row is the same."""
    from tests.consumer.helpers import dump

    store = open_store(store_url)
    demo = [json.loads(line) for line in DEMO_EVENTS.read_text().splitlines() if line.strip()]
    write_events(store, demo)
    before, derived, compressed = _answers(store), dump(store), _facet_bytes(store)
    _move(store, command.downgrade, "0012")
    kind = "typeof(facets)" if store.engine.dialect.name == "sqlite" else "pg_typeof(facets)::text"
    assert {row[0] for row in _rows(store, f"SELECT DISTINCT {kind} FROM runs")} == {"text" if "sqlite" in store_url else "jsonb"}
    as_json = _facet_bytes(store)

    assert migrate(store.engine) == ["0013", "0014", "0015", "0016"]
    assert _schema_differences(store_url) == []
    assert _answers(store) == before
    assert dump(store) == derived
    # (PostgreSQL's JSONB orders an object's keys its own way: the frames of the same facets differ a little)
    assert max(compressed, _facet_bytes(store)) < as_json / 2
    store.dispose()


def test_run_states_and_latest_run_ids_go_in_place_and_every_answer_stays_the_same(store_url):
    """A store with `run_states` and `jobs.latest_run_id` (revision 0013, made by the downgrade of one
    written now, which rebuilds both from the raw events and the runs), upgraded again: both are gone
    and every API answer and derived row is the same, the jobs' latest runs among them."""
    from tests.consumer.helpers import dump

    store = open_store(store_url)
    demo = [json.loads(line) for line in DEMO_EVENTS.read_text().splitlines() if line.strip()]
    write_events(store, demo)
    before, derived = _answers(store), dump(store)
    _move(store, command.downgrade, "0013")
    run_events = "SELECT count(DISTINCT run_uuid || event_type || event_time) FROM lineage_events WHERE kind = 'RunEvent'"
    assert _rows(store, "SELECT count(*) FROM run_states")[0][0] == _rows(store, run_events)[0][0] > 0
    latest = "SELECT count(*) FROM jobs j WHERE latest_run_id IS NOT NULL"
    assert _rows(store, latest)[0][0] == _rows(store, "SELECT count(DISTINCT job_id) FROM runs")[0][0] > 0

    assert migrate(store.engine) == ["0014", "0015", "0016"]
    assert _schema_differences(store_url) == []
    assert "run_states" not in inspect(store.engine).get_table_names()
    if store.engine.dialect.name == "sqlite":  # the table definition edited in place reads back whole
        assert _rows(store, "PRAGMA integrity_check") == [("ok",)]
        assert _rows(store, "PRAGMA foreign_key_check") == []
    assert _answers(store) == before
    assert dump(store) == derived
    store.dispose()


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


def _run_again(events: list[dict], days: int) -> list[dict]:
    """The same events `days` later, each run under a new id (parents followed): a scheduled rerun."""
    text_of = json.dumps(events)
    for run_id in {event["run"]["runId"] for event in events if "run" in event}:
        text_of = text_of.replace(run_id, str(uuid.uuid5(uuid.NAMESPACE_URL, f"{run_id}/{days}")))
    again = json.loads(text_of)
    for event in again:
        event["eventTime"] = (datetime.fromisoformat(event["eventTime"]) + timedelta(days=days)).isoformat()
    return again


def test_jobs_left_as_they_were_keep_their_answers_through_the_downgrade_and_upgrade(store_url):
    """Reruns that asserted their jobs' stored state left those rows as they were (their times are
    read from the runs): the downgrade to 0014 writes those times into the rows, and the upgrade
    again changes no answer."""
    from tests.consumer.helpers import dump

    store = open_store(store_url)
    demo = [json.loads(line) for line in DEMO_EVENTS.read_text().splitlines() if line.strip()]
    write_events(store, demo)
    for days in (1, 2):
        write_events(store, _run_again(demo, days))
    # Every event of the demo belongs to a run of its job: a job was last seen when its latest run was.
    latest_run = "(SELECT max(r.updated_at) FROM runs r WHERE r.job_id = j.id)"
    behind = f"SELECT count(*) FROM jobs j WHERE last_seen < {latest_run}"
    assert _rows(store, behind)[0][0] > 0  # some rows were left as they were
    before, derived = _answers(store), dump(store)
    last_event = {}
    for event in demo + _run_again(demo, 2):
        key = (event["job"]["namespace"], event["job"]["name"])
        last_event[key] = max(last_event.get(key, event["eventTime"]), event["eventTime"], key=datetime.fromisoformat)
    answered = {
        (job["namespace"], job["name"]): job["updatedAt"]
        for key, jobs in before.items()
        if key.startswith("jobs ")
        for job in jobs["jobs"]
    }
    assert {key: datetime.fromisoformat(at) for key, at in answered.items()} == {
        key: datetime.fromisoformat(at) for key, at in last_event.items()
    }

    _move(store, command.downgrade, "0014")
    assert _rows(store, f"SELECT count(*) FROM jobs j WHERE last_seen <> {latest_run} OR updated_at <> {latest_run}") == [(0,)]

    assert migrate(store.engine) == ["0015", "0016"]
    assert _schema_differences(store_url) == []
    assert _answers(store) == before
    assert dump(store) == derived
    store.dispose()
