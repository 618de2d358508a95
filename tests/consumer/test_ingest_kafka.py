"""Kafka ingestion against a real broker (Apache Kafka, tests/support/kafka_server.py) into both databases."""

from __future__ import annotations

import json
import time
import uuid
from datetime import timedelta

import pytest
from kafka import KafkaProducer
from sqlalchemy import text

from consumer.ingest.kafka_io import DeadLetters, EventSource
from consumer.ingest.kafka_loop import OFFSET_HEADER, PARTITION_HEADER, REASON_HEADER, TOPIC_HEADER, Ingestor
from tests.consumer.helpers import DRAIN_LIMIT_SECONDS, dump, ingest_all
from tests.support.broker import read_topic, unique_topic
from tests.support.events import BASE_TIME, batch_write, run_event, table, with_column_lineage

pytestmark = pytest.mark.kafka


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for value in values:
        producer.send(topic, key=b"k", value=value)
    producer.flush()
    producer.close()


def _spark_events() -> list[dict]:
    orders = table("raw", "orders", ["id", "amount"], snapshot="orders-v1")
    enriched = with_column_lineage(
        table("mart", "enriched", ["order_id", "amount"], snapshot="enriched-v1"),
        {"order_id": [(orders, "id")], "amount": [(orders, "amount")]},
        indirect=[(orders, "id", "FILTER")],
    )
    stream_source = {"namespace": "kafka://127.0.0.1:9092", "name": "clicks"}
    sink = table("mart", "clicks", ["user"], snapshot="sink-3", kind="sink-batch", batch_id=3)
    stream_run = str(uuid.uuid4())
    micro_batch = {"batchId": 3, "queryId": str(uuid.uuid4()), "runId": stream_run, "numInputRows": 10}
    return batch_write("app.insert_into.enriched", [orders], enriched) + [
        run_event("START", "app.stream.clicks", [stream_source], [sink], run_id=stream_run, at=BASE_TIME, streaming=True),
        run_event(
            "RUNNING",
            "app.stream.clicks",
            [stream_source],
            [sink],
            run_id=stream_run,
            at=BASE_TIME + timedelta(seconds=30),
            streaming=True,
            micro_batch=micro_batch,
        ),
    ]


def _rows(store, query: str) -> list[tuple]:
    with store.engine.connect() as connection:
        return sorted((tuple(row) for row in connection.execute(text(query))), key=repr)


def test_events_from_the_topic_land_in_all_three_stores(store, kafka_bootstrap):
    topic = unique_topic("events", kafka_bootstrap)
    events = _spark_events()
    _produce(kafka_bootstrap, topic, [json.dumps(event).encode() for event in events])

    ingestor = ingest_all(store, kafka_bootstrap, topic, len(events))

    assert ingestor.stats.stored == len(events) and ingestor.stats.dead_lettered == 0
    assert _rows(store, 'SELECT job, "table" FROM sink_job_lineage') == [
        ("app.insert_into.enriched", "enriched"),
        ("app.stream.clicks", "clicks"),
    ]
    assert _rows(store, "SELECT count(*) FROM column_lineage") == [(3,)]
    assert _rows(store, 'SELECT job, barrier_id, "table", snapshot_id FROM sink_snapshot_lineage') == [
        ("app.insert_into.enriched", 1, "enriched", "enriched-v1"),
        ("app.stream.clicks", 3, "clicks", "sink-3"),
    ]


def test_poison_messages_go_to_the_dead_letter_topic_and_later_events_are_stored(store, kafka_bootstrap):
    topic = unique_topic("events", kafka_bootstrap)
    good_first, good_last = batch_write("app.insert_into.t", [table("raw", "a", ["x"])], table("mart", "t", ["x"]))
    invalid = {**good_first, "run": {"runId": "42"}}
    _produce(
        kafka_bootstrap,
        topic,
        [json.dumps(good_first).encode(), b"\x00not json", json.dumps(invalid).encode(), json.dumps(good_last).encode()],
    )

    ingestor = ingest_all(store, kafka_bootstrap, topic, 4)
    dead = read_topic(kafka_bootstrap, f"{topic}.dlq", expected=2)

    assert ingestor.stats.dead_lettered == 2 and ingestor.stats.stored == 2
    headers = [dict(record.headers) for record in dead]
    assert [h[OFFSET_HEADER] for h in headers] == [b"1", b"2"]
    assert all(h[TOPIC_HEADER] == topic.encode() and h[PARTITION_HEADER] == b"0" for h in headers)
    assert b"not JSON" in headers[0][REASON_HEADER] and b"run.runId" in headers[1][REASON_HEADER]
    assert dead[0].value == b"\x00not json"
    assert _rows(store, "SELECT state FROM runs") == [("COMPLETED",)]


def test_reading_the_topic_again_changes_nothing_and_offsets_are_committed(store, kafka_bootstrap):
    topic = unique_topic("events", kafka_bootstrap)
    events = _spark_events()
    _produce(kafka_bootstrap, topic, [json.dumps(event).encode() for event in events])
    group = f"g-{uuid.uuid4().hex[:8]}"

    ingest_all(store, kafka_bootstrap, topic, len(events), group=group)
    first = dump(store)
    replayed = ingest_all(store, kafka_bootstrap, topic, len(events))  # a new group re-reads everything
    _produce(kafka_bootstrap, topic, [json.dumps(events[0]).encode()])
    same_group = ingest_all(store, kafka_bootstrap, topic, 1, group=group)  # resumes after its commit

    assert replayed.stats.records == len(events) and replayed.stats.stored == 0
    assert dump(store) == first
    assert same_group.stats.records == 1 and same_group.stats.duplicates == 1


def test_two_instances_of_one_group_share_the_partitions(sqlite_store, kafka_bootstrap):
    topic = unique_topic("shared", kafka_bootstrap, partitions=2)
    events = [e for i in range(10) for e in batch_write(f"job{i}", [table("raw", "a", ["x"])], table("mart", f"t{i}", ["x"]))]
    group = f"g-{uuid.uuid4().hex[:8]}"
    members = [
        Ingestor(
            sqlite_store,
            EventSource(kafka_bootstrap, topic, group),
            DeadLetters(kafka_bootstrap, f"{topic}.dlq"),
            poll_timeout_ms=300,
        )
        for _ in range(2)
    ]
    deadline = time.monotonic() + DRAIN_LIMIT_SECONDS
    try:
        # Both members in the group first: a lone member joins at once and would take every partition.
        while not all(member.source.state().assigned for member in members):
            assert time.monotonic() < deadline, "the group never gave each member a partition"
            for member in members:
                member.run_once()
        assignments = [set(member.source.state().assigned) for member in members]
        producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
        for index, event in enumerate(events):
            producer.send(topic, partition=index % 2, value=json.dumps(event).encode())
        producer.flush()
        producer.close()
        while sum(m.stats.stored for m in members) < len(events) and time.monotonic() < deadline:
            for member in members:
                member.run_once()
    finally:
        for member in members:
            member.close()
            member.source.close()
            member.dead_letters.close()

    assert assignments[0].isdisjoint(assignments[1]) and assignments[0] | assignments[1] == {(topic, 0), (topic, 1)}
    assert sum(m.stats.stored for m in members) == len(events)
    assert [m.stats.records for m in members] == [len(events) // 2, len(events) // 2]  # each read its own partition


EMITTED_PIPELINE = """
import sys
from pyspark.sql import functions as F
base = sys.argv[1]
spark.createDataFrame([(1, "FR", 2.0), (2, "NO", 0.0), (3, "FR", 5.0)], "id long, country string, amount double") \\
    .write.mode("overwrite").parquet(f"{base}/src")
spark.read.parquet(f"{base}/src").where("amount > 0") \\
    .select("id", "country", (F.col("amount") * 100).alias("cents")).write.mode("overwrite").parquet(f"{base}/silver")
"""


@pytest.fixture(scope="module")
def emitted_to_kafka(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, int, str]:
    """A real PySpark script under `python -m emitter run`, publishing through our Kafka transport."""
    import subprocess
    import sys
    import textwrap

    from tests.support.spark import file_transport_env, script_prelude

    tmp = tmp_path_factory.mktemp("emitter-to-kafka")
    topic = unique_topic("emitted", kafka_bootstrap)
    script = tmp / "pipeline.py"
    script.write_text(script_prelude("kafka e2e", tmp / "warehouse") + textwrap.dedent(EMITTED_PIPELINE))
    env = {k: v for k, v in file_transport_env(tmp / "unused.jsonl").items() if not k.startswith("OPENLINEAGE__")}
    env.update(
        OPENLINEAGE__TRANSPORT__TYPE="kafka",
        OPENLINEAGE__TRANSPORT__TOPIC=topic,
        OPENLINEAGE__TRANSPORT__CONFIG__BOOTSTRAP_SERVERS=kafka_bootstrap,
        OPENLINEAGE__TRANSPORT__SPOOLDIR=str(tmp / "spool"),
    )
    result = subprocess.run(
        [sys.executable, "-m", "emitter", "run", str(script), str(tmp / "data")],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    published = len(read_topic(kafka_bootstrap, topic, expected=None, timeout_seconds=30))
    return topic, published, str(tmp / "data")


def test_real_emitter_events_from_kafka_land_in_all_three_stores(store, kafka_bootstrap, emitted_to_kafka):
    topic, published, data = emitted_to_kafka
    assert published >= 6  # app START/COMPLETE + START/COMPLETE of each of the two writes
    ingestor = ingest_all(store, kafka_bootstrap, topic, published)
    assert ingestor.stats.records == published and ingestor.stats.dead_lettered == 0
    src, silver = f"{data}/src", f"{data}/silver"

    table_lineage = _rows(store, "SELECT d.name, j.direction FROM job_io j JOIN datasets d ON d.id = j.dataset_id")
    assert (src, "input") in table_lineage and (silver, "output") in table_lineage and (src, "output") in table_lineage

    column_edges = _rows(
        store,
        """
        SELECT o.name, i.name, cl.transformation_type, cl.transformation_subtype, cl.transformation_description
        FROM column_lineage cl JOIN dataset_fields o ON o.id = cl.output_field_id
        JOIN dataset_fields i ON i.id = cl.input_field_id""",
    )
    assert ("cents", "amount", "DIRECT", "TRANSFORMATION", "(amount * 100.0)") in column_edges
    assert any(edge[:4] == ("id", "id", "DIRECT", "IDENTITY") for edge in column_edges)

    written = _rows(store, 'SELECT "table", snapshot_id FROM sink_snapshot_lineage')
    read = _rows(store, 'SELECT "table", snapshot_id FROM source_snapshot_lineage')
    src_written = [snapshot for table_name, snapshot in written if table_name == src]
    src_read = [snapshot for table_name, snapshot in read if table_name == src]
    assert src_written and src_read == src_written  # the job that read src consumed exactly what was written
    assert any(table_name == silver for table_name, _ in written)


def test_names_with_control_characters_are_dead_lettered_with_the_reason(store, kafka_bootstrap):
    topic = unique_topic("events", kafka_bootstrap)
    good_first, good_last = batch_write("app.insert_into.t", [table("raw", "a", ["x"])], table("mart", "t", ["x"]))
    forged_job = {**good_first, "job": {**good_first["job"], "name": "app\n2026-01-01 INFO forged log line"}}
    escape_in_dataset = {**good_last, "outputs": [{**good_last["outputs"][0], "name": "mart.t\x1b[2J"}]}
    _produce(kafka_bootstrap, topic, [json.dumps(event).encode() for event in (forged_job, escape_in_dataset, good_first)])

    ingestor = ingest_all(store, kafka_bootstrap, topic, 3)
    dead = read_topic(kafka_bootstrap, f"{topic}.dlq", expected=2)

    reasons = [dict(record.headers)[REASON_HEADER].decode() for record in dead]
    assert ingestor.stats.dead_lettered == 2 and ingestor.stats.stored == 1
    assert "job.name" in reasons[0] and "control character U+000A" in reasons[0]
    assert "outputs[0].name" in reasons[1] and "control character U+001B" in reasons[1]
    assert _rows(store, "SELECT name FROM jobs") == [("app.insert_into.t",)]
