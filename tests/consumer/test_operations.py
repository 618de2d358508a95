"""Health, readiness, metrics and the HTTP body limit, through the real app on both databases."""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable

import attrs
from fastapi.testclient import TestClient
from sqlalchemy import create_engine

from consumer.api import create_app
from consumer.ingest.kafka_io import DeadLetters, EventSource
from consumer.ingest.kafka_loop import Ingestor, SourceState, StoredBatch
from consumer.observability import JsonLogFormatter, Observability
from consumer.store import Store
from tests.consumer.helpers import metric_value
from tests.support.broker import free_port, unique_topic
from tests.support.events import batch_write, table

LIMIT = 10_000


@attrs.frozen
class Limits:
    max_event_bytes: int = LIMIT


def _metric(text: str, name: str, **labels: str) -> float:
    return metric_value(text, name, **labels) or 0.0


def test_health_ready_and_request_metrics_by_route_template(store):
    event = batch_write("j", [table("raw", "a", ["x"])], table("mart", "b", ["x"]))[0]
    with TestClient(create_app(store)) as client:
        health = client.get("/healthz")
        ready = client.get("/readyz")
        client.post("/api/v1/lineage", json=event)
        client.get("/api/v1/namespaces/spark/jobs/j")
        client.get("/api/v1/namespaces/spark/jobs/nothing-here")
        metrics = client.get("/metrics")

    assert health.status_code == 200 and health.json() == {"status": "up"}
    assert ready.status_code == 200 and ready.json() == {"ready": True, "role": "http", "store": "reachable"}
    route = "/api/v1/namespaces/{namespace}/jobs/{job}"
    assert _metric(metrics.text, "lineage_http_requests_total", method="GET", route=route, status="200") == 1
    assert _metric(metrics.text, "lineage_http_requests_total", method="GET", route=route, status="404") == 1
    assert _metric(metrics.text, "lineage_http_requests_total", method="POST", route="/api/v1/lineage", status="201") == 1
    assert "text/plain" in metrics.headers["content-type"]


def test_readiness_says_not_ready_when_the_store_does_not_answer():
    unreachable = Store(create_engine(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/nothing"))
    with TestClient(create_app(unreachable)) as client:
        ready = client.get("/readyz")
        health = client.get("/healthz")
    assert ready.status_code == 503 and ready.json()["ready"] is False
    assert ready.json()["store"] == "unreachable: see the server log"
    assert health.status_code == 200


def test_readiness_reports_the_ingestion_loop_and_keeps_serving(sqlite_store):
    observability = Observability(ingesting=True)
    with TestClient(create_app(sqlite_store, observability=observability)) as client:
        before_start = client.get("/readyz")
        observability.ingestion_started()
        observability.source_state(SourceState(assigned=(("events", 0),), lag={("events", 0): 7}, broker_reachable=True))
        running = client.get("/readyz")
        observability.source_state(SourceState(assigned=(("events", 0),), broker_reachable=False))
        broker_gone = client.get("/readyz")
        observability.ingestion_stopped("BrokerUnavailable: gone")
        stopped = client.get("/readyz")
        metrics = client.get("/metrics").text
        # The loop stops on another failure while the broker answered: the broker stays reachable;
        # a restart that finds no broker reports it unreachable although the loop last saw it.
        observability.ingestion_started()
        observability.source_state(SourceState(assigned=(("events", 0),), broker_reachable=True))
        observability.ingestion_stopped("OperationalError")
        store_failed = client.get("/readyz")
        observability.ingestion_stopped("BrokerUnavailable", broker_unreachable=True)
        restart_failed = client.get("/readyz")
        restart_metrics = client.get("/metrics").text

    answers = (before_start, running, broker_gone, stopped)
    assert [answer.status_code for answer in answers] == [200] * 4, "the store answers: the API stays in service"
    assert [answer.json()["consuming"] for answer in answers] == [False, True, False, False]
    assert store_failed.json()["broker"] == "reachable" and not store_failed.json()["consuming"]
    assert restart_failed.json()["broker"] == "unreachable"
    assert _metric(restart_metrics, "lineage_broker_reachable") == 0
    assert before_start.json()["ingestion"] == "down"
    assert running.json()["partitions"] == ["events[0]"]
    assert broker_gone.json()["broker"] == "unreachable"
    assert stopped.json()["ingestion"] == "down: BrokerUnavailable: gone"
    assert _metric(metrics, "lineage_ingestion_running") == 0 and _metric(metrics, "lineage_ingestion_restarts_total") == 1
    assert _metric(metrics, "lineage_broker_reachable") == 0


def test_readiness_reports_the_lag_and_why_the_broker_refuses(sqlite_store):
    observability = Observability(ingesting=True)
    with TestClient(create_app(sqlite_store, observability=observability)) as client:
        observability.ingestion_started()
        observability.source_state(SourceState(assigned=(("events", 0), ("events", 1)), lag={("events", 0): 7, ("events", 1): 2}))
        behind = client.get("/readyz").json()
        behind_metrics = client.get("/metrics").text
        observability.source_state(SourceState(refused="not authorized to read topic events"))
        no_acl = client.get("/readyz")
        observability.ingestion_stopped("KafkaRefused", refused="SASL authentication failed for user lineage (SCRAM-SHA-512)")
        bad_password = client.get("/readyz")

    assert behind["lag"] == 9 and behind["consuming"] is True
    assert _metric(behind_metrics, "lineage_consumer_lag", topic="events", partition="0") == 7
    assert _metric(behind_metrics, "lineage_consumer_lag", topic="events", partition="1") == 2
    assert no_acl.status_code == 200 and no_acl.json()["ingestion"] == "refused: not authorized to read topic events"
    assert no_acl.json()["consuming"] is False and no_acl.json()["lag"] is None
    assert bad_password.status_code == 200, "a refusal is reported, never a reason to be unready"
    assert bad_password.json()["ingestion"] == "refused: SASL authentication failed for user lineage (SCRAM-SHA-512)"
    assert bad_password.json()["broker"] == "reachable", "the broker answered: it refused"
    assert bad_password.json()["consuming"] is False


def test_the_lag_counts_what_waits_on_every_assigned_partition_and_falls_to_zero(sqlite_store, kafka_bootstrap):
    """The lag from the partitions' end offsets, through the real loop, app and broker: a partition
    nothing was read from yet has its lag too (0 when empty); records that arrive while the
    consumer is paused show in `lineage_consumer_lag` and /readyz before they are read; 0 once read."""
    from kafka import KafkaProducer, TopicPartition

    topic = unique_topic("lag", bootstrap=kafka_bootstrap, partitions=2)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)

    def produce(partition: int, count: int) -> None:
        for event in (
            batch_write(f"app.lag.{partition}.{n}", [table("raw", "a", ["x"])], table("mart", "b", ["x"]))[0]
            for n in range(count)
        ):
            producer.send(topic, value=json.dumps(event).encode(), partition=partition)
        producer.flush()

    produce(1, 3)
    source = EventSource(kafka_bootstrap, topic, f"g-{uuid.uuid4().hex[:8]}", end_offsets_every_seconds=0.2)
    dead_letters = DeadLetters(kafka_bootstrap, f"{topic}.dlq")
    observability = Observability(ingesting=True)
    ingestor = Ingestor(sqlite_store, source, dead_letters, poll_timeout_ms=200, metrics=observability)
    observability.ingestion_started()

    def run_until(done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + 60
        while not done():
            assert time.monotonic() < deadline, f"waited for {what}"
            ingestor.run_once()
            time.sleep(0.05)

    def lag(text: str, partition: int) -> float | None:
        return metric_value(text, "lineage_consumer_lag", topic=topic, partition=str(partition))

    try:
        with TestClient(create_app(sqlite_store, observability=observability)) as client:
            run_until(lambda: ingestor.stats.stored == 3, "the first events stored")
            run_until(lambda: lag(client.get("/metrics").text, 1) == 0, "caught up")
            caught_up, caught_up_ready = client.get("/metrics").text, client.get("/readyz").json()
            source._consumer.pause(TopicPartition(topic, 0))  # the consumer fetches nothing from partition 0
            produce(0, 4)
            run_until(lambda: lag(client.get("/metrics").text, 0) == 4, "the waiting records counted")
            paused, paused_ready, stored_while_paused = (
                client.get("/metrics").text,
                client.get("/readyz").json(),
                ingestor.stats.stored,
            )
            source._consumer.resume(TopicPartition(topic, 0))
            run_until(lambda: ingestor.stats.stored == 7 and lag(client.get("/metrics").text, 0) == 0, "the rest read")
            done, done_ready = client.get("/metrics").text, client.get("/readyz").json()
    finally:
        ingestor.close()
        source.close()
        dead_letters.close()
        producer.close()

    assert (lag(caught_up, 0), lag(caught_up, 1)) == (0, 0), "partition 0: assigned, nothing read, nothing waiting"
    assert caught_up_ready["lag"] == 0 and caught_up_ready["consuming"] is True
    assert stored_while_paused == 3
    assert (lag(paused, 0), lag(paused, 1)) == (4, 0) and paused_ready["lag"] == 4
    assert (lag(done, 0), lag(done, 1)) == (0, 0) and done_ready["lag"] == 0


def test_store_metrics_count_events_batches_and_dead_letters():
    observability = Observability()
    observability.batch_stored(StoredBatch(events=3, new_events=2, seconds=0.02))
    observability.dead_lettered("too_large")
    text = observability.render()[0].decode()
    assert _metric(text, "lineage_events_stored_total") == 2
    assert _metric(text, "lineage_store_batch_size_count") == 1 and _metric(text, "lineage_store_batch_size_sum") == 3
    assert _metric(text, "lineage_store_transaction_seconds_bucket", le="0.025") == 1
    assert _metric(text, "lineage_events_dead_lettered_total", reason="too_large") == 1


def test_a_body_above_the_limit_is_413_and_nothing_stored(sqlite_store):
    event = batch_write("j", [table("raw", "a", ["x"])], table("mart", "b", ["x"]))[0]
    padded = {**event, "run": {**event["run"], "facets": {"pad": {"_producer": "p", "_schemaURL": "s", "x": "y" * LIMIT}}}}
    with TestClient(create_app(sqlite_store, Limits())) as client:
        too_large = client.post("/api/v1/lineage", json=padded)
        fits = client.post("/api/v1/lineage", json=event)
    assert too_large.status_code == 413 and str(LIMIT) in too_large.json()["message"]
    assert fits.status_code == 201


def test_a_streamed_body_is_not_read_past_the_limit(sqlite_store):
    """A chunked body without Content-Length: the app stops pulling chunks once past the limit."""
    app = create_app(sqlite_store, Limits())
    chunk = b" " * 1024
    pulled = 0
    sent: list[dict] = []

    async def receive() -> dict:
        nonlocal pulled
        pulled += 1
        return {"type": "http.request", "body": chunk, "more_body": pulled < 30 * 1024}  # 30 MiB offered

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/v1/lineage",
        "raw_path": b"/api/v1/lineage",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"transfer-encoding", b"chunked")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "app": app,
    }
    asyncio.run(app(scope, receive, send))

    assert sent[0]["status"] == 413
    assert pulled <= LIMIT // len(chunk) + 2


def test_json_log_lines_are_one_object_each():
    record = logging.LogRecord("consumer.ingest.kafka_loop", logging.WARNING, __file__, 1, "dead-lettering %s", ("t[0]@3",), None)
    line = JsonLogFormatter().format(record)
    assert "\n" not in line
    assert json.loads(line) | {"time": "-"} == {
        "time": "-",
        "level": "WARNING",
        "logger": "consumer.ingest.kafka_loop",
        "message": "dead-lettering t[0]@3",
        "thread": record.threadName,
    }
