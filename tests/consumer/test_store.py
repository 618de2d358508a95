"""The store contract: every case runs on SQLite and on PostgreSQL (fixture `store`)."""

from __future__ import annotations

import itertools
import json
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import event, text

from tests.consumer.helpers import dump, write_events
from tests.support.databases import query_plan
from tests.support.events import BASE_TIME, batch_write, run_event, table, with_column_lineage
from tests.support.paths import third_party_events


def _rows(store, query: str) -> list[tuple]:
    with store.engine.connect() as connection:
        return sorted((tuple(row) for row in connection.execute(text(query))), key=repr)


def _sorted(rows: list[tuple]) -> list[tuple]:
    return sorted(rows, key=repr)


def _paimon(store, query: str) -> list[tuple]:
    """The proposal's queries are MySQL/Flink SQL: backticks become double quotes, and SQLite
    additionally needs the bare `S.table` / `T.table` quoted."""
    query = query.replace("`", '"')
    if store.engine.dialect.name == "sqlite":
        for alias in ("S", "T"):
            query = query.replace(f"{alias}.table", f'{alias}."table"').replace(f"{alias}.database", f'{alias}."database"')
    return _rows(store, query)


def test_every_third_party_sample_ingests_and_reingesting_changes_nothing(store):
    events = third_party_events()

    stored = write_events(store, events)
    before = dump(store)
    again = write_events(store, events)

    assert stored == len({repr(sorted(e.items())) for e in events}) and stored > 100
    assert again == 0
    assert dump(store) == before
    marquez_outputs = _rows(
        store,
        "SELECT count(DISTINCT output_dataset_id) FROM column_lineage c "
        "JOIN datasets d ON d.id = c.output_dataset_id JOIN namespaces n ON n.id = d.namespace_id "
        "WHERE n.name = 'food_delivery'",
    )
    assert marquez_outputs == [(5,)]


def _pipeline(run_a: str, run_b: str) -> list[dict]:
    """job_a: raw.orders + raw.customers -> mart.enriched; job_b: mart.enriched -> mart.daily."""
    orders = table("raw", "orders", ["id", "customer_id", "amount"], snapshot="orders-v1")
    customers = table("raw", "customers", ["id", "name"], snapshot="customers-v7")
    enriched = with_column_lineage(
        table("mart", "enriched", ["order_id", "name", "amount"], snapshot="enriched-v1"),
        {"order_id": [(orders, "id")], "name": [(customers, "name")], "amount": [(orders, "amount")]},
        indirect=[(orders, "customer_id", "JOIN"), (customers, "id", "JOIN")],
    )
    daily = with_column_lineage(
        table("mart", "daily", ["name", "total"], snapshot="daily-v1"),
        {"name": [(enriched, "name")], "total": [(enriched, "amount")]},
    )
    enriched_input = {**enriched, "facets": {k: v for k, v in enriched["facets"].items() if k != "columnLineage"}}
    return batch_write("app.insert_into.enriched", [orders, customers], enriched, run_id=run_a) + batch_write(
        "app.insert_into.daily", [enriched_input], daily, run_id=run_b, start=BASE_TIME + timedelta(minutes=1)
    )


def test_batch_writes_land_in_table_column_and_data_lineage(store):
    run_a, run_b = str(uuid.uuid4()), str(uuid.uuid4())
    write_events(store, _pipeline(run_a, run_b))

    assert _rows(
        store,
        "SELECT j.name, d.table_name, io.direction FROM job_io io JOIN jobs j ON j.id = io.job_id "
        "JOIN datasets d ON d.id = io.dataset_id",
    ) == [
        ("app.insert_into.daily", "daily", "output"),
        ("app.insert_into.daily", "enriched", "input"),
        ("app.insert_into.enriched", "customers", "input"),
        ("app.insert_into.enriched", "enriched", "output"),
        ("app.insert_into.enriched", "orders", "input"),
    ]
    assert _rows(
        store,
        "SELECT od.table_name, ofl.name, idd.table_name, ifl.name, c.transformation_type, c.transformation_subtype "
        "FROM column_lineage c JOIN datasets od ON od.id = c.output_dataset_id "
        "LEFT JOIN dataset_fields ofl ON ofl.id = c.output_field_id "
        "JOIN datasets idd ON idd.id = c.input_dataset_id JOIN dataset_fields ifl ON ifl.id = c.input_field_id "
        "WHERE od.table_name = 'enriched'",
    ) == _sorted(
        [
            ("enriched", "amount", "orders", "amount", "DIRECT", "IDENTITY"),
            ("enriched", "name", "customers", "name", "DIRECT", "IDENTITY"),
            ("enriched", "order_id", "orders", "id", "DIRECT", "IDENTITY"),
            ("enriched", None, "orders", "customer_id", "INDIRECT", "JOIN"),
            ("enriched", None, "customers", "id", "INDIRECT", "JOIN"),
        ]
    )
    assert _rows(
        store,
        "SELECT r.uuid, s.barrier_id, d.table_name, s.direction, s.snapshot_id FROM snapshot_lineage s "
        "JOIN runs r ON r.id = s.run_id JOIN datasets d ON d.id = s.dataset_id",
    ) == _sorted(
        [
            (run_a, 1, "orders", "input", "orders-v1"),
            (run_a, 1, "customers", "input", "customers-v7"),
            (run_a, 1, "enriched", "output", "enriched-v1"),
            (run_b, 1, "enriched", "input", "enriched-v1"),
            (run_b, 1, "daily", "output", "daily-v1"),
        ]
    )
    assert _rows(store, "SELECT uuid, state FROM runs") == _sorted([(run_a, "COMPLETED"), (run_b, "COMPLETED")])


def test_paimon_proposal_queries_return_the_lineage(store):
    write_events(store, _pipeline(str(uuid.uuid4()), str(uuid.uuid4())))
    # A second run of job_a reads newer snapshots: barrier 2 of the same job.
    orders = table("raw", "orders", ["id"], snapshot="orders-v2")
    enriched = table("mart", "enriched", ["order_id"], snapshot="enriched-v2")
    write_events(store, batch_write("app.insert_into.enriched", [orders], enriched, start=BASE_TIME + timedelta(hours=1)))

    upstream_tables = _paimon(
        store,
        """SELECT S.database, S.table FROM source_job_lineage S
        JOIN sink_job_lineage T ON S.job=T.job where T.`database`='mart' and T.`table`='enriched'""",
    )
    downstream_tables = _paimon(
        store,
        """SELECT T.database, T.table FROM source_job_lineage S
        JOIN sink_job_lineage T ON S.job=T.job where S.`database`='mart' and S.`table`='enriched'""",
    )
    upstream_snapshots = _paimon(
        store,
        """SELECT S.database, S.table, S.snapshot_id FROM source_snapshot_lineage S
        JOIN sink_snapshot_lineage T ON S.job=T.job AND S.barrier_id=T.barrier_id
        where T.`database`='mart' and T.`table`='enriched' and T.snapshot_id='enriched-v2'""",
    )
    # The proposal's downstream snapshot query names the job views; the snapshot views are meant.
    downstream_snapshots = _paimon(
        store,
        """SELECT T.database, T.table, T.snapshot_id FROM source_snapshot_lineage S
        JOIN sink_snapshot_lineage T ON S.job=T.job AND S.barrier_id=T.barrier_id
        where S.`database`='raw' and S.`table`='orders' and S.snapshot_id='orders-v1'""",
    )

    # The second run no longer reads raw.customers: the job views show what the job does now, the
    # snapshot views what each run read.
    assert upstream_tables == [("raw", "orders")]
    assert downstream_tables == [("mart", "daily")]
    assert upstream_snapshots == [("raw", "orders", "orders-v2")]
    assert downstream_snapshots == [("mart", "enriched", "enriched-v1")]


def test_column_edge_is_kept_when_the_input_schema_was_never_sent(store):
    source = {"namespace": "s3://bucket", "name": "landing/events"}
    output = with_column_lineage(table("mart", "events", ["id"]), {"id": [(source, "event_id")]})
    write_events(store, batch_write("app.insert_into.events", [source], output))

    assert _rows(
        store,
        "SELECT d.name, f.name, f.from_schema FROM dataset_fields f JOIN datasets d ON d.id = f.dataset_id "
        "WHERE d.name = 'landing/events'",
    ) == [("landing/events", "event_id", False)]
    assert _rows(store, "SELECT count(*) FROM column_lineage") == [(1,)]


def test_out_of_order_and_repeated_events_converge(store):
    orders = table("raw", "orders", ["id"])
    output = table("mart", "o", ["id"])
    start = BASE_TIME
    outcomes = set()
    orders_of_arrival = list(itertools.permutations(["START", "RUNNING", "COMPLETE", "COMPLETE"]))
    for index, arrival in enumerate(orders_of_arrival[:12]):
        run_id = str(uuid.uuid4())
        times = {"START": start, "RUNNING": start + timedelta(seconds=2), "COMPLETE": start + timedelta(seconds=9)}
        events = {kind: run_event(kind, f"job{index}", [orders], [output], run_id=run_id, at=times[kind]) for kind in times}
        for kind in arrival:  # one batch per event: arrival order really matters
            write_events(store, [events[kind]])
        [(state, started, ended, states)] = _rows(
            store,
            f"SELECT r.state, r.started_at, r.ended_at, (SELECT count(*) FROM lineage_events e WHERE e.run_uuid = r.uuid) "
            f"FROM runs r WHERE r.uuid = '{run_id}'",
        )
        outcomes.add((state, str(started)[:19], str(ended)[:19], states))
    assert outcomes == {("COMPLETED", "2026-01-01 00:00:00", "2026-01-01 00:00:09", 3)}


def test_fail_after_complete_takes_the_later_terminal_state(store):
    run_id = str(uuid.uuid4())
    first = run_event("COMPLETE", "j", [], [], run_id=run_id, at=BASE_TIME)
    later = run_event("FAIL", "j", [], [], run_id=run_id, at=BASE_TIME + timedelta(seconds=1))
    write_events(store, [later])
    write_events(store, [first])
    assert _rows(store, "SELECT state FROM runs") == [("FAILED",)]


def test_delete_table_and_data_lineage_of_a_job(store):
    write_events(store, _pipeline(str(uuid.uuid4()), str(uuid.uuid4())))

    removed_table = store.delete_table_lineage("app.insert_into.enriched")
    removed_data = store.delete_data_lineage("app.insert_into.daily")

    assert removed_table == 3 + 5 and removed_data == 2
    assert _rows(store, "SELECT DISTINCT job FROM source_job_lineage") == [("app.insert_into.daily",)]
    assert _rows(store, "SELECT DISTINCT job FROM source_snapshot_lineage") == [("app.insert_into.enriched",)]


def test_stale_finished_jobs_are_retired_and_running_ones_kept(store):
    write_events(store, _pipeline(str(uuid.uuid4()), str(uuid.uuid4())))
    running = run_event(
        "START", "app.stream", [table("raw", "orders", ["id"])], [], run_id=str(uuid.uuid4()), at=BASE_TIME, streaming=True
    )
    write_events(store, [running])

    nothing = store.retire_stale_jobs(timedelta(days=1), now=BASE_TIME + timedelta(hours=1))
    retired = store.retire_stale_jobs(timedelta(days=1), now=BASE_TIME + timedelta(days=2))

    assert nothing == []
    assert sorted(retired) == ["app.insert_into.daily", "app.insert_into.enriched"]
    assert _rows(store, "SELECT DISTINCT job FROM source_job_lineage") == [("app.stream",)]


def test_rebuild_from_raw_events_reproduces_the_stores(store):
    write_events(store, _pipeline(str(uuid.uuid4()), str(uuid.uuid4())))
    before = dump(store)

    store.clear_derived()
    assert dump(store)["job_io"] == []
    import json

    from consumer.ingest.fold import fold
    from consumer.ingest.materialize import materialize
    from consumer.ingest.validate import validate

    for chunk in store.raw_payloads(chunk_size=3):
        store.rebuild(fold([materialize(validate(json.loads(payload))) for payload in chunk], by_hash=False))

    assert dump(store) == before


def test_an_event_the_database_rejects_is_isolated_and_the_rest_stored(postgres_store):
    from consumer.ingest.kafka_loop import write_isolating
    from consumer.ingest.prepare import prepare
    from consumer.ingest.store_writes import StoreWrites

    good_a = batch_write("job_a", [table("raw", "a", ["x"])], table("mart", "a", ["x"]))
    too_long = batch_write("j" * 2000, [table("raw", "b", ["x"])], table("mart", "b", ["x"]))[0]
    # refused by a statement that does not wait for the server: a snapshot id of 300 characters
    long_snapshot = table("raw", "c", ["x"], snapshot="v1")
    long_snapshot["facets"]["snapshot"]["snapshotId"] = "s" * 300
    long_snapshot_id = batch_write("job_c", [long_snapshot], table("mart", "c", ["x"]))[0]
    items = [(f"a{i}", prepare(event)) for i, event in enumerate(good_a)]
    items += [("bad", prepare(too_long)), ("bad snapshot", prepare(long_snapshot_id))]

    stored, failed = write_isolating(StoreWrites(postgres_store), items)

    assert stored == 2
    assert [tag for tag, _ in failed] == ["bad", "bad snapshot"]
    assert all("StringDataRightTruncation" in reason for _, reason in failed)
    assert _rows(postgres_store, "SELECT name FROM jobs") == [("job_a",)]


def test_an_error_of_a_statement_that_did_not_wait_is_raised_as_sqlalchemy_raises_it(postgres_store):
    from sqlalchemy.exc import IntegrityError

    from consumer.store.bulk import overlapped

    with pytest.raises(IntegrityError, match="uq_namespaces|namespaces_name_key"):
        with postgres_store.engine.begin() as connection:
            insert = "INSERT INTO namespaces (name, created_at, updated_at) VALUES ('twice', now(), now())"
            with overlapped(connection):
                connection.exec_driver_sql(insert)
                connection.exec_driver_sql(insert)
    assert _rows(postgres_store, "SELECT name FROM namespaces WHERE name = 'twice'") == []


def test_a_late_earlier_event_of_the_latest_run_renumbers_it_behind_a_new_run(store):
    """Stored runs A (1) and R (2); then one batch brings a new run N and an earlier event of R,
    both still after A, N first: N takes 2 and R 3, without R's old number ever being taken twice."""
    out = table("mart", "t", ["id"])
    run_a, run_r, run_n = (str(uuid.UUID(int=index)) for index in (1, 2, 3))
    write_events(
        store,
        [
            run_event("COMPLETE", "job", [], [out], run_id=run_a, at=BASE_TIME),
            run_event("COMPLETE", "job", [], [out], run_id=run_r, at=BASE_TIME + timedelta(minutes=10)),
        ],
    )
    write_events(
        store,
        [
            run_event("START", "job", [], [out], run_id=run_r, at=BASE_TIME + timedelta(minutes=5)),
            run_event("COMPLETE", "job", [], [out], run_id=run_n, at=BASE_TIME + timedelta(minutes=3)),
        ],
    )
    assert _rows(store, "SELECT uuid, run_seq FROM runs") == [(run_a, 1), (run_r, 3), (run_n, 2)]


def test_a_stored_run_overtaken_by_a_new_earlier_run_takes_its_snapshots_along(store):
    """Run R stored alone (number 1, its output snapshot at barrier 1); then one batch brings a new
    run N that started before R and an earlier event of R: N takes 1, R 2, and R's snapshot row
    follows it to barrier 2 (Hypothesis found the snapshot left at 1)."""
    out = table("mart", "t", ["id"], snapshot="t-1")
    run_r, run_n = (str(uuid.UUID(int=index)) for index in (2, 3))
    write_events(store, [run_event("START", "job", [], [out], run_id=run_r, at=BASE_TIME + timedelta(days=6))])
    write_events(
        store,
        [
            run_event("START", "job", [], [table("mart", "t", ["id"])], run_id=run_n, at=BASE_TIME),
            run_event("START", "job", [], [table("mart", "t", ["id"])], run_id=run_r, at=BASE_TIME + timedelta(hours=3)),
        ],
    )
    assert _rows(store, "SELECT uuid, run_seq FROM runs") == [(run_r, 2), (run_n, 1)]
    assert _rows(store, "SELECT r.uuid, s.barrier_id, s.snapshot_id FROM snapshot_lineage s JOIN runs r ON r.id = s.run_id") == [
        (run_r, 2, "t-1")
    ]


def _statements_sent(store, events: list[dict]) -> list[tuple[str, int]]:
    """(statement, parameter sets) of every statement one batch write sends."""
    sent: list[tuple[str, int]] = []

    def note(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        sent.append((statement, len(parameters) if executemany else 1))

    event.listen(store.engine, "before_cursor_execute", note)
    try:
        write_events(store, events)
    finally:
        event.remove(store.engine, "before_cursor_execute", note)
    return sent


def _statements_writing(store, events: list[dict]) -> list[tuple[str, int]]:
    """(statement's first words, parameter sets) of every statement one batch write sends."""
    return [(" ".join(statement.split()[:3]), sets) for statement, sets in _statements_sent(store, events)]


def test_stored_facets_are_read_only_when_one_of_them_outlives_the_batch(store):
    """A dataset's merged facets (large JSON) are read back only when the batch leaves one of them
    in place; the merge still keeps it (the property tests check every case)."""
    source = table("raw", "orders", ["id"], snapshot="s-1")
    target = table("mart", "orders", ["id"])

    def run(at_minutes: int, source_facets: dict) -> list[dict]:
        at = BASE_TIME + timedelta(minutes=at_minutes)
        return batch_write("app.job", [{**source, "facets": source_facets}], target, start=at)

    def reads_facets(events: list[dict]) -> bool:
        return any(
            statement.lstrip().startswith("SELECT") and "datasets.facets" in statement
            for statement, _ in _statements_sent(store, events)
        )

    write_events(store, run(0, source["facets"]))
    assert not reads_facets(run(10, source["facets"]))  # every stored facet comes again, newer
    without_snapshot = {name: facet for name, facet in source["facets"].items() if name != "snapshot"}
    assert reads_facets(run(20, without_snapshot))
    with store.engine.connect() as connection:
        stored = connection.execute(text("SELECT facets FROM datasets WHERE name LIKE '%raw.db/orders'")).scalar_one()
    assert set(json.loads(stored) if isinstance(stored, str) else stored) == set(source["facets"])


def test_a_batch_costs_the_same_statements_whatever_its_size(store):
    """Set-based writes: ten times the events, the same statements (SQLite: one executemany per
    table; PostgreSQL: each INSERT one statement for all its rows, sent as column arrays)."""

    def runs(first: int, count: int) -> list[dict]:
        events = []
        for index in range(first, first + count):
            source, target = (
                table("raw", f"s{index % 7}", ["a", "b"], snapshot=f"s-{index}"),
                table("mart", f"t{index % 5}", ["a", "b"]),
            )
            output = with_column_lineage(target, {"a": [(source, "a")], "b": [(source, "b")]})
            events += batch_write(f"job_{index % 5}", [source], output, start=BASE_TIME + timedelta(minutes=index))
        return events

    write_events(store, runs(0, 40))  # every table and field known: the batches below only update
    small = _statements_writing(store, runs(40, 10))
    large = _statements_writing(store, runs(50, 100))
    assert [statement for statement, _ in large] == [statement for statement, _ in small]
    if store.engine.dialect.name == "postgresql":
        assert [(statement, sets) for statement, sets in large if sets != 1] == []


def test_facets_are_kept_as_received_null_facets_and_numbers_beyond_64_bits_included(store):
    output = table("mart", "big", ["id"], snapshot="big-1")
    output["facets"]["custom"] = {"total": 2**70, "ratio": 0.5, "names": ["é", None]}
    output["facets"]["withdrawn"] = None
    write_events(store, [run_event("COMPLETE", "job", [], [output], run_id=str(uuid.uuid4()), at=BASE_TIME)])

    with store.engine.connect() as connection:
        dataset_facets = connection.execute(text("SELECT facets FROM datasets WHERE name LIKE '%big'")).scalar_one()
        version_facets = connection.execute(
            text("SELECT c.facets FROM dataset_versions v JOIN dataset_version_contents c ON c.id = v.content_id")
        ).scalar_one()
    dataset_facets, version_facets = (json.loads(f) if isinstance(f, str) else f for f in (dataset_facets, version_facets))
    assert dataset_facets["custom"] == {"total": 2**70, "ratio": 0.5, "names": ["é", None]}
    assert "withdrawn" not in dataset_facets, "a null facet merges nothing"
    assert version_facets["withdrawn"] is None and version_facets["custom"]["total"] == 2**70, "a version keeps what was said"


def test_versions_of_one_content_share_one_stored_content(store):
    """A scheduled job's runs make new versions (snapshots) of its datasets; what those versions say
    besides their own facets (fields, schema, symlinks, column lineage ...) is stored once per
    distinct content, and each version still answers with all of it."""
    from consumer.query import marquez as mq

    def run(day: int, columns: list[str]) -> list[dict]:
        source = table("raw", "events", columns, snapshot=f"raw-{day}")
        output = with_column_lineage(
            table("mart", "daily", columns, snapshot=f"daily-{day}"), {c: [(source, c)] for c in columns}
        )
        return batch_write("app.daily", [source], output, start=BASE_TIME + timedelta(days=day))

    write_events(store, [event for day in range(5) for event in run(day, ["id", "name"])])
    assert _rows(store, "SELECT count(*) FROM dataset_versions") == [(10,)]
    assert _rows(store, "SELECT count(*) FROM dataset_version_contents") == [(2,)]

    write_events(store, run(5, ["id", "name", "country"]))  # the schema changes: one more content per dataset
    assert _rows(store, "SELECT count(*) FROM dataset_version_contents") == [(4,)]
    namespace, name = "file", next(row[0] for row in _rows(store, "SELECT name FROM datasets") if row[0].endswith("daily"))
    versions = mq.list_dataset_versions(store, namespace, name, 10, 0)["versions"]
    assert [v["version"] for v in versions] == [f"daily-{day}" for day in (5, 4, 3, 2, 1, 0)]
    assert [len(v["fields"]) for v in versions] == [3, 2, 2, 2, 2, 2]
    assert all(v["facets"]["snapshot"]["snapshotId"] == v["version"] and "columnLineage" in v["facets"] for v in versions)


def test_a_jobs_column_lineage_is_found_by_index_not_by_reading_the_whole_table(store):
    """Every batch replaces the column lineage of the jobs whose version changed; on a store of
    millions of edges a table scan per batch would make each write cost the store's size."""
    from sqlalchemy import delete, select

    from consumer.store.schema import column_lineage, column_lineage_of_jobs

    dialect = store.engine.dialect.name
    bare = delete(column_lineage).where(column_lineage.c.job_id.in_([1, 2]))
    replaced = delete(column_lineage).where(column_lineage_of_jobs([1, 2], dialect))
    published = select(column_lineage.c.id).where(
        column_lineage.c.output_dataset_id.in_([3]) | column_lineage_of_jobs([1, 2], dialect)
    )
    table_scan = "SCAN column_lineage" if dialect == "sqlite" else "Seq Scan on column_lineage"
    job_indexes = ("uq_column_lineage_field", "uq_column_lineage_dataset")  # both led by job_id

    assert table_scan in query_plan(store, bare)  # job_id alone: neither partial index serves it
    for statement in (replaced, published):
        plan = query_plan(store, statement)
        assert table_scan not in plan, plan
        if dialect == "sqlite":  # no statistics: the plan is the one the condition's form gives
            assert all(index in plan for index in job_indexes) and "ix_column_lineage_output_field" not in plan, plan
