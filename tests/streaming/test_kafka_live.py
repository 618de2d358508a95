"""Spark's real Kafka connector against the test broker, with the emitter attached: Structured
Streaming reading topics (`subscribe`, `assign`) into a Parquet file sink, a stream into a Kafka
sink, and a batch read of topics. Each case checks the datasets (`kafka://host:port` + topic, the
OpenLineage naming spec), the snapshots (each micro-batch's per-partition offset ranges of each
topic, equal to what Spark's progress and Kafka itself report; the Kafka sink's batch) and the
column lineage, against edges written by hand.

The connector's jars (the jar set `spark-sql-kafka-<major.minor>`, jars/pom.xml) must be on the
driver's classpath when its JVM starts: the session runs in a child process of its own, one per
module (`tests.support.lakehouse.ChildSession`). Jars Maven cannot fetch skip the tests, or fail
them under LINEAGE_REQUIRE_ALL=1.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.broker import unique_topic
from tests.support.consumer_api import api_after_ingesting
from tests.support.lakehouse import ChildSession, format_classpath, snapshot_fields, started
from tests.support.spec import assert_valid_event

pytestmark = pytest.mark.spark

KAFKA_SET_PREFIX = "spark-sql-kafka-"  # + Spark's major.minor: a jar set of jars/pom.xml
SCHEMA = "name STRING, amount INT"
STREAM_TIMEOUT_S = 120
Edge = tuple[str, str, str, str, str, str | None]  # namespace, name, field, type, subtype, description


def require_kafka_connector_classpath() -> str:
    return format_classpath(
        KAFKA_SET_PREFIX,
        lambda spark_minor, scala: f"Spark's Kafka connector (spark-sql-kafka-0-10_{scala}) has no set for Spark {spark_minor}",
        "Spark's Kafka connector jars are",
    )


@pytest.fixture(scope="module")
def kafka_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChildSession]:
    """A Spark session with Spark's Kafka connector and the emitter attached, in a child process."""
    work = tmp_path_factory.mktemp("spark-kafka")
    with started(ChildSession("kafka", require_kafka_connector_classpath(), {}, work)) as session:
        yield session


# --- run in the child (module-level: pickled by name) -------------------------------------------
def _progress(query: Any) -> list[dict[str, Any]]:
    """The query's progress reports as JSON (PySpark 3.5 gives dicts, 4.x progress objects)."""
    return [report if isinstance(report, dict) else json.loads(report.json) for report in query.recentProgress]


def _finished(query: Any) -> dict[str, Any]:
    query.awaitTermination(STREAM_TIMEOUT_S)
    if query.isActive:
        query.stop()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return {"runId": str(query.runId), "queryId": str(query.id), "progress": _progress(query)}


def _parsed(source: Any) -> Any:
    """The usual parsing: the key as a string, the JSON value into columns."""
    from pyspark.sql.functions import col, from_json

    return source.select(
        col("key").cast("string").alias("key"),
        from_json(col("value").cast("string"), SCHEMA).alias("v"),
        "topic",
        "partition",
        "offset",
    ).select("key", "v.name", "v.amount", "topic", "partition", "offset")


def _stream_into_parquet(spark: Any, bootstrap: str, option: str, value: str, work: str) -> dict[str, Any]:
    """`option` (`subscribe` or `assign`) = `value`, from the earliest offsets, at most 3 records
    a micro-batch, parsed into a Parquet file sink; its run id and progress reports."""
    source = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option(option, value)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "3")
        .load()
    )
    query = (
        _parsed(source)
        .writeStream.format("parquet")
        .option("path", f"{work}/out")
        .option("checkpointLocation", f"{work}/checkpoint")
        .trigger(availableNow=True)
        .start()
    )
    finished = _finished(query)
    finished["rows"] = spark.read.parquet(f"{work}/out").count()
    return finished


def _stream_into_kafka(spark: Any, bootstrap: str, source_topic: str, sink_topic: str, work: str) -> dict[str, Any]:
    source = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source_topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    query = (
        source.selectExpr("CAST(key AS STRING) AS key", "upper(CAST(value AS STRING)) AS value")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink_topic)
        .option("checkpointLocation", f"{work}/checkpoint")
        .trigger(availableNow=True)
        .start()
    )
    return _finished(query)


def _batch_into_parquet(spark: Any, bootstrap: str, topics: str, offsets: tuple[str, str], target: str) -> int:
    source = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topics)
        .option("startingOffsets", offsets[0])
        .option("endingOffsets", offsets[1])
        .load()
    )
    _parsed(source).write.parquet(target)
    return int(spark.read.parquet(target).count())


# --- the test side -------------------------------------------------------------------------------
def produce(bootstrap: str, topic: str, records: list[tuple[int, str, dict[str, Any]]]) -> None:
    """(partition, key, JSON value) records, in order."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for partition, key, value in records:
            producer.send(topic, key=key.encode(), value=json.dumps(value).encode(), partition=partition)
        producer.flush()
    finally:
        producer.close()


def end_offsets(bootstrap: str, topic: str) -> dict[str, int]:
    """What Kafka reports as each partition's end offset, partition → offset as Spark keys them."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        partitions = [TopicPartition(topic, partition) for partition in sorted(consumer.partitions_for_topic(topic) or ())]
        return {str(partition.partition): offset for partition, offset in consumer.end_offsets(partitions).items()}
    finally:
        consumer.close()


def records(count: int, partitions: int, prefix: str) -> list[tuple[int, str, dict[str, Any]]]:
    return [(i % partitions, f"{prefix}{i}", {"name": f"{prefix}-{i}", "amount": i}) for i in range(count)]


def run_events(session: ChildSession, run_id: str) -> list[dict[str, Any]]:
    events = session.events()
    for event in events:
        assert_valid_event(event)
    return [event for event in events if event["run"]["runId"] == run_id]


def edges(dataset: dict[str, Any]) -> dict[str, set[Edge]]:
    """The columnLineage facet's field-level edges, per output column."""
    fields = dataset["facets"]["columnLineage"]["fields"]
    return {
        column: {
            (edge["namespace"], edge["name"], edge["field"], t["type"], t["subtype"], t.get("description"))
            for edge in lineage["inputFields"]
            for t in edge["transformations"]
        }
        for column, lineage in fields.items()
    }


def parsed_edges(namespace: str, topics: list[str]) -> dict[str, set[Edge]]:
    """`_parsed`'s lineage from each topic, written by hand."""
    expected: dict[str, set[Edge]] = {}
    for topic in topics:
        for column, field, subtype, description in [
            ("key", "key", "TRANSFORMATION", "CAST(key AS STRING)"),
            ("name", "value", "TRANSFORMATION", "from_json(CAST(value AS STRING)).name"),
            ("amount", "value", "TRANSFORMATION", "from_json(CAST(value AS STRING)).amount"),
            ("topic", "topic", "IDENTITY", None),
            ("partition", "partition", "IDENTITY", None),
            ("offset", "offset", "IDENTITY", None),
        ]:
            expected.setdefault(column, set()).add((namespace, topic, field, "DIRECT", subtype, description))
    return expected


def topic_offsets(offsets: Any, topic: str) -> dict[str, Any] | None:
    """One topic's offsets out of a progress report's (PySpark 4's reports keep them as JSON text)."""
    if isinstance(offsets, str):
        offsets = json.loads(offsets)
    return {topic: offsets[topic]} if isinstance(offsets, dict) and topic in offsets else None


def assert_batches_read_the_topics(
    running: list[dict[str, Any]], progress: list[dict[str, Any]], namespace: str, topics: dict[str, dict[str, int]]
) -> None:
    """Each micro-batch's input per topic carries that topic's offset range as Spark's progress
    reports it; the ranges chain from batch to batch and end where Kafka says each partition ends."""
    by_batch = {report["batchId"]: report for report in progress if report["numInputRows"] > 0}
    assert len(by_batch) >= 2, "the stream should have read its topics in several micro-batches"
    read = {event["run"]["facets"]["microBatch"]["batchId"]: event for event in running}
    assert set(by_batch) <= set(read)
    last_end: dict[str, Any] = {}
    for batch_id in sorted(by_batch):
        [source] = by_batch[batch_id]["sources"]
        inputs = {(dataset["namespace"], dataset["name"]): dataset for dataset in read[batch_id]["inputs"]}
        assert set(inputs) == {(namespace, topic) for topic in topics}
        ids = set()
        for topic in topics:
            snapshot = snapshot_fields(inputs[(namespace, topic)])
            assert snapshot["kind"] == "stream-offsets"
            assert snapshot["batchId"] == batch_id
            assert snapshot["endOffset"] == topic_offsets(source["endOffset"], topic)
            if batch_id == min(by_batch):  # Spark's progress has none: the start the checkpoint kept, the earliest
                assert snapshot["startOffset"] == {topic: dict.fromkeys(topics[topic], 0)}
            else:
                assert snapshot["startOffset"] == topic_offsets(source["startOffset"], topic) == last_end[topic]
            last_end[topic] = snapshot["endOffset"]
            ids.add(snapshot["snapshotId"])
        assert len(ids) == len(topics)
    assert last_end == {topic: {topic: ends} for topic, ends in topics.items()}


def assert_the_store_answers_what_each_batch_read(
    sqlite_store: Any, events: list[dict[str, Any]], running: list[dict[str, Any]]
) -> None:
    """Through the consumer: each batch's sink snapshot derives from the offset ranges (snapshots)
    of the topics that batch read."""
    with api_after_ingesting(sqlite_store, events) as client:
        for event in running:
            [sink] = event["outputs"]
            answer = client.get(
                "/api/v1/lineage-store/snapshots",
                params={
                    "table": f"file:{sink['name']}",
                    "snapshot": snapshot_fields(sink)["snapshotId"],
                    "direction": "upstream",
                },
            )
            assert answer.status_code == 200, answer.text
            read = {
                (step["from"]["namespace"], step["from"]["name"], step["from"]["snapshot"]) for step in answer.json()["steps"]
            }
            assert read == {(d["namespace"], d["name"], snapshot_fields(d)["snapshotId"]) for d in event["inputs"]}


def test_subscribe_to_two_topics_into_a_parquet_sink(
    kafka_spark: ChildSession, kafka_bootstrap: str, tmp_path: Path, sqlite_store: Any
) -> None:
    orders = unique_topic("orders", kafka_bootstrap, partitions=2)
    payments = unique_topic("payments", kafka_bootstrap)
    produce(kafka_bootstrap, orders, records(6, 2, "o"))
    produce(kafka_bootstrap, payments, records(3, 1, "p"))
    namespace = f"kafka://{kafka_bootstrap}"

    result = kafka_spark.call(_stream_into_parquet, kafka_bootstrap, "subscribe", f"{orders},{payments}", str(tmp_path))

    assert result["rows"] == 9
    events = run_events(kafka_spark, result["runId"])
    assert [event["eventType"] for event in events][0] == "START"
    assert events[-1]["eventType"] == "COMPLETE"
    running = [event for event in events if event["eventType"] == "RUNNING"]
    kafka_ends = {orders: end_offsets(kafka_bootstrap, orders), payments: end_offsets(kafka_bootstrap, payments)}
    assert kafka_ends == {orders: {"0": 3, "1": 3}, payments: {"0": 3}}
    assert_batches_read_the_topics(running, result["progress"], namespace, kafka_ends)
    for event in running:
        [sink] = event["outputs"]
        assert [sink["namespace"], sink["name"]] == ["file", str(tmp_path / "out")]
        snapshot = snapshot_fields(sink)
        assert snapshot["kind"] == "content"
        assert snapshot["batchId"] == event["run"]["facets"]["microBatch"]["batchId"]
        assert edges(sink) == parsed_edges(namespace, [orders, payments])
    assert_the_store_answers_what_each_batch_read(sqlite_store, events, running)


def test_assign_reads_only_the_assigned_partitions(kafka_spark: ChildSession, kafka_bootstrap: str, tmp_path: Path) -> None:
    orders = unique_topic("orders", kafka_bootstrap, partitions=2)
    produce(kafka_bootstrap, orders, records(8, 2, "o"))  # 4 records in each partition
    namespace = f"kafka://{kafka_bootstrap}"

    result = kafka_spark.call(_stream_into_parquet, kafka_bootstrap, "assign", json.dumps({orders: [1]}), str(tmp_path))

    assert result["rows"] == 4
    running = [event for event in run_events(kafka_spark, result["runId"]) if event["eventType"] == "RUNNING"]
    assert end_offsets(kafka_bootstrap, orders) == {"0": 4, "1": 4}
    assert_batches_read_the_topics(running, result["progress"], namespace, {orders: {"1": 4}})
    assert edges(running[-1]["outputs"][0]) == parsed_edges(namespace, [orders])


def test_stream_into_a_kafka_sink(kafka_spark: ChildSession, kafka_bootstrap: str, tmp_path: Path) -> None:
    from tests.support.broker import read_topic

    source, sink_topic = unique_topic("raw", kafka_bootstrap), unique_topic("upper", kafka_bootstrap)
    produce(kafka_bootstrap, source, records(3, 1, "r"))
    namespace = f"kafka://{kafka_bootstrap}"

    result = kafka_spark.call(_stream_into_kafka, kafka_bootstrap, source, sink_topic, str(tmp_path))

    written = read_topic(kafka_bootstrap, sink_topic, expected=3)
    assert sorted(record.key for record in written) == [b"r0", b"r1", b"r2"]
    events = run_events(kafka_spark, result["runId"])
    running = [event for event in events if event["eventType"] == "RUNNING"]
    batches = [report["batchId"] for report in result["progress"] if report["numInputRows"] > 0]
    assert [event["run"]["facets"]["microBatch"]["batchId"] for event in running] == batches == [0]
    [event] = running
    [source_dataset] = event["inputs"]
    assert [source_dataset["namespace"], source_dataset["name"]] == [namespace, source]
    assert snapshot_fields(source_dataset)["endOffset"] == {source: end_offsets(kafka_bootstrap, source)} == {source: {"0": 3}}
    [sink] = event["outputs"]
    assert [sink["namespace"], sink["name"]] == [namespace, sink_topic]
    assert snapshot_fields(sink) == {"snapshotId": f"{result['queryId']}:0", "kind": "sink-batch", "batchId": 0}
    assert edges(sink) == {
        "key": {(namespace, source, "key", "DIRECT", "TRANSFORMATION", "CAST(key AS STRING)")},
        "value": {(namespace, source, "value", "DIRECT", "TRANSFORMATION", "upper(CAST(value AS STRING))")},
    }
    assert {(dataset["namespace"], dataset["name"]) for e in events for dataset in e["outputs"]} == {(namespace, sink_topic)}


@pytest.mark.parametrize("explicit", [True, False], ids=["explicit-offsets", "earliest-to-latest"])
def test_batch_read_of_topics_into_parquet(
    kafka_spark: ChildSession, kafka_bootstrap: str, tmp_path: Path, explicit: bool
) -> None:
    orders = unique_topic("orders", kafka_bootstrap, partitions=2)
    payments = unique_topic("payments", kafka_bootstrap)
    produce(kafka_bootstrap, orders, records(4, 2, "o"))
    produce(kafka_bootstrap, payments, records(2, 1, "p"))
    namespace, target = f"kafka://{kafka_bootstrap}", tmp_path / "batch"
    start = {orders: {"0": 1, "1": 0}, payments: {"0": 0}}
    end = {orders: end_offsets(kafka_bootstrap, orders), payments: end_offsets(kafka_bootstrap, payments)}
    assert end == {orders: {"0": 2, "1": 2}, payments: {"0": 2}}
    offsets = (json.dumps(start), json.dumps(end)) if explicit else ("earliest", "latest")

    rows = kafka_spark.call(_batch_into_parquet, kafka_bootstrap, f"{orders},{payments}", offsets, str(target))

    assert rows == (5 if explicit else 6)
    writes = [
        event
        for event in kafka_spark.events()
        if event["eventType"] == "COMPLETE" and [output["name"] for output in event["outputs"]] == [str(target)]
    ]
    [write] = writes
    assert_valid_event(write)
    assert {(dataset["namespace"], dataset["name"]) for dataset in write["inputs"]} == {
        (namespace, orders),
        (namespace, payments),
    }
    assert edges(write["outputs"][0]) == parsed_edges(namespace, [orders, payments])
    if not explicit:  # Spark's driver leaves earliest / latest open: each task resolves its own
        assert all("snapshot" not in dataset["facets"] for dataset in write["inputs"])
        return
    read = {dataset["name"]: snapshot_fields(dataset) for dataset in write["inputs"]}
    assert {topic: (fields["kind"], fields["startOffset"], fields["endOffset"]) for topic, fields in read.items()} == {
        topic: ("stream-offsets", {topic: start[topic]}, {topic: end[topic]}) for topic in (orders, payments)
    }
    assert "batchId" not in read[orders] and read[orders]["snapshotId"] != read[payments]["snapshotId"]


def test_connector_jars_maven_cannot_fetch_skip_or_fail_when_everything_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    import jars
    from tests.support.require import REQUIRE_ALL_ENV

    def unresolvable(jar_set: str) -> str:
        raise jars.JarsUnavailable(f"Maven could not resolve the {jar_set!r} jars")

    monkeypatch.setattr(jars, "classpath", unresolvable)
    monkeypatch.setenv(REQUIRE_ALL_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=f"Spark's Kafka connector jars are unavailable: .*{REQUIRE_ALL_ENV}=1"):
        require_kafka_connector_classpath()
    monkeypatch.delenv(REQUIRE_ALL_ENV)
    with pytest.raises(pytest.skip.Exception, match="Spark's Kafka connector jars are unavailable"):
        require_kafka_connector_classpath()
