"""Retention on SQLite and PostgreSQL: a year of hourly runs pruned to 30 days keeps every current
answer, every retained run's snapshot lineage and the writer's choice of each job's current
version, shrinks the store, and counts what it removed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text

from consumer.query import lineage_store as ls
from consumer.store.retention import PRUNED_TABLES
from consumer.store.store import Store
from tests.consumer.helpers import write_events
from tests.consumer.test_store_migrations import _answers
from tests.support.events import BASE_TIME
from tests.support.history import END, REPORT, STAGE, STOPPED, YEAR_HOURS, report, run_id, stage, stopped, year_of_events

RETENTION = timedelta(days=30)
WRITE_CHUNK = 2000  # events per write_events call


def _write(store: Store, events: Iterator[dict[str, Any]]) -> None:
    chunk: list[dict[str, Any]] = []
    for event in events:
        chunk.append(event)
        if len(chunk) == WRITE_CHUNK:
            write_events(store, chunk)
            chunk = []
    if chunk:
        write_events(store, chunk)


def _rows(store: Store, query: str, **params: Any) -> list[tuple[Any, ...]]:
    with store.engine.connect() as connection:
        return [tuple(row) for row in connection.execute(text(query), params)]


def _counts(store: Store) -> dict[str, int]:
    return {name: _rows(store, f"SELECT count(*) FROM {name}")[0][0] for name in PRUNED_TABLES}


SNAPSHOTS_OF_RUNS = """
    SELECT r.uuid, s.barrier_id, d.name, s.direction, s.snapshot_id, s.kind, s.created_at
    FROM snapshot_lineage s JOIN runs r ON r.id = s.run_id JOIN datasets d ON d.id = s.dataset_id"""


def _current_answers(answers: dict[str, Any]) -> dict[str, Any]:
    """The answers about the present: all but the raw events and the lists of runs and versions (history)."""
    return {key: value for key, value in answers.items() if key != "events" and not key.startswith(("runs ", "versions "))}


def _current_output_fields(store: Store, job: str) -> list[str]:
    """The fields of what the job's current version writes."""
    content = _rows(
        store,
        "SELECT v.content FROM jobs j JOIN job_versions v ON v.id = j.current_version_id WHERE j.name = :job",
        job=job,
    )[0][0]
    content = json.loads(content) if isinstance(content, str) else content
    outputs = {tuple(name) for name in content["outputs"]}
    return [field for namespace, name, fields in content["schemas"] if (namespace, name) in outputs for field, _ in fields]


@pytest.fixture(scope="module")
def year() -> list[dict[str, Any]]:
    return list(year_of_events())


def test_a_year_of_hourly_runs_pruned_to_30_days_answers_the_same(store: Store, year: list[dict[str, Any]]) -> None:
    _write(store, iter(year))
    before, counts_before = _answers(store), _counts(store)
    snapshots_before = _rows(store, SNAPSHOTS_OF_RUNS)
    walks_before = {
        hour: ls.snapshot_lineage(store, "mart.report", f"report-{hour}", "upstream", 5)
        for hour in range(YEAR_HOURS - 30 * 24, YEAR_HOURS, 97)
    }

    pruned = store.prune(RETENTION, END, batch=500)

    counts_after = _counts(store)
    assert pruned.complete
    assert {table: counts_before[table] - counts_after[table] for table in PRUNED_TABLES} == pruned.rows
    # a year of two hourly jobs and a daily one, 30 days kept: the store keeps about 30/365 of its runs
    assert counts_after["runs"] < counts_before["runs"] * 0.1
    assert counts_after["lineage_events"] < counts_before["lineage_events"] * 0.1
    assert counts_after["dataset_versions"] < counts_before["dataset_versions"] * 0.1
    assert (
        pruned.rows["job_versions"] == 1
    )  # the stage job's version before day 200 (the next one ran until day 350, inside the 30 days)

    after = _answers(store)
    assert _current_answers(after) == _current_answers(before)
    retained = {uuid for (uuid,) in _rows(store, "SELECT uuid FROM runs")}
    for key in (key for key in before if key.startswith("runs ")):
        assert after[key]["runs"] == [run for run in before[key]["runs"] if run["id"] in retained]
    for key in (key for key in before if key.startswith("versions ")):
        kept = {version["version"] for version in after[key]["versions"]}
        assert kept, key  # every dataset keeps its current version
        assert [_without_pruned_run(v, retained) for v in before[key]["versions"] if v["version"] in kept] == after[key][
            "versions"
        ]
    assert sorted(_rows(store, SNAPSHOTS_OF_RUNS)) == sorted(row for row in snapshots_before if row[0] in retained)
    assert {
        hour: ls.snapshot_lineage(store, "mart.report", f"report-{hour}", "upstream", 5) for hour in walks_before
    } == walks_before

    # What stays whatever its age: the stopped job's latest run (day 320, unfinished) and its
    # latest finished one (day 300), whose version stays current.
    assert {run_id(3, 300), run_id(3, 320)} <= retained
    assert _current_output_fields(store, STOPPED) == ["id"]

    # Ingestion goes on: run numbers follow the retained runs, current versions are chosen as before.
    stage_runs = "SELECT max(r.run_seq) FROM runs r JOIN jobs j ON j.id = r.job_id WHERE j.name = :job"
    assert _rows(store, stage_runs, job=STAGE)[0][0] == YEAR_HOURS
    write_events(store, stopped(400, finished=False, columns=("id", "name", "email")) + stage(YEAR_HOURS))
    assert _current_output_fields(store, STOPPED) == ["id"]  # the latest finished run's version still
    assert _rows(store, "SELECT run_seq FROM runs WHERE uuid = :uuid", uuid=run_id(1, YEAR_HOURS))[0][0] == YEAR_HOURS + 1
    write_events(store, stopped(401, columns=("id", "email")))
    assert _current_output_fields(store, STOPPED) == ["id", "email"]
    # an hour later the hour past the new horizon goes, and the stopped job's runs its new one superseded
    stored = {uuid for (uuid,) in _rows(store, "SELECT uuid FROM runs")}
    assert store.prune(RETENTION, END + timedelta(hours=1)).rows["runs"] == 4
    gone = stored - {uuid for (uuid,) in _rows(store, "SELECT uuid FROM runs")}
    assert gone == {run_id(1, YEAR_HOURS - 720), run_id(2, YEAR_HOURS - 720), run_id(3, 300), run_id(3, 320)}
    assert _current_output_fields(store, STOPPED) == ["id", "email"]


def _without_pruned_run(version: dict[str, Any], retained: set[str]) -> dict[str, Any]:
    """A version kept because a retained run read it, whose own run was pruned: no createdByRun any more."""
    run = version.get("createdByRun")
    return version if run is None or run["id"] in retained else {**version, "createdByRun": None}


def test_nothing_is_pruned_within_the_horizon(store: Store) -> None:
    events = stage(0) + report(0) + stage(1) + report(1)
    write_events(store, events)
    counts = _counts(store)
    pruned = store.prune(RETENTION, BASE_TIME + timedelta(days=1))
    assert pruned.total == 0 and pruned.complete
    assert _counts(store) == counts


def test_a_prune_on_a_time_budget_goes_on_where_it_stopped(store: Store) -> None:
    write_events(store, [event for hour in range(60) for event in stage(hour) + report(hour)])
    now = BASE_TIME + timedelta(hours=60) + RETENTION
    everything = dict.fromkeys(PRUNED_TABLES, 0)
    resume_at = None
    for _ in range(1000):
        step = store.prune(RETENTION, now, batch=5, budget_seconds=0.0, resume_at=resume_at)
        everything = {table: everything[table] + step.rows[table] for table in PRUNED_TABLES}
        resume_at = step.resume_at
        if step.complete:
            break
    assert resume_at is None
    assert everything["runs"] == 2 * 60 - 2  # each job's latest run stays
    assert store.prune(RETENTION, now).total == 0


def test_the_ingest_loop_prunes_between_batches_and_counts_what_it_removed(store: Store) -> None:
    """--retention: the loop prunes what its batches made old, a little at a time, and /metrics
    counts the rows by table."""
    from consumer.ingest.kafka_loop import Ingestor
    from consumer.observability import Observability
    from tests.consumer.helpers import ListDeadLetters, ListSource, Record, metric_value

    old = [event for hour in range(3) for event in stage(hour) + report(hour)]  # 2026: past any 30 days now
    source = ListSource([Record("events", 0, offset, json.dumps(event).encode()) for offset, event in enumerate(old)])
    observability = Observability()
    ingestor = Ingestor(store, source, ListDeadLetters(), retention=RETENTION, sweep_every_seconds=0, metrics=observability)
    for _ in range(len(old)):
        ingestor.run_once()
    ingestor.close()

    assert _rows(store, "SELECT count(*) FROM runs")[0][0] == 2  # each job's latest run
    exposition = observability.render()[0].decode()
    assert metric_value(exposition, "lineage_rows_pruned_total", table="runs") == 4
    assert metric_value(exposition, "lineage_rows_pruned_total", table="lineage_events") == 4
    assert metric_value(exposition, "lineage_rows_pruned_total", table="snapshot_lineage") == 8


def test_the_prune_command(store_url: str) -> None:
    from consumer.store import open_store
    from tests.consumer.test_cli import _consumer

    store = open_store(store_url)
    write_events(store, [event for hour in range(3) for event in stage(hour) + report(hour)])
    store.dispose()

    result = _consumer("prune", "--older-than", "30d", "--store", store_url)

    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["removedRows"]["runs"] == 4 and answer["removedRows"]["lineage_events"] == 4
    store = open_store(store_url)
    assert _rows(store, "SELECT count(*) FROM runs")[0][0] == 2
    store.dispose()
    refused = _consumer("prune", "--older-than", "a month", "--store", store_url)
    assert refused.returncode == 2 and "not a period" in refused.stderr


def test_serve_with_the_http_role_prunes_at_start_and_counts_it(sqlite_url: str) -> None:
    """`serve --role http --retention 30d` (no Kafka loop): the retention thread prunes at once and
    /metrics counts it."""
    import time

    import httpx

    from consumer.store import open_store
    from tests.consumer.helpers import metric_value
    from tests.consumer.test_serve_roles import serving

    store = open_store(sqlite_url)
    write_events(store, [event for hour in range(3) for event in stage(hour) + report(hour)])
    store.dispose()
    with serving(sqlite_url, "--role", "http", "--retention", "30d") as url:
        deadline = time.monotonic() + 30
        while True:
            exposition = httpx.get(f"{url}/metrics", timeout=10).text
            if metric_value(exposition, "lineage_rows_pruned_total", table="runs") == 4:
                break
            assert time.monotonic() < deadline, exposition
            time.sleep(0.2)
    store = open_store(sqlite_url)
    assert _rows(store, "SELECT count(*) FROM runs")[0][0] == 2
    store.dispose()


def test_runs_after_a_prune_are_numbered_after_the_retained_ones(store: Store) -> None:
    """A job's next run takes the number after its last, and a late run older than every retained
    one the number before them (they move up one, in order): never a number twice."""
    write_events(store, [event for hour in range(60) for event in stage(hour)])
    store.prune(RETENTION, BASE_TIME + timedelta(hours=30) + RETENTION)
    numbers = "SELECT r.run_seq FROM runs r JOIN jobs j ON j.id = r.job_id WHERE j.name = :job ORDER BY r.created_at, r.uuid"
    assert [seq for (seq,) in _rows(store, numbers, job=STAGE)] == list(range(31, 61))

    write_events(store, stage(60))
    assert [seq for (seq,) in _rows(store, numbers, job=STAGE)] == list(range(31, 62))
    late = stage(10)
    late[0]["run"]["runId"] = run_id(1, 10_000)  # another run of hour 10, arriving after the prune
    write_events(store, late)
    assert [seq for (seq,) in _rows(store, numbers, job=STAGE)] == list(range(31, 63))
    barriers = "SELECT DISTINCT s.barrier_id, r.run_seq FROM snapshot_lineage s JOIN runs r ON r.id = s.run_id"
    assert all(barrier == seq for barrier, seq in _rows(store, barriers))


def test_pruning_beside_writers_on_postgresql_leaves_a_consistent_store(postgres_url: str) -> None:
    """A prune in many small transactions while another connection writes the same jobs' next hours
    and runs that read old snapshots (making them their dataset's current version): no transaction fails, and every dataset's current version, every
    job's current version and latest run are stored; run numbers stay in order."""
    import threading

    from consumer.store import open_store

    writer, pruner = open_store(postgres_url), open_store(postgres_url)
    write_events(writer, [event for hour in range(240) for event in stage(hour) + report(hour)])
    failures: list[BaseException] = []

    def prune() -> None:
        try:
            pruner.prune(timedelta(days=1), BASE_TIME + timedelta(days=10), batch=5)
        except BaseException as failure:
            failures.append(failure)

    missing_versions = """SELECT d.name, d.current_version FROM datasets d WHERE d.current_version IS NOT NULL AND NOT EXISTS
        (SELECT 1 FROM dataset_versions v WHERE v.dataset_id = d.id AND v.version = d.current_version)"""
    missing: list[tuple[Any, ...]] = []
    pruning = threading.Thread(target=prune)
    pruning.start()
    hour = 240
    while pruning.is_alive() or hour < 250:
        # a new hour, and a new run reading an old snapshot (its version being pruned meanwhile)
        write_events(writer, stage(hour) + report(hour) + _reading_old_snapshot(hour, hour - 200 - 3 * (hour % 50)))
        hour += 1
        missing += _rows(writer, missing_versions)  # after each write: a later one may hide it
    pruning.join()
    assert failures == []
    assert missing + _rows(writer, missing_versions) == []
    assert (
        _rows(
            writer,
            "SELECT name FROM jobs j WHERE current_version_id IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.job_id = j.id)",
        )
        == []
    )
    numbers = "SELECT r.run_seq FROM runs r JOIN jobs j ON j.id = r.job_id WHERE j.name = :job ORDER BY r.created_at, r.uuid"
    for job in (STAGE, REPORT):
        sequence = [seq for (seq,) in _rows(writer, numbers, job=job)]
        assert sequence == sorted(set(sequence)), job
    writer.dispose()
    pruner.dispose()


def _reading_old_snapshot(hour: int, old_hour: int) -> list[dict[str, Any]]:
    """A run of the report job at `hour` that reads stage.events' snapshot of `old_hour`."""
    events = report(hour)
    for event in events:
        event["run"]["runId"] = run_id(4, hour)
        facets = event["inputs"][0]["facets"]
        facets["snapshot"]["snapshotId"] = facets["version"]["datasetVersion"] = f"stage-{old_hour}"
        event["eventTime"] = (BASE_TIME + timedelta(hours=hour, minutes=45)).isoformat().replace("+00:00", "Z")
    return events


@pytest.mark.parametrize(
    ("held", "pruned_table"),
    [
        ("SELECT pg_advisory_xact_lock(:key)", "runs"),  # a writer of the job, mid-transaction
        ("SELECT pg_advisory_xact_lock_shared(:key)", "dataset_version_contents"),  # any writer, mid-transaction
    ],
    ids=["job lock", "contents lock"],
)
def test_on_postgresql_a_prune_waits_for_the_writers_of_what_it_deletes(postgres_url: str, held: str, pruned_table: str) -> None:
    """The prune takes the writer's advisory lock of each job whose runs it deletes, and the version
    contents' lock exclusively: while a writer holds them, it deletes nothing of theirs."""
    import threading
    import time

    from sqlalchemy import create_engine

    from consumer.store import open_store
    from consumer.store.rows import CONTENTS_LOCK, lock_id

    store = open_store(postgres_url)
    events = [event for day in range(5) for event in stopped(day)] + stopped(5, columns=("id", "name"))
    write_events(store, events)  # the first five days' versions share a content, the sixth has another
    key = lock_id("job", ("spark", STOPPED)) if pruned_table == "runs" else CONTENTS_LOCK
    writer = create_engine(postgres_url.replace("postgresql://", "postgresql+psycopg://", 1))
    before = _counts(store)[pruned_table]
    with writer.begin() as connection:
        connection.execute(text(held), {"key": key})
        pruning = threading.Thread(target=store.prune, args=(RETENTION, BASE_TIME + timedelta(days=60)))
        pruning.start()
        time.sleep(2)
        assert pruning.is_alive() and _counts(store)[pruned_table] == before
    pruning.join(60)
    assert not pruning.is_alive() and _counts(store)[pruned_table] < before
    writer.dispose()
    store.dispose()


def test_a_pruned_run_that_left_its_job_row_as_it_was_keeps_its_time_in_the_job(store: Store) -> None:
    """A long run that asserted its job's stored state (so its batch left the job's row as it
    was) ended after a later-started one: pruning it (only the job's latest-started run is kept)
    leaves the job's answers with its end."""
    from consumer.query.marquez.catalog import get_job

    def event(run: str, hours: int, event_type: str) -> dict[str, Any]:
        return {
            "eventType": event_type,
            "eventTime": (BASE_TIME + timedelta(hours=hours)).isoformat(),
            "producer": "https://example.com/retention-test",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
            "run": {"runId": run},
            "job": {"namespace": "retention", "name": "long_job"},
            "inputs": [],
            "outputs": [],
        }

    first, long, short = (f"00000000-0000-4000-8000-00000000000{n}" for n in (1, 2, 3))
    for batch in (
        [event(first, 0, "START")],
        [event(first, 1, "COMPLETE"), event(long, 2, "START")],
        [event(short, 3, "START"), event(short, 4, "COMPLETE")],
        [event(long, 9, "COMPLETE")],
    ):
        write_events(store, batch)
    ended = get_job(store, "retention", "long_job")["updatedAt"]
    assert ended.startswith((BASE_TIME + timedelta(hours=9)).isoformat()[:19])
    pruned = store.prune(RETENTION, BASE_TIME + timedelta(hours=10) + RETENTION)
    assert pruned.rows["runs"] == 2  # the first and the long one
    assert get_job(store, "retention", "long_job")["updatedAt"] == ended
