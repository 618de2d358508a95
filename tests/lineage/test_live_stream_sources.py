"""A `rate` stream into a foreachBatch file sink, attached as users attach the emitter: the
streaming run names its source and its offsets per micro-batch, and each write inside
foreachBatch carries the source as input and column lineage back to it (through the LogicalRDD
Spark hands foreachBatch)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.spark import wait_for_listeners
from tests.support.spec import assert_valid_event

pytestmark = pytest.mark.spark

RATE = ["rate", "rate"]


@pytest.fixture()
def attached(spark: Any, tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    from emitter.listener import attach, close_session

    close_session(spark)
    log = tmp_path / "events.jsonl"
    assert attach(spark, {"transport": {"type": "file", "log_file_path": str(log), "append": True}}) is not None
    yield spark, log
    close_session(spark)


def _run_rate_into_foreach_batch(spark: Any, tmp_path: Path) -> tuple[Any, Path]:
    target = tmp_path / "doubled"
    query = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", "20")
        .load()
        .selectExpr("value * 2 AS doubled", "timestamp")
        .writeStream.foreachBatch(lambda batch, batch_id: batch.write.mode("append").parquet(str(target)))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="1 second")
        .start()
    )
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            if sum(1 for progress in query.recentProgress if progress["numInputRows"] > 0) >= 2:
                break
            time.sleep(0.5)
    finally:
        query.stop()
    return query, target


def test_rate_stream_into_foreach_batch_carries_inputs_offsets_and_column_lineage(
    attached: tuple[Any, Path], tmp_path: Path
) -> None:
    spark, log = attached

    query, target = _run_rate_into_foreach_batch(spark, tmp_path)

    wait_for_listeners(spark, 30_000)
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    for event in events:
        assert_valid_event(event)
    running = [e for e in events if e["run"]["runId"] == str(query.runId) and e["eventType"] == "RUNNING"]
    with_rows = [e for e in running if e["run"]["facets"]["microBatch"]["numInputRows"] > 0]
    assert len(with_rows) >= 2
    for event in with_rows:
        [source] = event["inputs"]
        assert [source["namespace"], source["name"]] == RATE
        snapshot = source["facets"]["snapshot"]
        assert snapshot["kind"] == "stream-offsets"
        assert snapshot["batchId"] == event["run"]["facets"]["microBatch"]["batchId"]
        assert snapshot["endOffset"] is not None
    assert len({e["inputs"][0]["facets"]["snapshot"]["endOffset"] for e in with_rows}) == len(with_rows)

    writes = [e for e in events if [o["name"] for o in e["outputs"]] == [str(target)] and e["eventType"] == "COMPLETE"]
    assert writes
    for write in writes:
        assert write["run"]["facets"]["parent"]["run"]["runId"] == str(query.runId)
        assert [[i["namespace"], i["name"]] for i in write["inputs"]] == [RATE]
        fields = write["outputs"][0]["facets"]["columnLineage"]["fields"]
        [doubled] = fields["doubled"]["inputFields"]
        assert [doubled["namespace"], doubled["name"], doubled["field"]] == [*RATE, "value"]
        assert doubled["transformations"][0]["subtype"] == "TRANSFORMATION"
        assert doubled["transformations"][0]["description"] == "(value * 2)"
        [timestamp] = fields["timestamp"]["inputFields"]
        assert [timestamp["field"], timestamp["transformations"][0]["subtype"]] == ["timestamp", "IDENTITY"]
