"""A streaming query is ONE OpenLineage run: START, RUNNING per micro-batch (microBatch run facet,
offsets of every source, the sink's committed snapshot), COMPLETE/FAIL; same column lineage as
batch, through withWatermark and a stream-static join; foreachBatch writes name their parent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.serde import Serde

from emitter.capture import SessionInfo
from emitter.listener import files, janino, streaming
from emitter.listener.batch import BatchListener
from emitter.listener.jvm import QueryListenerRegistration
from tests.emitter.test_pipeline import Stages
from tests.streaming.conftest import drain_listener_bus
from tests.support.spec import assert_valid_event

pytestmark = pytest.mark.spark

APP = "streaming-test"
NAMESPACE = "streaming-tests"
PRODUCER_PARENT = {"run": {"runId": "01890000-0000-7000-8000-000000000000"}}


def _write_json_lines(directory: Path, name: str, rows: list[dict[str, Any]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    staged = directory.parent / f".{name}.tmp"
    staged.write_text("".join(json.dumps(row) + "\n" for row in rows))
    staged.rename(directory / name)  # atomically visible to the file source


class _Collected(list):  # type: ignore[type-arg]
    """A transport client keeping every event as a dict."""

    def emit(self, event: Any) -> None:
        self.append(Serde.to_dict(event))


@pytest.fixture()
def pipeline(streaming_spark: Any) -> Stages:
    """The attachment's stages, building on the listener's thread."""
    session = SessionInfo(app_name=APP, app_id="local", spark_version=streaming_spark.version)
    return Stages(_Collected(), session, namespace=NAMESPACE)


@pytest.fixture()
def collected(streaming_spark: Any, pipeline: Stages) -> Any:
    """Our listener on the real session feeding a pipeline, its events collected as dicts."""
    listener = streaming.LineageStreamingListener(streaming_spark, pipeline.handle_stream)
    streaming_spark.streams.addListener(listener)
    yield pipeline.worker.client
    streaming_spark.streams.removeListener(listener)


def _stream_static_query(spark: Any, base: Path) -> tuple[Any, Path, Path, Path]:
    static = base / "customers"
    spark.createDataFrame([(1, "alice"), (2, "bob")], "k int, label string").write.parquet(str(static))
    source = base / "events"
    _write_json_lines(source, "part-0.json", [{"k": 1, "v": 10, "ts": "2024-05-01T00:00:00"}])
    _write_json_lines(source, "part-1.json", [{"k": 2, "v": 20, "ts": "2024-05-01T00:01:00"}])
    events = (
        spark.readStream.schema("k int, v int, ts timestamp")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .withWatermark("ts", "1 minute")
    )
    joined = events.join(spark.read.parquet(str(static)), "k").selectExpr("k", "v * 2 AS v2", "label", "ts")
    sink = base / "enriched"
    query = (
        joined.writeStream.format("parquet")
        .option("checkpointLocation", str(base / "checkpoint"))
        .trigger(availableNow=True)
        .start(str(sink))
    )
    query.awaitTermination()
    drain_listener_bus(spark)
    return query, source, static, sink


def _dataset(datasets: list[dict[str, Any]], path: Path) -> dict[str, Any]:
    matches = [d for d in datasets if d["namespace"] == "file" and d["name"] == str(path)]
    assert len(matches) == 1, f"{path} not among {[d['name'] for d in datasets]}"
    return matches[0]


def test_stream_static_join_is_one_run_with_a_running_event_per_micro_batch(
    streaming_spark: Any, collected: list[dict[str, Any]], tmp_path: Path
) -> None:
    query, source, static, sink = _stream_static_query(streaming_spark, tmp_path)

    run_events = [e for e in collected if e["run"]["runId"] == str(query.runId)]
    for event in run_events:
        assert_valid_event(event)
    types = [e["eventType"] for e in run_events]
    assert types == ["START", "RUNNING", "RUNNING", "COMPLETE"]
    job_names = {e["job"]["name"] for e in run_events}
    assert len(job_names) == 1 and next(iter(job_names)).startswith("streaming_test.streaming.")
    assert next(iter(job_names)).endswith("enriched")
    assert run_events[0]["job"]["facets"]["jobType"]["processingType"] == "STREAMING"

    running = run_events[1:3]
    batches = [e["run"]["facets"]["microBatch"] for e in running]
    assert [b["batchId"] for b in batches] == [0, 1]
    assert all(b["queryId"] == str(query.id) and b["runId"] == str(query.runId) for b in batches)
    assert [b["numInputRows"] for b in batches] == [1, 1]
    assert all(b["checkpointLocation"].endswith("checkpoint") and b["durationMs"] >= 0 for b in batches)

    source_snapshots = [_dataset(e["inputs"], source)["facets"]["snapshot"] for e in running]
    assert [s["kind"] for s in source_snapshots] == ["stream-offsets", "stream-offsets"]
    # Spark reports no start offset for the first batch; serialization drops the null
    assert [(s.get("startOffset"), s["endOffset"]) for s in source_snapshots] == [
        (None, {"logOffset": 0}),
        ({"logOffset": 0}, {"logOffset": 1}),
    ]
    static_snapshots = [_dataset(e["inputs"], static)["facets"]["snapshot"] for e in running]
    assert static_snapshots[0]["kind"] == "content"
    assert static_snapshots[0]["snapshotId"] == static_snapshots[1]["snapshotId"]

    sink_facets = [_dataset(e["outputs"], sink)["facets"] for e in running]
    sink_snapshots = [f["snapshot"] for f in sink_facets]
    assert [(s["kind"], s["batchId"]) for s in sink_snapshots] == [("content", 0), ("content", 1)]
    assert sink_snapshots[0]["snapshotId"] != sink_snapshots[1]["snapshotId"]
    assert all(f["version"]["datasetVersion"] == f["snapshot"]["snapshotId"] for f in sink_facets)
    # a batch reader of the sink sees exactly what the last micro-batch committed
    read_back = streaming_spark.read.parquet(str(sink))._jdf.queryExecution().optimizedPlan().collectLeaves().head()
    reader_snapshot = files.input_snapshot(streaming_spark.sparkContext._gateway, read_back.relation().location())
    assert reader_snapshot is not None and reader_snapshot.snapshot_id == sink_snapshots[1]["snapshotId"]


def test_streaming_column_lineage_reaches_the_static_side(
    streaming_spark: Any, collected: list[dict[str, Any]], tmp_path: Path
) -> None:
    query, source, static, sink = _stream_static_query(streaming_spark, tmp_path)

    start = next(e for e in collected if e["run"]["runId"] == str(query.runId) and e["eventType"] == "START")
    assert_valid_event(start)
    assert {(d["name"]) for d in start["inputs"]} == {str(source), str(static)}
    fields = _dataset(start["outputs"], sink)["facets"]["columnLineage"]["fields"]

    def inputs_of(column: str) -> set[tuple[str, str, str]]:
        return {(f["name"], f["field"], f["transformations"][0]["subtype"]) for f in fields[column]["inputFields"]}

    assert inputs_of("label") == {(str(static), "label", "IDENTITY")}
    assert inputs_of("v2") == {(str(source), "v", "TRANSFORMATION")}
    assert inputs_of("ts") == {(str(source), "ts", "IDENTITY")}
    assert (str(source), "k", "IDENTITY") in inputs_of("k")
    dataset_level = {(f["name"], f["field"]) for f in start["outputs"][0]["facets"]["columnLineage"].get("dataset", [])}
    assert {(str(source), "k"), (str(static), "k")} <= dataset_level


def test_failed_streaming_query_ends_its_run_with_fail(
    streaming_spark: Any, collected: list[dict[str, Any]], tmp_path: Path
) -> None:
    source = tmp_path / "numbers"
    _write_json_lines(source, "part-0.json", [{"n": 0}])

    def explode_on_batch(batch: Any, batch_id: int) -> None:
        raise RuntimeError("boom in micro-batch")

    stream = streaming_spark.readStream.schema("n int").json(str(source))
    query = (
        stream.writeStream.foreachBatch(explode_on_batch)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match="boom in micro-batch"):
        query.awaitTermination()
    drain_listener_bus(streaming_spark)

    run_events = [e for e in collected if e["run"]["runId"] == str(query.runId)]
    for event in run_events:
        assert_valid_event(event)
    assert [e["eventType"] for e in run_events][0] == "START"
    assert run_events[-1]["eventType"] == "FAIL"
    assert "boom in micro-batch" in run_events[-1]["run"]["facets"]["errorMessage"]["message"]


def test_foreach_batch_writes_name_the_streaming_run_as_parent(
    streaming_spark: Any, pipeline: Stages, collected: list[dict[str, Any]], tmp_path: Path
) -> None:
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = streaming_spark.sparkContext._gateway
    spark_context = streaming_spark.sparkContext._jsc.sc()
    tagger = janino.new_instance(gateway, "SparkLineageMicroBatchTags")
    spark_context.addSparkListener(tagger)
    ensure_callback_server_started(gateway)
    writes = BatchListener(gateway, pipeline.dedupe, pipeline, streaming_spark._jsc.hadoopConfiguration(), tagger)
    registration = QueryListenerRegistration(gateway, streaming_spark._jsparkSession.listenerManager(), writes)
    source = tmp_path / "orders"
    _write_json_lines(source, "part-0.json", [{"id": 1}])
    _write_json_lines(source, "part-1.json", [{"id": 2}])
    try:
        streaming_spark.range(1).write.parquet(str(tmp_path / "before"))  # not in any micro-batch

        def write_batch(batch: Any, batch_id: int) -> None:
            batch.write.mode("append").parquet(str(tmp_path / "by_session_of_batch"))
            streaming_spark.range(1).write.mode("append").parquet(str(tmp_path / "by_outer_session"))

        query = (
            streaming_spark.readStream.schema("id int")
            .option("maxFilesPerTrigger", 1)
            .json(str(source))
            .writeStream.foreachBatch(write_batch)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        drain_listener_bus(streaming_spark)
    finally:
        registration.unregister()
        spark_context.removeSparkListener(tagger)

    start = next(e for e in collected if e["run"]["runId"] == str(query.runId) and e["eventType"] == "START")

    def parents_of_writes_to(name: str) -> list[tuple[str, str]]:
        return [
            (e["run"]["facets"]["parent"]["run"]["runId"], e["run"]["facets"]["parent"]["job"]["name"])
            for e in collected
            if e["eventType"] == "COMPLETE" and [o["name"] for o in e["outputs"]] == [str(tmp_path / name)]
        ]

    assert parents_of_writes_to("before") == [(pipeline.app_run_id, pipeline.context.app_job[1])]
    streaming_run = (str(query.runId), start["job"]["name"])
    assert parents_of_writes_to("by_session_of_batch") == [streaming_run, streaming_run]
    assert parents_of_writes_to("by_outer_session") == [streaming_run, streaming_run]
    root = next(e for e in collected if e["eventType"] == "COMPLETE" and e["outputs"])["run"]["facets"]["parent"]["root"]
    assert root["run"]["runId"] == pipeline.app_run_id
