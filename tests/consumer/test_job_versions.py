"""Job versions on SQLite and PostgreSQL: what a job does is stored once per distinct content, a
repeated run writes no row of the stable tables, the walks answer on each job's current version,
and older versions stay stored."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from sqlalchemy import event, text

from consumer.query import marquez as mq
from consumer.store.store import Store
from tests.consumer.helpers import write_events
from tests.support.events import BASE_TIME, WAREHOUSE, batch_write, run_event, table, with_column_lineage

JOB = "app.insert_into.enriched"
STABLE_TABLES = ("job_versions", "job_io", "column_lineage", "dataset_fields", "dataset_version_contents")
_WRITTEN_TABLE = re.compile(r"^\s*(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+\"?(\w+)", re.IGNORECASE)


@contextmanager
def rows_written(store: Store) -> Iterator[Counter[str]]:
    """Rows each table's INSERT/UPDATE/DELETE statements changed meanwhile (the driver's rowcount)."""
    written: Counter[str] = Counter()

    def count(_connection: Any, cursor: Any, statement: str, *_: Any) -> None:
        found = _WRITTEN_TABLE.match(statement)
        if found and cursor.rowcount > 0:
            written[found.group(1)] += cursor.rowcount

    event.listen(store.engine, "after_cursor_execute", count)
    try:
        yield written
    finally:
        event.remove(store.engine, "after_cursor_execute", count)


def _run(day: int, inputs: list[dict[str, Any]], columns: list[str], *, complete: bool = True) -> list[dict[str, Any]]:
    """One daily run of JOB: new run id, snapshots and times; its lineage from its arguments."""
    orders = {"namespace": "file", "name": f"{WAREHOUSE}/raw.db/orders"}
    output = with_column_lineage(
        table("mart", "enriched", columns, snapshot=f"enriched-{day}"),
        {column: [(orders, column)] for column in columns},
        indirect=[(orders, "id", "FILTER")],
    )
    events = batch_write(JOB, inputs, output, run_id=f"00000000-0000-4000-8000-{day:012d}", start=BASE_TIME + timedelta(days=day))
    return events if complete else events[:1]


def _inputs(day: int, *names: str) -> list[dict[str, Any]]:
    return [table("raw", name, ["id", "amount", "name"], snapshot=f"{name}-{day}") for name in names]


def _rows(store: Store, query: str) -> list[tuple[Any, ...]]:
    with store.engine.connect() as connection:
        return sorted(tuple(row) for row in connection.execute(text(query)))


def _current_io(store: Store) -> list[tuple[Any, ...]]:
    return _rows(
        store,
        "SELECT io.direction, d.table_name FROM job_io io JOIN datasets d ON d.id = io.dataset_id "
        f"JOIN jobs j ON j.id = io.job_id WHERE j.name = '{JOB}'",
    )


def _current_edges(store: Store) -> list[tuple[Any, ...]]:
    return _rows(
        store,
        "SELECT o.name, i.name, c.transformation_subtype FROM column_lineage c "
        "LEFT JOIN dataset_fields o ON o.id = c.output_field_id JOIN dataset_fields i ON i.id = c.input_field_id "
        "WHERE c.output_field_id IS NOT NULL",
    )


def test_a_repeated_run_writes_no_row_of_the_stable_tables(store: Store) -> None:
    write_events(store, _run(0, _inputs(0, "orders", "customers"), ["id", "amount"]))
    stable_before = {name: _rows(store, f"SELECT * FROM {name}") for name in ("job_versions", "job_io", "column_lineage")}
    with rows_written(store) as written:
        for day in range(1, 4):
            write_events(store, _run(day, _inputs(day, "orders", "customers"), ["id", "amount"]))

    assert {name: written[name] for name in STABLE_TABLES} == dict.fromkeys(STABLE_TABLES, 0)
    assert written["runs"] >= 3  # what is really per run is written
    assert {name: _rows(store, f"SELECT * FROM {name}") for name in stable_before} == stable_before
    assert _rows(store, "SELECT count(DISTINCT job_version_id), count(*) FROM runs") == [(1, 4)]


def test_the_walks_answer_on_the_current_version_and_older_versions_stay(store: Store) -> None:
    write_events(store, _run(0, _inputs(0, "orders", "customers"), ["id", "amount"]))
    # day 1: customers no longer read, a column added
    write_events(store, _run(1, _inputs(1, "orders"), ["id", "amount", "name"]))

    assert _current_io(store) == [("input", "orders"), ("output", "enriched")]
    assert _current_edges(store) == [("amount", "amount", "IDENTITY"), ("id", "id", "IDENTITY"), ("name", "name", "IDENTITY")]
    graph = mq.lineage_graph(store, f"job:spark:{JOB}", 20)
    assert {node["id"] for node in graph["graph"] if node["type"] == "DATASET"} == {
        f"dataset:file:{WAREHOUSE}/raw.db/orders",
        f"dataset:file:{WAREHOUSE}/mart.db/enriched",
    }
    assert _rows(store, "SELECT count(*) FROM job_versions") == [(2,)]
    assert _rows(store, "SELECT count(DISTINCT job_version_id) FROM runs") == [(2,)]

    # day 2 does what day 0 did: back to the first version, no third one
    with rows_written(store) as written:
        write_events(store, _run(2, _inputs(2, "orders", "customers"), ["id", "amount"]))
    assert written["job_versions"] == 0
    assert _current_io(store) == [("input", "customers"), ("input", "orders"), ("output", "enriched")]
    assert _current_edges(store) == [("amount", "amount", "IDENTITY"), ("id", "id", "IDENTITY")]
    assert _rows(store, "SELECT count(*) FROM job_versions") == [(2,)]


def _edge_ids(store: Store) -> dict[tuple[Any, ...], int]:
    rows = _rows(
        store,
        "SELECT coalesce(o.name, ''), i.name, c.transformation_subtype, c.id FROM column_lineage c "
        "LEFT JOIN dataset_fields o ON o.id = c.output_field_id JOIN dataset_fields i ON i.id = c.input_field_id",
    )
    return {tuple(row[:3]): row[3] for row in rows}


def test_a_version_on_the_same_tables_writes_only_the_edges_that_changed(store: Store) -> None:
    write_events(store, _run(0, _inputs(0, "orders"), ["id", "amount"]))
    before = _edge_ids(store)

    with rows_written(store) as written:  # a column added: one more edge
        write_events(store, _run(1, _inputs(1, "orders"), ["id", "amount", "name"]))
    assert written["column_lineage"] == 1
    assert written["job_io"] == 2  # both rows' first_seen, updated in place
    after = _edge_ids(store)
    assert {key: after[key] for key in before} == before  # the kept edges are the same rows
    assert set(after) - set(before) == {("name", "name", "IDENTITY")}

    with rows_written(store) as written:  # the column dropped again: its edge deleted, nothing else
        write_events(store, _run(2, _inputs(2, "orders"), ["id", "amount"]))
    assert written["column_lineage"] == 1
    assert _edge_ids(store) == before
    assert _current_io(store) == [("input", "orders"), ("output", "enriched")]
    first_seen = "SELECT DISTINCT io.first_seen, v.created_at FROM job_io io JOIN jobs j ON j.id = io.job_id "
    [(since, created)] = _rows(store, first_seen + "JOIN job_versions v ON v.id = j.current_version_id")
    assert since == created


def test_a_run_in_progress_does_not_change_the_current_lineage_until_it_finishes(store: Store) -> None:
    write_events(store, _run(0, _inputs(0, "orders", "customers"), ["id", "amount"]))
    started = _run(1, _inputs(1, "orders"), ["id"])
    write_events(store, started[:1])
    assert _current_io(store) == [("input", "customers"), ("input", "orders"), ("output", "enriched")]

    write_events(store, started[1:])
    assert _current_io(store) == [("input", "orders"), ("output", "enriched")]


def test_late_events_of_an_older_run_leave_the_newer_runs_version_current(store: Store) -> None:
    newer = _run(1, _inputs(1, "orders"), ["id"])
    older = _run(0, _inputs(0, "orders", "customers"), ["id", "amount"])
    write_events(store, newer)
    write_events(store, older)

    assert _current_io(store) == [("input", "orders"), ("output", "enriched")]
    assert _current_edges(store) == [("id", "id", "IDENTITY")]
    first_seen = _rows(store, "SELECT DISTINCT first_seen FROM job_io")
    assert len(first_seen) == 1  # the current version's first run


def test_a_runs_version_is_the_union_of_its_events(store: Store) -> None:
    """START names the inputs only, COMPLETE adds the output and its column lineage."""
    run_id = "00000000-0000-4000-8000-000000000009"
    orders = _inputs(0, "orders")
    start = run_event("START", JOB, orders, [], run_id=run_id, at=BASE_TIME)
    complete = _run(0, orders, ["id"])[1]
    complete["run"]["runId"] = run_id
    write_events(store, [start])
    write_events(store, [complete])

    assert _current_io(store) == [("input", "orders"), ("output", "enriched")]
    assert _rows(store, "SELECT count(*) FROM runs WHERE job_version_id IS NOT NULL") == [(1,)]
    content = _rows(store, "SELECT j.content FROM job_versions j JOIN runs r ON r.job_version_id = j.id")
    assert len(content) == 1


def test_the_repeated_run_check_fails_a_store_that_keeps_each_runs_lineage(store: Store, monkeypatch: Any) -> None:
    """A writer whose version hash depends on the run (every run's edges stored again) is caught by
    the counts the first test checks. A version's hash is taken in one place (rows.encoded_lineage),
    where the batch is folded and where the writer unites a run's stored version with it."""
    from itertools import count

    from consumer.store import rows

    runs = count()
    real_encoding = rows.encoded_lineage
    monkeypatch.setattr(rows, "encoded_lineage", lambda content: real_encoding({**content, "run": next(runs)}))
    write_events(store, _run(0, _inputs(0, "orders", "customers"), ["id", "amount"]))
    with rows_written(store) as written:
        write_events(store, _run(1, _inputs(1, "orders", "customers"), ["id", "amount"]))
    assert {name: written[name] for name in STABLE_TABLES} != dict.fromkeys(STABLE_TABLES, 0)


def test_a_retyped_field_makes_a_new_version(store: Store) -> None:
    write_events(store, _run(0, _inputs(0, "orders"), ["id", "amount"]))
    retyped = _run(1, _inputs(1, "orders"), ["id", "amount"])
    for sent in retyped:
        sent["outputs"][0]["facets"]["schema"]["fields"][1]["type"] = "decimal(10,2)"
    write_events(store, retyped)

    assert _rows(store, "SELECT count(*) FROM job_versions") == [(2,)]
    assert _rows(store, "SELECT count(DISTINCT job_version_id) FROM runs") == [(2,)]
