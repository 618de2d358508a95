"""Partition-level data lineage on real SQLite and PostgreSQL stores filled through the consumer's ingestion:
the partition_lineage rows and views, replay and deletion, and the partition questions (lineage, correction plan,
CLI, errors)."""

from __future__ import annotations

import io
import json
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import text

from consumer.ingest.fold import fold
from consumer.ingest.prepare import prepare
from consumer.partitions import parse_partition, partition_name, partition_names
from consumer.query import lineage_store as ls
from consumer.query.cli import main
from consumer.query.errors import BadParameter, NotFound
from consumer.store.store import Store
from tests.consumer.helpers import dump, write_events
from tests.query.daily_pipeline import CLEANED, COUNTRIES, DAILY, DAYS, RAW, REPORT, events, lake, run_uuid
from tests.support.events import BASE_TIME, batch_write, run_event
from tests.support.spec import assert_valid_event


@pytest.fixture
def daily_store(store):
    produced = events()
    for event in produced:
        assert_valid_event(event)
    write_events(store, produced)
    return store


def _rows(store: Store, query: str, **parameters: str) -> list[tuple]:
    with store.engine.connect() as connection:
        return sorted((tuple(row) for row in connection.execute(text(query), parameters)), key=repr)


def _nodes(refs: list[dict]) -> set[tuple[str, str | None]]:
    return {(ref["name"], ref["partition"]) for ref in refs}


def test_partition_names_are_hive_partition_names():
    assert partition_name({"dt": "2024-01-02"}) == "dt=2024-01-02"
    assert partition_name({"b": "x/y=z%", "a": None}) == "b=x%2Fy%3Dz%25/a=__HIVE_DEFAULT_PARTITION__"
    assert partition_names([{"dt": "2"}, {"dt": "1"}, {"dt": "2"}, {}, "junk"]) == ("dt=1", "dt=2")
    assert parse_partition(" dt=2024-01-02/ ") == "dt=2024-01-02"
    assert parse_partition("b=x%2Fy/a=__HIVE_DEFAULT_PARTITION__") == "b=x%2Fy/a=__HIVE_DEFAULT_PARTITION__"
    for malformed in ("", "dt", "=1", "dt=1//h=2", "x=" + "y" * 600):
        with pytest.raises(ValueError):
            parse_partition(malformed)


def test_each_run_stores_the_partitions_it_read_and_wrote(daily_store):
    aggregate = run_uuid("etl.aggregate", 2)
    rows = _rows(
        daily_store,
        """SELECT r.uuid, s.barrier_id, d.name, p.direction, p.partition_name FROM partition_lineage p
           JOIN snapshot_lineage s ON s.id = p.snapshot_lineage_id JOIN runs r ON r.id = s.run_id
           JOIN datasets d ON d.id = p.dataset_id WHERE r.uuid = :run""",
        run=aggregate,
    )
    # the dimension read whole has no partition rows; the run is its job's second (barrier 2)
    assert rows == [(aggregate, 2, CLEANED, "input", "dt=2024-01-02"), (aggregate, 2, DAILY, "output", "dt=2024-01-02")]
    backfill = _rows(daily_store, 'SELECT job, barrier_id, "table", snapshot_id, partition FROM sink_partition_lineage')
    assert ("etl.backfill", 1, "daily", "daily-4", "dt=2024-01-03") in backfill and len(backfill) == 3 + 3 + 2
    assert _rows(daily_store, "SELECT count(*) FROM sink_partition_lineage WHERE \"table\" = 'report'") == [(0,)]
    read = _rows(daily_store, 'SELECT job, barrier_id, "database", "table", partition FROM source_partition_lineage')
    assert ("etl.clean", 3, "lake", "raw", "dt=2024-01-03") in read and len(read) == 3 * 3 + 2


def test_a_runs_partitions_are_the_union_of_its_events_in_any_order_or_batching(store):
    def run(job: str, run_id: str) -> list[dict]:
        start, complete = batch_write(job, [], lake(DAILY, "daily-1", [{"dt": DAYS[0]}]), run_id=run_id)
        complete["outputs"] = [lake(DAILY, "daily-1", [{"dt": DAYS[1]}])]
        return [start, complete]

    one_batch, two_batches = str(uuid.uuid4()), str(uuid.uuid4())
    write_events(store, list(reversed(run("etl.a", one_batch))))
    for event in run("etl.b", two_batches):
        write_events(store, [event])
    query = "SELECT job, partition FROM sink_partition_lineage"
    assert _rows(store, query) == [(job, f"dt={day}") for job in ("etl.a", "etl.b") for day in DAYS[:2]]


def test_the_views_answer_the_documented_partition_query(daily_store):
    # docs/store.md: the partitions written from partition dt=2024-01-02 of raw, one step downstream
    query = """SELECT T."table", T.partition, T.job, T.barrier_id FROM source_partition_lineage S
               JOIN sink_partition_lineage T ON S.job = T.job AND S.barrier_id = T.barrier_id
               WHERE S."table" = 'raw' AND S.partition = 'dt=2024-01-02'"""
    assert _rows(daily_store, query) == [("cleaned", "dt=2024-01-02", "etl.clean", 2)]


def test_an_input_known_to_have_read_no_partition_is_no_source(store):
    nothing_read = lake(RAW, "raw-1", [])  # every partition pruned away
    write_events(
        store,
        batch_write(
            "etl.join", [nothing_read, lake(CLEANED, "cleaned-1", [{"dt": DAYS[0]}])], lake(DAILY, "daily-1", [{"dt": DAYS[0]}])
        ),
    )
    answer = ls.partition_lineage(store, f"file:{DAILY}", f"dt={DAYS[0]}", "upstream", 5)
    assert _nodes(answer["partitions"]) == {(CLEANED, f"dt={DAYS[0]}")}


def test_a_bad_partition_names_exactly_the_partitions_derived_from_it(daily_store):
    answer = ls.partition_lineage(daily_store, f"file:{RAW}", "dt=2024-01-01", "downstream", 20)
    assert answer["matchedPartitions"] == ["dt=2024-01-01"]
    assert [(p["name"], p["partition"], p["distance"]) for p in answer["partitions"]] == [
        (CLEANED, "dt=2024-01-01", 1),
        (DAILY, "dt=2024-01-01", 2),
        (REPORT, None, 3),  # an unpartitioned output: the whole table, at the snapshot written
    ]
    steps = [(x["job"]["name"], x["batchId"], x["runId"], x["to"]["snapshot"]) for x in answer["steps"]]
    assert steps == [
        ("etl.clean", 1, run_uuid("etl.clean", 1), "cleaned-1"),
        ("etl.aggregate", 1, run_uuid("etl.aggregate", 1), "daily-1"),
        ("etl.report", 1, run_uuid("etl.report", 1), "report-1"),
    ]
    assert ls.partition_lineage(daily_store, f"file:{RAW}", "dt=2024-01-01", "downstream", 1)["partitions"] == [
        {**answer["partitions"][0]}
    ]


def test_a_batch_that_read_a_bad_partition_taints_everything_it_wrote(daily_store):
    answer = ls.partition_lineage(daily_store, f"file:{RAW}", "dt=2024-01-02", "downstream", 20)
    assert _nodes(answer["partitions"]) == {
        (CLEANED, "dt=2024-01-02"),
        (DAILY, "dt=2024-01-02"),
        (DAILY, "dt=2024-01-03"),  # etl.backfill read cleaned dt=2024-01-02 (and dt=2024-01-03) in one batch
        (REPORT, None),
    }
    assert {(x["job"]["name"], x["batchId"]) for x in answer["steps"]} == {
        ("etl.clean", 2),
        ("etl.aggregate", 2),
        ("etl.backfill", 1),
        ("etl.report", 2),
        ("etl.report", 3),
    }


def test_upstream_partitions_include_tables_read_whole(daily_store):
    answer = ls.partition_lineage(daily_store, "lake.daily", "dt=2024-01-01", "upstream", 20)
    assert {(p["name"], p["partition"], p["distance"]) for p in answer["partitions"]} == {
        (CLEANED, "dt=2024-01-01", 1),
        (COUNTRIES, None, 1),
        (RAW, "dt=2024-01-01", 2),
    }
    [dimension] = [x for x in answer["steps"] if x["from"]["name"] == COUNTRIES]
    assert dimension["from"]["snapshot"] == "countries-1" and dimension["to"]["partition"] == "dt=2024-01-01"


def test_correction_plan_lists_partitions_to_recompute_and_batches_to_rerun(daily_store):
    plan = ls.partition_correction_plan(daily_store, f"file:{RAW}", "dt=2024-01-02")
    assert plan["badPartition"] == "dt=2024-01-02"
    assert [(p["name"], p["partition"]) for p in plan["partitions"]] == [
        (CLEANED, "dt=2024-01-02"),
        (DAILY, "dt=2024-01-02"),
        (DAILY, "dt=2024-01-03"),
        (REPORT, None),
    ]
    daily_02 = plan["partitions"][1]
    assert {(w["job"]["name"], w["batchId"]) for w in daily_02["writtenBy"]} == {("etl.aggregate", 2), ("etl.backfill", 1)}
    assert daily_02["derivedSnapshots"] == ["daily-2", "daily-4"]
    jobs = {j["name"]: j for j in plan["jobs"]}
    assert sorted(jobs) == ["etl.aggregate", "etl.backfill", "etl.clean", "etl.report"]
    assert [(b["batchId"], b["runId"]) for b in jobs["etl.report"]["batches"]] == [
        (2, run_uuid("etl.report", 2)),
        (3, run_uuid("etl.report", 3)),
    ]
    assert jobs["etl.report"]["restartFromBatch"] == 2
    [clean] = jobs["etl.clean"]["batches"]
    assert _nodes(clean["badInputs"]) == {(RAW, "dt=2024-01-02")} and _nodes(clean["recomputes"]) == {(CLEANED, "dt=2024-01-02")}
    out = io.StringIO()
    assert main(["partition-correction-plan", f"file:{RAW}", "dt=2024-01-02"], daily_store, out) == 0
    assert "partition to recompute" in out.getvalue() and "/lake/report (whole table)" in out.getvalue()
    out = io.StringIO()
    assert main(["--json", "partitions", f"file:{RAW}", "dt=2024-01-02", "--downstream"], daily_store, out) == 0
    assert (
        json.loads(out.getvalue())["partitions"]
        == ls.partition_lineage(daily_store, f"file:{RAW}", "dt=2024-01-02", "downstream", 20)["partitions"]
    )


def test_a_partition_names_the_partitions_below_it(store):
    hourly = [{"dt": "2024-01-02", "hour": "00"}, {"dt": "2024-01-02", "hour": "01"}]
    write_events(
        store,
        batch_write("etl.hourly", [lake(RAW, "raw-1", hourly)], lake(CLEANED, "cleaned-1", [{"dt": "2024-01-02"}]))
        + batch_write(
            "etl.other_day",
            [lake(RAW, "raw-2", [{"dt": "2024-01-020", "hour": "00"}])],
            lake(DAILY, "daily-1", [{"dt": "2024-01-020"}]),
            start=BASE_TIME + timedelta(hours=1),
        ),
    )
    answer = ls.partition_lineage(store, f"file:{RAW}", "dt=2024-01-02", "downstream", 5)
    assert answer["matchedPartitions"] == ["dt=2024-01-02/hour=00", "dt=2024-01-02/hour=01"]
    assert _nodes(answer["partitions"]) == {(CLEANED, "dt=2024-01-02")}
    assert ls.partition_lineage(store, f"file:{RAW}", "dt=2024-01-02/hour=01", "downstream", 5)["matchedPartitions"] == [
        "dt=2024-01-02/hour=01"
    ]


def test_micro_batches_and_late_runs_keep_their_partitions_on_the_right_batch(store):
    stream_run = str(uuid.uuid4())
    write_events(
        store,
        [
            run_event(
                "RUNNING",
                "etl.stream",
                [lake(RAW, f"raw-{batch}", [{"dt": DAYS[batch]}])],
                [lake(CLEANED, f"cleaned-{batch}", [{"dt": DAYS[batch]}])],
                run_id=stream_run,
                at=BASE_TIME + timedelta(minutes=batch),
                streaming=True,
                micro_batch={"batchId": batch, "queryId": str(uuid.UUID(int=7)), "runId": stream_run, "numInputRows": 1},
            )
            for batch in (0, 1)
        ],
    )
    late, early = str(uuid.uuid4()), str(uuid.uuid4())
    write_events(
        store,
        batch_write(
            "etl.late",
            [lake(CLEANED, "cleaned-1", [{"dt": DAYS[1]}])],
            lake(DAILY, "daily-1", [{"dt": DAYS[1]}]),
            run_id=late,
            start=BASE_TIME + timedelta(hours=2),
        ),
    )
    # a run that started earlier arrives later: the late one becomes batch 2, its partitions with it
    write_events(
        store,
        batch_write(
            "etl.late",
            [lake(CLEANED, "cleaned-0", [{"dt": DAYS[0]}])],
            lake(DAILY, "daily-0", [{"dt": DAYS[0]}]),
            run_id=early,
            start=BASE_TIME + timedelta(hours=1),
        ),
    )
    steps = ls.partition_lineage(store, f"file:{RAW}", f"dt={DAYS[1]}", "downstream", 5)["steps"]
    assert [(x["job"]["name"], x["batchId"], x["to"]["partition"]) for x in steps] == [
        ("etl.stream", 1, f"dt={DAYS[1]}"),
        ("etl.late", 2, f"dt={DAYS[1]}"),
    ]
    assert steps[1]["runId"] == late


def test_replay_rebuilds_and_deleting_a_jobs_data_lineage_removes_its_partitions(daily_store):
    before = dump(daily_store)
    assert len(before["partition_lineage"]) == 6 + 6 + 3 + 4  # clean, aggregate, report (reads only), backfill
    saved = daily_store.clear_derived()
    assert dump(daily_store)["partition_lineage"] == []
    payloads = [payload for chunk in daily_store.raw_payloads() for payload in chunk]
    for start in range(0, len(payloads), 5):  # replayed in event-time order, in other batches than written
        daily_store.rebuild(fold([prepare(payload) for payload in payloads[start : start + 5]], by_hash=False))
    daily_store.restore_tags(saved)
    assert dump(daily_store) == before
    removed = daily_store.delete_data_lineage("etl.aggregate")
    assert removed == 3 * 3 + 3 * 2  # three runs: 3 snapshot rows and 2 partition rows each
    assert len(dump(daily_store)["partition_lineage"]) == len(before["partition_lineage"]) - 6
    answer = ls.partition_lineage(daily_store, f"file:{RAW}", "dt=2024-01-01", "downstream", 20)
    assert _nodes(answer["partitions"]) == {(CLEANED, "dt=2024-01-01")}


def test_unknown_tables_and_partitions_are_not_found_and_bad_parameters_rejected(daily_store):
    with pytest.raises(NotFound, match="partition 'dt=2024-01-09'"):
        ls.partition_lineage(daily_store, f"file:{RAW}", "dt=2024-01-09", "downstream", 5)
    with pytest.raises(NotFound):
        ls.partition_correction_plan(daily_store, "file:/lake/nope", "dt=2024-01-01")
    with pytest.raises(NotFound):  # a table read whole has no partitions
        ls.partition_correction_plan(daily_store, f"file:{COUNTRIES}", "dt=2024-01-01")
    for partition, direction, depth in (("dt", "downstream", 5), ("dt=1", "sideways", 5), ("dt=1", "upstream", 101)):
        with pytest.raises(BadParameter):
            ls.partition_lineage(daily_store, f"file:{RAW}", partition, direction, depth)
    assert main(["partitions", f"file:{RAW}", "nonsense"], daily_store, io.StringIO()) == 1
