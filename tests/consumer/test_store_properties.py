"""Property tests of the store's convergence (Hypothesis, bounded examples): any permutation of a
set of events, with duplicates, split into any batches and written by one or two writers, leaves
every derived table exactly as writing the events once, one by one in order, does: every column,
timestamps included, with row ids replaced by the natural keys they stand for."""

from __future__ import annotations

import threading
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from consumer.ingest.materialize import materialize
from consumer.ingest.store_writes import StoreWrites
from consumer.ingest.validate import validate
from consumer.store import open_store
from consumer.store import schema as s
from consumer.store.rows import stamp
from consumer.store.store import DERIVED_TABLES, Store

BASE = datetime(2026, 3, 1, tzinfo=timezone.utc)
PRODUCER = "https://example.com/property-test"
JOBS = ("load", "enrich", "report")
DATASETS = ("raw.orders", "raw.customers", "mart.enriched", "mart.daily")
SCHEMAS = (("id", "amount"), ("id", "amount", "name"), ("id", "name"))
EVENT_TYPES = ("START", "RUNNING", "COMPLETE", "FAIL", "ABORT", "OTHER")
RUN_IDS = [[str(uuid.UUID(int=job * 16 + run + 1)) for run in range(4)] for job in range(len(JOBS))]


def _dataset(
    index: int, schema: int, snapshot: int | None, lineage_from: int | None, partitions: tuple[int, ...] = ()
) -> dict[str, Any]:
    namespace, _, name = DATASETS[index].partition(".")
    facets: dict[str, Any] = {
        "schema": {"fields": [{"name": f, "type": "string" if f == "name" else "long"} for f in SCHEMAS[schema]]},
        "dataSource": {"name": namespace, "uri": f"s3://{namespace}"},
    }
    if snapshot is not None:
        facets["snapshot"] = {"snapshotId": f"{name}-{snapshot}", "kind": "content"}
        facets["snapshot"]["partitions"] = [{"dt": f"2026-03-0{day + 1}"} for day in partitions]
    if lineage_from is not None:
        source_ns, _, source = DATASETS[lineage_from].partition(".")
        facets["columnLineage"] = {
            "fields": {
                f: {
                    "inputFields": [
                        {
                            "namespace": source_ns,
                            "name": source,
                            "field": f,
                            "transformations": [{"type": "DIRECT", "subtype": "IDENTITY"}],
                        }
                    ]
                }
                for f in SCHEMAS[schema]
            },
            "dataset": [
                {
                    "namespace": source_ns,
                    "name": source,
                    "field": "id",
                    "transformations": [{"type": "INDIRECT", "subtype": "JOIN"}],
                }
            ],
        }
    return {"namespace": namespace, "name": name, "facets": facets}


_days = st.lists(st.integers(0, 2), max_size=2, unique=True).map(tuple)  # the partitions of a snapshot


@st.composite
def _event(draw: st.DrawFn, minute: int) -> dict[str, Any]:
    at = (BASE + timedelta(minutes=minute)).isoformat().replace("+00:00", "Z")
    if draw(st.integers(0, 9)) == 0:  # a DatasetEvent now and then
        return {
            "eventTime": at,
            "producer": PRODUCER,
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/DatasetEvent",
            "dataset": _dataset(draw(st.integers(0, 3)), draw(st.integers(0, 2)), None, None),
        }
    job = draw(st.integers(0, len(JOBS) - 1))
    inputs = draw(st.lists(st.integers(0, 3), max_size=2, unique=True))
    output = draw(st.integers(0, 3))
    lineage_from = inputs[0] if inputs and draw(st.booleans()) else None
    run_facets: dict[str, Any] = {"attempt": {"number": draw(st.integers(0, 2))}}
    if draw(st.booleans()):
        run_facets["nominalTime"] = {"nominalStartTime": at}
    job_facets: dict[str, Any] = {"jobType": {"processingType": "BATCH", "integration": "SPARK", "jobType": "JOB"}}
    if draw(st.booleans()):
        job_facets["documentation"] = {"description": f"{JOBS[job]} v{draw(st.integers(0, 2))}"}
    return {
        "eventType": draw(st.sampled_from(EVENT_TYPES)),
        "eventTime": at,
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": RUN_IDS[job][draw(st.integers(0, 3))], "facets": run_facets},
        "job": {"namespace": "spark", "name": JOBS[job], "facets": job_facets},
        "inputs": [_dataset(i, draw(st.integers(0, 2)), draw(st.none() | st.integers(0, 2)), None, draw(_days)) for i in inputs],
        "outputs": [_dataset(output, draw(st.integers(0, 2)), draw(st.none() | st.integers(0, 2)), lineage_from, draw(_days))],
    }


@st.composite
def _scenario(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]], bool]:
    """(events in order, the batches of a shuffled copy with duplicates, two writers?)"""
    minutes = draw(st.lists(st.integers(0, 10_000), min_size=1, max_size=12, unique=True))
    events = [draw(_event(minute)) for minute in minutes]
    shuffled = draw(st.permutations(events + draw(st.lists(st.sampled_from(events), max_size=4))))
    cuts = sorted(draw(st.lists(st.integers(1, len(shuffled)), max_size=4, unique=True)))
    batches = [shuffled[a:b] for a, b in zip([0, *cuts], [*cuts, len(shuffled)], strict=True) if a < b]
    return events, batches, draw(st.booleans())


def _write(store: Store, events: list[dict[str, Any]]) -> None:
    StoreWrites(store).write([materialize(validate(event)) for event in events])


def _write_by(stores: list[Store], batches: list[list[dict[str, Any]]]) -> None:
    """Batches dealt round-robin to the writers, which write concurrently."""
    if len(stores) == 1:
        for batch in batches:
            _write(stores[0], batch)
        return
    failures: list[BaseException] = []

    def write_share(index: int) -> None:
        try:
            for batch in batches[index :: len(stores)]:
                _write(stores[index], batch)
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=write_share, args=(index,)) for index in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures


def full_dump(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """Every derived table, every column; ids replaced by the natural key of the row they point to."""
    with store.engine.connect() as connection:
        rows = {table.name: [dict(row) for row in connection.execute(select(table)).mappings()] for table in DERIVED_TABLES}
    rows["jobs"] = [_as_answered(job, rows["runs"]) for job in rows["jobs"]]
    keys: dict[str, dict[int, Any]] = {"namespaces": {r["id"]: r["name"] for r in rows["namespaces"]}}
    for name in ("datasets", "jobs"):
        keys[name] = {r["id"]: (keys["namespaces"][r["namespace_id"]], r["name"]) for r in rows[name]}
    keys["runs"] = {r["id"]: r["uuid"] for r in rows["runs"]}
    # A version no run or job points to any more (a run's version before the rest of its events
    # arrived) is never read: the versions are compared by what points to them.
    pointed = {r["job_version_id"] for r in rows["runs"]} | {
        r[column] for r in rows["jobs"] for column in ("current_version_id", "declared_version_id")
    }
    rows["job_versions"] = [r for r in rows["job_versions"] if r["id"] in pointed]
    keys["job_versions"] = {r["id"]: (keys["jobs"][r["job_id"]], r["lineage_hash"]) for r in rows["job_versions"]}
    # A content no version points to any more (the earliest event of its version, arrived late, said
    # something else) is never read: the pool is compared by what the versions point to.
    referenced = {r["content_id"] for r in rows["dataset_versions"]}
    rows["dataset_version_contents"] = [r for r in rows["dataset_version_contents"] if r["id"] in referenced]
    keys["dataset_version_contents"] = {r["id"]: r["content_hash"] for r in rows["dataset_version_contents"]}
    keys["dataset_fields"] = {r["id"]: (keys["datasets"][r["dataset_id"]], r["name"]) for r in rows["dataset_fields"]}
    keys["snapshot_lineage"] = {
        r["id"]: (keys["runs"][r["run_id"]], r["barrier_id"], keys["datasets"][r["dataset_id"]], r["direction"])
        for r in rows["snapshot_lineage"]
    }
    dumped = {}
    for table in DERIVED_TABLES:
        references = {fk.parent.name: fk.column.table.name for fk in table.foreign_keys}
        references.update({column.name: column.info["references"] for column in table.columns if "references" in column.info})
        dumped[table.name] = sorted(
            (
                tuple(
                    (column, _natural(keys, references.get(column), value))
                    for column, value in sorted(row.items())
                    if column != "id"
                )
                for row in rows[table.name]
            ),
            key=repr,
        )
    return dumped


def _as_answered(job: dict[str, Any], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A job row with what its runs confirmed of its stored state merged in (the clocks and last
    times a batch that left the row as it was did not write), without the state's hash: what
    the row holds whichever batches wrote it."""
    confirmed = [r["updated_at"] for r in runs if r["job_id"] == job["id"] and r["job_state"] == job["state_hash"]]
    answered = {column: value for column, value in job.items() if column != "state_hash"}
    if job["state_hash"] is not None and confirmed:
        at = max(confirmed)
        stamped = stamp(at)
        answered["merged_at"] = {key: max(clock, stamped) for key, clock in (job["merged_at"] or {}).items()}
        answered["updated_at"], answered["last_seen"] = max(job["updated_at"], at), max(job["last_seen"], at)
    return answered


def _natural(keys: dict[str, dict[int, Any]], table: str | None, value: Any) -> Any:
    return value if table is None or value is None else keys[table][value]


def _reset(store: Store) -> None:
    with store.engine.begin() as connection:
        connection.execute(s.jobs.update().values(parent_job_id=None, current_version_id=None, declared_version_id=None))
        for table in DERIVED_TABLES:
            connection.execute(table.delete())
        connection.execute(s.lineage_events.delete())


PROPERTY_SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


@pytest.fixture
def stores(store_url):  # type: ignore[no-untyped-def]
    """A reference store and two writers' stores on the same database (one database per test)."""
    reference_url = store_url
    opened = [open_store(reference_url)]
    opened.append(open_store(reference_url))
    yield opened
    for store in opened:
        store.dispose()


@PROPERTY_SETTINGS
@given(scenario=_scenario())
def test_any_order_batching_and_writers_converge_to_the_in_order_store(stores, scenario):
    _assert_converges(stores, scenario)


def _assert_converges(stores: list[Store], scenario: tuple[list[dict[str, Any]], list[list[dict[str, Any]]], bool]) -> None:
    events, batches, two_writers = scenario
    first, second = stores
    _reset(first)
    for event in events:
        _write(first, [event])
    expected = full_dump(first)
    _reset(first)
    _write_by([first, second] if two_writers else [first], batches)
    assert full_dump(first) == expected


def _two_runs_reading(first_input: int, second_input: int, schemas: tuple[int, int] = (0, 0)) -> list[dict[str, Any]]:
    """Two COMPLETE runs of one job, a minute apart, each reading `first_input` / `second_input` and
    writing the `schemas` of SCHEMAS (a column lineage edge per column)."""
    events = []
    for minute, (source, run, schema) in enumerate(((first_input, 0, schemas[0]), (second_input, 1, schemas[1]))):
        at = (BASE + timedelta(minutes=minute)).isoformat().replace("+00:00", "Z")
        events.append(
            {
                "eventType": "COMPLETE",
                "eventTime": at,
                "producer": PRODUCER,
                "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
                "run": {"runId": RUN_IDS[0][run]},
                "job": {"namespace": "spark", "name": JOBS[0]},
                "inputs": [_dataset(source, schema, None, None)],
                "outputs": [_dataset(2, schema, None, source)],
            }
        )
    return events


def _written_in_order(store: Store, events: list[dict[str, Any]]) -> dict[str, list[tuple[Any, ...]]]:
    """The store after writing `events` one by one in this order into an emptied store."""
    _reset(store)
    for event in events:
        _write(store, [event])
    return full_dump(store)


def test_the_convergence_check_fails_a_store_that_loses_a_version_change(stores, monkeypatch):
    """The check above is only as good as what it sees: a writer that keeps a job's first version
    current (it loses the change) leaves another store when the newer run comes first."""
    from consumer.store.writer import current_lineage

    first = stores[0]
    older, newer = _two_runs_reading(0, 1)
    expected = _written_in_order(first, [older, newer])
    assert _written_in_order(first, [newer, older]) == expected

    choose = current_lineage._current_versions

    def keeps_the_first(batch: Any, job_ids: list[int]) -> list[tuple[int, int | None, int | None]]:
        return [(job, stored, chosen if stored is None else stored) for job, stored, chosen in choose(batch, job_ids)]

    monkeypatch.setattr(current_lineage, "_current_versions", keeps_the_first)
    assert _written_in_order(first, [older, newer]) != expected


def test_the_convergence_check_fails_a_store_that_keeps_an_edge_a_new_version_dropped(stores, monkeypatch):
    """A new version on the same tables writes only the edges that changed: a writer that never
    deletes the dropped ones leaves another store when the newer run comes first."""
    from consumer.store.writer import current_lineage

    first = stores[0]
    older, newer = _two_runs_reading(0, 0, schemas=(1, 0))  # the newer run no longer writes `name`
    expected = _written_in_order(first, [older, newer])
    assert _written_in_order(first, [newer, older]) == expected

    def keeps_dropped_edges(batch: Any, job_ids: list[int], edge_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        columns = [s.column_lineage.c[name] for name in current_lineage._EDGE_COLUMNS]
        stored = set(batch.connection.execute(select(*columns).where(s.column_lineage.c.job_id.in_(job_ids))).all())
        return [row for row in edge_rows if tuple(row[name] for name in current_lineage._EDGE_COLUMNS) not in stored]

    monkeypatch.setattr(current_lineage, "_edge_changes", keeps_dropped_edges)
    assert _written_in_order(first, [older, newer]) != expected


def _scheduled_event(run: int, minute: int, event_type: str, state: int) -> dict[str, Any]:
    """An event of a scheduled job: the same inputs and outputs every run, its job facets one of
    two `state`s (a documentation facet)."""
    return {
        "eventType": event_type,
        "eventTime": (BASE + timedelta(minutes=minute)).isoformat().replace("+00:00", "Z"),
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": RUN_IDS[0][run]},
        "job": {"namespace": "spark", "name": JOBS[0], "facets": {"documentation": {"description": f"state {state}"}}},
        "inputs": [_dataset(0, 0, None, None)],
        "outputs": [_dataset(2, 0, run, 0)],
    }


@st.composite
def _scheduled_scenario(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]], bool]:
    """Runs of one scheduled job (START and COMPLETE each), now and then asserting another state
    than the rest: the batches that leave the job's row as it is, and the late events that must
    still lose to what those runs confirmed."""
    events = []
    for run in range(4):
        start, state = run * 10 + draw(st.integers(0, 3)), draw(st.sampled_from((0, 0, 1)))
        for offset, event_type in enumerate(("START", "COMPLETE")):
            changes = draw(st.integers(0, 5)) == 0  # now and then a run's events disagree
            events.append(_scheduled_event(run, start + offset * 2, event_type, 1 - state if changes else state))
    shuffled = draw(st.permutations(events + draw(st.lists(st.sampled_from(events), max_size=2))))
    cuts = sorted(draw(st.lists(st.integers(1, len(shuffled)), max_size=5, unique=True)))
    batches = [shuffled[a:b] for a, b in zip([0, *cuts], [*cuts, len(shuffled)], strict=True) if a < b]
    return sorted(events, key=lambda event: event["eventTime"]), batches, draw(st.booleans())


@PROPERTY_SETTINGS
@given(scenario=_scheduled_scenario())
def test_scheduled_runs_in_any_order_batching_and_writers_converge_to_the_in_order_store(stores, scenario):
    _assert_converges(stores, scenario)


def _job_rows_written(store: Store, events: list[dict[str, Any]]) -> list[int]:
    """Write each event as a batch of its own; per batch, whether it wrote the job's row (1/0)."""
    written = []
    for event in events:
        with store.engine.connect() as connection:
            before = connection.execute(select(s.jobs.c.merged_at, s.jobs.c.last_seen)).all()
        _write(store, [event])
        with store.engine.connect() as connection:
            written.append(int(connection.execute(select(s.jobs.c.merged_at, s.jobs.c.last_seen)).all() != before))
    return written


def test_a_run_that_asserts_the_stored_job_state_leaves_the_job_row_as_it_is(stores):
    """Every event after the first asserts the state the first left: none writes the job row, and the
    job's answers still give their times."""
    from consumer.query.db import iso
    from consumer.query.marquez.catalog import get_job

    first = stores[0]
    _reset(first)
    runs = [
        _scheduled_event(run, run * 10 + offset, event_type, 0)
        for run in range(3)
        for offset, event_type in ((0, "START"), (2, "COMPLETE"))
    ]
    assert _job_rows_written(first, runs) == [1, 0, 0, 0, 0, 0]
    assert get_job(first, "spark", JOBS[0])["updatedAt"] == iso(BASE + timedelta(minutes=22))


def test_the_convergence_check_fails_a_store_that_forgets_what_unwritten_runs_confirmed(stores, monkeypatch):
    """A run that left the job's row as it was confirmed its state at its time: a writer that does
    not merge that in before the next write lets an older event of another state win."""
    from consumer.store.writer import jobs as job_writes

    first = stores[0]
    events = [
        _scheduled_event(0, 0, "COMPLETE", 0),
        _scheduled_event(1, 30, "COMPLETE", 0),  # leaves the row as it is
        _scheduled_event(2, 20, "COMPLETE", 1),  # older than the run above: state 0 stays
    ]
    expected = _written_in_order(first, sorted(events, key=lambda event: event["eventTime"]))
    assert _written_in_order(first, events) == expected

    monkeypatch.setattr(job_writes, "confirm", lambda job, at: None)
    assert _written_in_order(first, events) != expected


def test_the_convergence_check_fails_a_store_that_leaves_a_job_row_for_a_run_that_asserted_another_state(stores, monkeypatch):
    """A run whose earlier event asserted another state no longer confirms any one state: a writer
    that leaves the job's row as it is for its later event loses that event's time."""
    from consumer.store.writer import jobs as job_writes

    first = stores[0]
    events = [
        _scheduled_event(0, 0, "COMPLETE", 0),
        _scheduled_event(1, 10, "START", 0),
        _scheduled_event(2, 20, "COMPLETE", 1),
        _scheduled_event(1, 30, "COMPLETE", 1),
    ]
    expected = _written_in_order(first, events)
    assert _written_in_order(first, list(reversed(events))) == expected

    unchanged = job_writes._unchanged_jobs

    def ignores_stored_runs(batch: Any, folded: Any, namespace_ids: Any, stored: Any) -> Any:
        keys = {(namespace_ids[job[0]], job[1]): job for job in folded.jobs}
        folds = {
            key: fold
            for key, fold in ((key, folded.jobs[job]) for key, job in keys.items())
            if key in stored and fold.state == stored[key]["state_hash"] and stored[key]["lineage_retired_at"] is None
        }
        return set(folds) | unchanged(batch, folded, namespace_ids, stored)

    monkeypatch.setattr(job_writes, "_unchanged_jobs", ignores_stored_runs)
    assert _written_in_order(first, events) != expected
