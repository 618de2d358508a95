"""Data lineage through snapshot ids, end to end on real Spark with the emitter attached:
job 1 (A -> B), job 2 (B -> C), then job 1 again with new data in A."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emitter.listener import files, jvm
from tests.support.spark import wait_for_listeners
from tests.support.spec import assert_valid_event

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def attached(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Path]]:
    """The shared Spark session with the emitter attached, every event going to a JSON-lines file."""
    from emitter.listener import attach, close_session

    close_session(spark)  # a fresh attachment, writing to our file
    log = tmp_path_factory.mktemp("snapshot-chain") / "events.jsonl"
    assert attach(spark, {"transport": {"type": "file", "log_file_path": str(log), "append": True}}) is not None
    yield spark, log
    close_session(spark)


def _completed_runs(spark: Any, log: Path) -> list[dict[str, Any]]:
    wait_for_listeners(spark)
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    for event in events:
        assert_valid_event(event)
    return [e for e in events if e["eventType"] == "COMPLETE" and (e["inputs"] or e["outputs"])]


def _snapshot(datasets: list[dict[str, Any]], path: Path) -> dict[str, Any]:
    [dataset] = [d for d in datasets if d["name"] == str(path)]
    facets = dataset["facets"]
    assert facets["version"]["datasetVersion"] == facets["snapshot"]["snapshotId"]
    return facets["snapshot"]


def test_snapshot_ids_chain_across_jobs(attached: tuple[Any, Path], tmp_path: Path) -> None:
    spark, log = attached
    table_a, table_b, table_c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    spark.createDataFrame([(1, "x", "20240501"), (2, "y", "20240502")], "id int, name string, dt string").write.parquet(
        str(table_a)
    )

    def job_1() -> None:
        spark.read.parquet(str(table_a)).selectExpr("id", "upper(name) AS name", "dt").write.mode("overwrite").partitionBy(
            "dt"
        ).parquet(str(table_b))

    def job_2() -> None:
        spark.read.parquet(str(table_b)).groupBy("dt").count().write.mode("overwrite").parquet(str(table_c))

    job_1()
    job_2()
    spark.createDataFrame([(3, "z", "20240503")], "id int, name string, dt string").write.mode("append").parquet(str(table_a))
    job_1()

    runs = _completed_runs(spark, log)
    writes_of_b = [r for r in runs if [o["name"] for o in r["outputs"]] == [str(table_b)]]
    [read_of_b] = [r for r in runs if [o["name"] for o in r["outputs"]] == [str(table_c)]]
    assert len(writes_of_b) == 2
    first_b, second_b = (_snapshot(r["outputs"], table_b) for r in writes_of_b)

    assert _snapshot(read_of_b["inputs"], table_b)["snapshotId"] == first_b["snapshotId"]
    assert second_b["snapshotId"] != first_b["snapshotId"]
    assert first_b["kind"] == second_b["kind"] == "content"
    assert first_b["partitions"] == [{"dt": "20240501"}, {"dt": "20240502"}]
    assert second_b["partitions"] == [{"dt": "20240501"}, {"dt": "20240502"}, {"dt": "20240503"}]
    # job 1's two runs read different snapshots of A
    assert (
        _snapshot(writes_of_b[0]["inputs"], table_a)["snapshotId"] != _snapshot(writes_of_b[1]["inputs"], table_a)["snapshotId"]
    )


def _read_snapshot(spark: Any, frame: Any) -> Any:
    """The input snapshot the batch listener takes of a read of one file source."""
    gateway = spark.sparkContext._gateway
    [leaf] = jvm.PlanDumper(gateway).describe(frame._jdf.queryExecution().optimizedPlan()).leaves
    return files.described_input_snapshot(gateway, spark._jsc.hadoopConfiguration(), leaf)


def test_spark_file_index_and_a_listing_after_the_write_agree(attached: tuple[Any, Path], tmp_path: Path) -> None:
    """The input side (Spark's file index, one py4j call) and the output side (listing) compute
    the same id for the same committed files, also when the read prunes partitions."""
    spark, _ = attached
    table = tmp_path / "events"
    spark.range(40).selectExpr("id", "CAST(id % 4 AS STRING) AS dt").write.partitionBy("dt").parquet(str(table))
    (table / "_SUCCESS").write_text("")
    written = files.output_snapshot(spark.sparkContext._gateway, spark._jsc.hadoopConfiguration(), f"file:{table}", None)
    read = _read_snapshot(spark, spark.read.parquet(str(table)).where("dt = '1'"))
    assert written is not None and read is not None
    assert read.snapshot_id == written.snapshot_id
    assert written.partitions == tuple({"dt": str(n)} for n in range(4))


def test_a_pruned_read_of_a_partitioned_catalog_table_reports_the_whole_table(attached: tuple[Any, Path]) -> None:
    spark, _ = attached
    spark.range(40).selectExpr("id", "CAST(id % 4 AS STRING) AS dt").write.partitionBy("dt").saveAsTable("snapshot_pruned")
    try:
        location = spark.sql("DESCRIBE TABLE EXTENDED snapshot_pruned").where("col_name = 'Location'").first()["data_type"]
        written = files.output_snapshot(spark.sparkContext._gateway, spark._jsc.hadoopConfiguration(), location, None)
        for query in ("SELECT * FROM snapshot_pruned", "SELECT * FROM snapshot_pruned WHERE dt = '1'"):
            read = _read_snapshot(spark, spark.sql(query))
            assert read is not None and written is not None and read.snapshot_id == written.snapshot_id, query
    finally:
        spark.sql("DROP TABLE IF EXISTS snapshot_pruned")
