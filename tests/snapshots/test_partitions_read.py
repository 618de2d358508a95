"""The partitions a read scanned after partition pruning, on the input `snapshot` facet: from partition
directories (pure), from the scans' helper output (pure), and live on real Spark with the emitter attached."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emitter.capture import RelationInfo
from emitter.described import partitions_by_leaf
from emitter.snapshots import partitions_read
from tests.support.spark import wait_for_listeners
from tests.support.spec import assert_valid_event

ROOT = "file:/lake/events"


def test_partitions_read_come_from_the_directories_below_the_root() -> None:
    directories = [
        f"{ROOT}/dt=2024-01-02/hour=01",
        f"{ROOT}/dt=2024-01-02/hour=00",
        "/lake/events/dt=2024-01-02/hour=00",  # the same directory as a path
        f"{ROOT}/dt=__HIVE_DEFAULT_PARTITION__/hour=a%2Fb",
    ]
    assert partitions_read(ROOT, directories, ["dt", "hour"]) == (
        {"dt": None, "hour": "a/b"},
        {"dt": "2024-01-02", "hour": "00"},
        {"dt": "2024-01-02", "hour": "01"},
    )
    # `k=v` segments above the root are no partition; a root that is itself a partition (a read of
    # one partition directory with basePath) still names its columns
    assert partitions_read("file:/lake/env=prod/t", ["file:/lake/env=prod/t/DT=1"], ["dt"]) == ({"DT": "1"},)
    assert partitions_read(f"{ROOT}/dt=1", [f"{ROOT}/dt=1"], ["dt"]) == ({"dt": "1"},)
    assert partitions_read(ROOT, [], ["dt"]) == ()


def test_scans_are_matched_to_their_leaves_by_key_else_by_root() -> None:
    events = RelationInfo("LogicalRelation", paths=(ROOT,), partition_columns=("dt",))
    plain = RelationInfo("LogicalRelation", paths=("file:/lake/plain",))
    scans = [
        {"key": 1, "paths": [ROOT], "directories": [f"{ROOT}/dt=2"]},
        {"key": None, "paths": [ROOT + "/"], "directories": [f"{ROOT}/dt=1"]},  # no logical link: by root
        {"key": 3, "paths": ["file:/lake/plain"], "directories": ["file:/lake/plain/x=1"]},
    ]
    assert partitions_by_leaf(scans, {1: events, 3: plain}) == {1: ({"dt": "1"}, {"dt": "2"})}
    assert partitions_by_leaf([{"key": 1, "paths": [ROOT], "directories": []}], {1: events}) == {1: ()}


@pytest.fixture(scope="module")
def attached(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Path, Path]]:
    """The shared Spark session with the emitter attached (events to a JSON-lines file), a table partitioned by
    dt/hour over three days at `data/events`, and an unpartitioned one at `data/dim`."""
    from emitter.listener import attach, close_session

    close_session(spark)
    tmp = tmp_path_factory.mktemp("partitions-read")
    log = tmp / "events.jsonl"
    data = tmp / "data"
    rows = [(i, f"2024-01-0{day}", f"0{hour}") for day in (1, 2, 3) for hour in (0, 1) for i in range(2)]
    spark.createDataFrame(rows, "id int, dt string, hour string").write.partitionBy("dt", "hour").parquet(str(data / "events"))
    spark.createDataFrame([(0, "zero"), (1, "one")], "id int, name string").write.parquet(str(data / "dim"))
    assert attach(spark, {"transport": {"type": "file", "log_file_path": str(log), "append": True}}) is not None
    yield spark, log, data
    close_session(spark)


def _inputs_of(spark: Any, log: Path, output: Path) -> dict[str, dict[str, Any]]:
    wait_for_listeners(spark)
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    [complete] = [e for e in events if e["eventType"] == "COMPLETE" and [o["name"] for o in e["outputs"]] == [str(output)]]
    assert_valid_event(complete)
    return {source["name"]: source["facets"]["snapshot"] for source in complete["inputs"]}


@pytest.mark.spark
def test_a_read_reports_the_partitions_left_after_pruning(attached: tuple[Any, Path, Path]) -> None:
    spark, log, data = attached
    events = spark.read.parquet(str(data / "events"))
    day_two = events.where("dt = '2024-01-02'")
    third_morning = events.where("dt = '2024-01-03' AND hour = '00'")
    day_two.unionByName(third_morning).join(spark.read.parquet(str(data / "dim")), "id").write.parquet(str(data / "out"))

    inputs = _inputs_of(spark, log, data / "out")
    assert inputs[str(data / "events")]["partitions"] == [
        {"dt": "2024-01-02", "hour": "00"},
        {"dt": "2024-01-02", "hour": "01"},
        {"dt": "2024-01-03", "hour": "00"},
    ]
    assert "partitions" not in inputs[str(data / "dim")]  # unpartitioned: read whole
    # the snapshot is still the whole table's, as its writer reported it
    write_of_events = spark.read.parquet(str(data / "events")).where("dt = '2024-01-01'")
    write_of_events.write.parquet(str(data / "first_day"))
    first_day = _inputs_of(spark, log, data / "first_day")[str(data / "events")]
    assert first_day["partitions"] == [{"dt": "2024-01-01", "hour": "00"}, {"dt": "2024-01-01", "hour": "01"}]
    assert first_day["snapshotId"] == inputs[str(data / "events")]["snapshotId"]


@pytest.mark.spark
def test_a_partitioned_catalog_table_read_reports_its_pruned_partitions(attached: tuple[Any, Path, Path]) -> None:
    spark, log, data = attached
    spark.sql("DROP TABLE IF EXISTS partitions_read_events")
    spark.read.parquet(str(data / "events")).write.partitionBy("dt", "hour").saveAsTable("partitions_read_events")
    spark.table("partitions_read_events").where("dt >= '2024-01-02' AND hour = '01'").write.parquet(str(data / "late"))
    [snapshot] = _inputs_of(spark, log, data / "late").values()
    # values as the table's directories name them: reading the path made `hour` an int, so it wrote hour=1
    assert snapshot["partitions"] == [{"dt": "2024-01-02", "hour": "1"}, {"dt": "2024-01-03", "hour": "1"}]
