"""Partition-level lineage end to end: a daily-partitioned pipeline of real Spark jobs run with the emitter
attached, its events ingested into the store (SQLite and PostgreSQL), then asked through the query functions
and the HTTP API which partitions derive from a bad upstream partition.

    raw --clean--> cleaned --aggregate--> daily --report--> report      (all partitioned by dt)
                                       countries (unpartitioned) --^

Each day's run of every job reads only that day's partition through a partition filter.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from consumer.api import create_app
from consumer.query import lineage_store as ls
from tests.consumer.helpers import write_events
from tests.support.spark import read_events, wait_for_listeners
from tests.support.spec import assert_valid_event

pytestmark = pytest.mark.spark

DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")
BAD = "dt=2024-01-02"


def _run_day(spark: Any, data: Path, day: str) -> None:
    """One day of the pipeline: ingest the day into raw, then the three jobs, each on that day's partition."""
    raw, cleaned, daily, report = (str(data / name) for name in ("raw", "cleaned", "daily", "report"))
    rows = [(i, "FR" if i % 2 else "NO", float(i) if i % 3 else None, day) for i in range(6)]
    spark.createDataFrame(rows, "id int, country string, amount double, dt string").write.mode("append").partitionBy(
        "dt"
    ).parquet(raw)
    on_day = f"dt = '{day}'"
    spark.read.parquet(raw).where(on_day).where("amount IS NOT NULL").write.mode("append").partitionBy("dt").parquet(cleaned)
    spark.read.parquet(cleaned).where(on_day).groupBy("dt", "country").sum("amount").withColumnRenamed(
        "sum(amount)", "total"
    ).write.mode("append").partitionBy("dt").parquet(daily)
    countries = spark.read.parquet(str(data / "countries"))
    spark.read.parquet(daily).where(on_day).join(countries, "country").select("dt", "name", "total").write.mode(
        "append"
    ).partitionBy("dt").parquet(report)


@pytest.fixture(scope="module")
def pipeline(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[dict[str, Any]], Path]]:
    from emitter.listener import attach, close_session

    tmp = tmp_path_factory.mktemp("daily-partitions")
    data, log = tmp / "data", tmp / "events.jsonl"
    spark.createDataFrame([("FR", "France"), ("NO", "Norway")], "country string, name string").write.parquet(
        str(data / "countries")
    )
    close_session(spark)
    assert attach(spark, {"transport": {"type": "file", "log_file_path": str(log), "append": True}}) is not None
    try:
        for day in DAYS:
            _run_day(spark, data, day)
            wait_for_listeners(spark)
    finally:
        close_session(spark)
    yield read_events(log), data


def _table(data: Path, name: str) -> str:
    return f"file:{data / name}"


def _day_two_runs(events: list[dict[str, Any]], data: Path) -> dict[str, str]:
    """Output table name -> the run id of the job run that read day two (as the emitter reported it)."""
    runs = {}
    for event in events:
        if event["eventType"] != "COMPLETE" or not event["inputs"]:
            continue
        read = [p for source in event["inputs"] for p in source["facets"].get("snapshot", {}).get("partitions", [])]
        if read == [{"dt": DAYS[1]}]:
            [output] = event["outputs"]
            runs[Path(output["name"]).name] = event["run"]["runId"]
    return runs


def test_the_emitter_reports_the_one_partition_each_daily_run_read(pipeline):
    events, data = pipeline
    for event in events:
        assert_valid_event(event)
    completed = [e for e in events if e["eventType"] == "COMPLETE" and e["inputs"]]
    assert len(completed) == 3 * len(DAYS)
    for event in completed:
        partitioned = [s for s in event["inputs"] if Path(s["name"]).name != "countries"]
        [source] = partitioned
        [output] = event["outputs"]
        assert len(source["facets"]["snapshot"]["partitions"]) == 1
        assert source["facets"]["snapshot"]["partitions"] == output["facets"]["snapshot"]["partitions"]
    assert set(_day_two_runs(events, data)) == {"cleaned", "daily", "report"}


def test_a_bad_upstream_partition_names_exactly_the_same_days_partitions_downstream(pipeline, store):
    events, data = pipeline
    write_events(store, events)
    day_two = _day_two_runs(events, data)
    expected = {(str(data / name), BAD) for name in ("cleaned", "daily", "report")}

    lineage = ls.partition_lineage(store, _table(data, "raw"), BAD, "downstream", 20)
    assert {(p["name"], p["partition"]) for p in lineage["partitions"]} == expected
    assert {(x["from"]["partition"], x["to"]["partition"]) for x in lineage["steps"]} == {(BAD, BAD)}
    assert {(Path(x["to"]["name"]).name, x["runId"]) for x in lineage["steps"]} == set(day_two.items())

    plan = ls.partition_correction_plan(store, _table(data, "raw"), BAD)
    assert {(p["name"], p["partition"]) for p in plan["partitions"]} == expected
    reruns = {(b["runId"], b["batchId"]) for j in plan["jobs"] for b in j["batches"]}
    assert reruns == {(run, 2) for run in day_two.values()}  # each job's second run: its batch of day two

    upstream = ls.partition_lineage(store, _table(data, "report"), "dt=2024-01-03", "upstream", 20)
    assert {(Path(p["name"]).name, p["partition"]) for p in upstream["partitions"]} == {
        ("daily", "dt=2024-01-03"),
        ("countries", None),  # read whole
        ("cleaned", "dt=2024-01-03"),
        ("raw", "dt=2024-01-03"),
    }

    with TestClient(create_app(store), raise_server_exceptions=False) as client:
        answer = client.get(
            "/api/v1/lineage-store/partitions",
            params={"table": _table(data, "raw"), "partition": BAD, "direction": "downstream"},
        )
        assert answer.status_code == 200 and answer.json() == json.loads(json.dumps(lineage))
        over_http = client.get(
            "/api/v1/lineage-store/partition-correction-plan", params={"table": _table(data, "raw"), "partition": BAD}
        )
        assert over_http.status_code == 200 and over_http.json() == json.loads(json.dumps(plan))
        unknown = client.get(
            "/api/v1/lineage-store/partitions", params={"table": _table(data, "raw"), "partition": "dt=2024-01-09"}
        )
        assert unknown.status_code == 404
