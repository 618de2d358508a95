"""`python -m consumer ingest|serve` as operators run them, against a real broker (Apache Kafka) and
real databases: killed with SIGKILL mid-batch, its broker stopped and restarted under load, fed
records too large or invalid, run as two members of one group, watched through /readyz and /metrics
(also while the broker is down)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from kafka import KafkaProducer
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from consumer.ingest.kafka_io import DEAD_LETTER_VALUE_BYTES
from consumer.ingest.kafka_loop import ORIGINAL_SIZE_HEADER, REASON_CLASS_HEADER, REASON_HEADER, TRUNCATED_HEADER
from consumer.store import open_store
from tests.consumer.helpers import dump, metric_value, stop_process, write_events
from tests.support.broker import free_port, read_topic, unique_topic
from tests.support.events import batch_write, table
from tests.support.paths import PROJECT_ROOT

pytestmark = pytest.mark.kafka

WAIT_LIMIT_SECONDS = 120.0


def _events(jobs: int, shared_inputs: int = 5) -> list[dict[str, Any]]:
    """START + COMPLETE of `jobs` jobs; the inputs are shared between jobs (hub tables)."""
    return [
        event
        for index in range(jobs)
        for event in batch_write(
            f"app.job{index}", [table("raw", f"shared{index % shared_inputs}", ["x"])], table("mart", f"t{index}", ["x"])
        )
    ]


def _produce(bootstrap: str, topic: str, values: list[tuple[bytes, bytes]]) -> None:
    """(key, value) pairs; large values allowed."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, max_request_size=40 * 1024 * 1024, linger_ms=20)
    for key, value in values:
        producer.send(topic, key=key, value=value)
    producer.flush()
    producer.close()


def _keyed(events: list[dict[str, Any]]) -> list[tuple[bytes, bytes]]:
    return [(event["job"]["name"].encode(), json.dumps(event).encode()) for event in events]


def _consumer(command: str, store_url: str, bootstrap: str, topic: str, group: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "consumer",
            command,
            "--store",
            store_url,
            "--bootstrap-servers",
            bootstrap,
            "--topic",
            topic,
            "--group",
            group,
            "--dead-letter-topic",
            f"{topic}.dlq",
            *extra,
        ],
        cwd=PROJECT_ROOT,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stored(store: Any) -> int:
    with store.engine.connect() as connection:
        return int(connection.execute(text("SELECT count(*) FROM lineage_events")).scalar_one())


def _wait_for(probe: Callable[[], Any], what: str, limit: float = WAIT_LIMIT_SECONDS) -> Any:
    deadline = time.monotonic() + limit
    while True:
        try:
            found = probe()
            if found:
                return found
        except (httpx.HTTPError, ValueError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _reference(store_url_of_fresh: str, events: list[dict[str, Any]]) -> dict[str, list[tuple[Any, ...]]]:
    reference = open_store(store_url_of_fresh)
    try:
        for start in range(0, len(events), 500):
            write_events(reference, events[start : start + 500])
        return dump(reference)
    finally:
        reference.dispose()


@contextmanager
def _serving(
    store_url: str, bootstrap: str, topic: str, *extra: str, group: str | None = None
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = free_port()
    group = group or f"g-{uuid.uuid4().hex[:6]}"
    process = _consumer("serve", store_url, bootstrap, topic, group, "--host", "127.0.0.1", "--port", str(port), *extra)
    try:
        yield f"http://127.0.0.1:{port}", process
    finally:
        stop_process(process)


def _metric(base: str, name: str, **labels: str) -> float | None:
    return metric_value(httpx.get(f"{base}/metrics").text, name, **labels)


# A killed member's partitions go to the next one when its session times out: a short session
# (the shared test broker allows it) keeps the wait short.
KILLED_MEMBER_OPTIONS = ("--batch-size", "100", "--session-timeout-ms", "4000")


def test_sigkill_mid_batch_loses_nothing_and_stores_nothing_twice(postgres_url, postgres_database_url, kafka_bootstrap):
    events = _events(1500)
    topic = unique_topic("killed", kafka_bootstrap)
    _produce(kafka_bootstrap, topic, _keyed(events))
    store = open_store(postgres_url)
    group = f"g-{uuid.uuid4().hex[:6]}"
    chooser = random.Random(9)
    kills = 0
    try:
        for threshold in (300, 900, 1500, 2100):
            process = _consumer("ingest", postgres_url, kafka_bootstrap, topic, group, *KILLED_MEMBER_OPTIONS)
            _wait_for(lambda t=threshold: _stored(store) >= t, f"{threshold} events stored")
            time.sleep(chooser.uniform(0.0, 0.3))  # somewhere inside the next batch
            process.send_signal(signal.SIGKILL)
            process.wait()
            kills += 1
        process = _consumer("ingest", postgres_url, kafka_bootstrap, topic, group, *KILLED_MEMBER_OPTIONS)
        try:
            _wait_for(lambda: _stored(store) >= len(events), "every event stored")
        finally:
            log = stop_process(process)
        stored = dump(store)
        count = _stored(store)
    finally:
        store.dispose()

    assert kills == 4 and count == len(events), log[-2000:]
    assert stored == _reference(_fresh_schema_url(postgres_database_url), events)


def test_a_broker_stopped_and_restarted_under_load_loses_nothing_and_stores_nothing_twice(sqlite_url, start_broker, tmp_path):
    """`ingest` while its broker is stopped mid-stream and started again (its data kept): the process
    rides the outage out, reads on from its committed offsets (what it could not commit meanwhile
    again), takes what is sent after the restart, and the store ends as one uninterrupted run builds it."""
    broker = start_broker()
    before, after = _events(600)[:1200], _events(700)[1200:]
    topic = unique_topic("restarted", broker.bootstrap, partitions=2)
    _produce(broker.bootstrap, topic, _keyed(before))
    store = open_store(sqlite_url)
    process = _consumer("ingest", sqlite_url, broker.bootstrap, topic, f"g-{uuid.uuid4().hex[:6]}", "--batch-size", "20")
    try:
        _wait_for(lambda: _stored(store) >= 100, "the first events stored")
        stored_at_stop = _stored(store)
        broker.stop()
        alive_while_down = process.poll() is None
        broker.start()
        _produce(broker.bootstrap, topic, _keyed(after))
        _wait_for(lambda: _stored(store) >= len(before) + len(after), "every event stored", limit=300)
        stored = dump(store)
        count = _stored(store)
    finally:
        log = stop_process(process)
        store.dispose()

    assert stored_at_stop < len(before) and alive_while_down, log[-2000:]
    assert process.returncode == 0 and count == len(before) + len(after), log[-2000:]
    assert stored == _reference(f"sqlite:///{tmp_path / 'reference.db'}", before + after)


def _fresh_schema_url(database_url: str) -> str:
    from sqlalchemy import create_engine

    schema = f"ref_{uuid.uuid4().hex[:10]}"
    engine = create_engine(database_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    engine.dispose()
    return f"{database_url}?options=-csearch_path%3D{schema}"


def test_two_ingest_processes_in_one_group_build_the_one_process_store(postgres_url, postgres_database_url, kafka_bootstrap):
    events = _events(400)
    topic = unique_topic("pair", kafka_bootstrap, partitions=4)
    store = open_store(postgres_url)
    group = f"g-{uuid.uuid4().hex[:6]}"
    members = [_consumer("ingest", postgres_url, kafka_bootstrap, topic, group, "--batch-size", "50") for _ in range(2)]
    try:
        # both in the group before the events come: the first to join would take every partition
        _wait_for(lambda: _members_with_partitions(kafka_bootstrap, group) == 2, "both members assigned partitions")
        _produce(kafka_bootstrap, topic, _keyed(events))
        _wait_for(lambda: _stored(store) >= len(events), "every event stored")
        stored = dump(store)
    finally:
        logs = [stop_process(member) for member in members]
        store.dispose()

    handled = [int(log.rsplit("records=", 1)[1].split(",")[0]) for log in logs]
    assert all(count > 0 for count in handled), logs  # both members took partitions
    assert stored == _reference(_fresh_schema_url(postgres_database_url), events)


def _members_with_partitions(bootstrap: str, group: str) -> int:
    """How many members of `group` hold partitions, once the group is stable (0 before)."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        described = admin.describe_groups([group])[group]
    finally:
        admin.close()
    if described["group_state"] != "Stable":
        return 0
    return sum(1 for member in described["members"] if member["member_assignment"]["assigned_partitions"])


def _large_records() -> tuple[list[tuple[bytes, bytes]], list[dict[str, Any]]]:
    """A 2 MB invalid event and a 30 MB valid-looking one, each followed by a good event."""
    good = batch_write("app.insert_into.t", [table("raw", "a", ["x"])], table("mart", "t", ["x"]))
    padding = {"_producer": "p", "_schemaURL": "https://example.com/Pad.json"}
    invalid = {**good[0], "run": {"runId": "42", "facets": {"pad": {**padding, "text": "x" * (2 * 1024 * 1024)}}}}
    huge = {**good[0], "run": {**good[0]["run"], "facets": {"pad": {**padding, "text": "y" * (30 * 1024 * 1024)}}}}
    values = [json.dumps(invalid).encode(), json.dumps(good[0]).encode(), json.dumps(huge).encode(), json.dumps(good[1]).encode()]
    return [(b"k", value) for value in values], good


def _large_records_topic(bootstrap: str, prefix: str) -> str:
    """A topic that takes records of up to 40 MB (the broker's default limit is 1 MB)."""
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = unique_topic(prefix)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"max.message.bytes": str(40 * 1024 * 1024)})])
    finally:
        admin.close()
    return topic


def _assert_dead_lettered(bootstrap: str, topic: str, values: list[tuple[bytes, bytes]]) -> None:
    dead = read_topic(bootstrap, f"{topic}.dlq", expected=2, timeout_seconds=60)
    assert len(dead) == 2
    headers = [dict(record.headers) for record in dead]
    assert [h[REASON_CLASS_HEADER] for h in headers] == [b"invalid", b"too_large"]
    assert b"run.runId" in headers[0][REASON_HEADER] and b"too large" in headers[1][REASON_HEADER]
    for record, header, (_, original) in zip(dead, headers, (values[0], values[2]), strict=True):
        assert header[TRUNCATED_HEADER] == b"true" and header[ORIGINAL_SIZE_HEADER] == str(len(original)).encode()
        assert len(record.value) == DEAD_LETTER_VALUE_BYTES and original.startswith(record.value)


def test_large_and_invalid_records_are_dead_lettered_under_ingest(sqlite_url, kafka_bootstrap):
    values, good = _large_records()
    topic = _large_records_topic(kafka_bootstrap, "large")
    _produce(kafka_bootstrap, topic, values)
    store = open_store(sqlite_url)
    process = _consumer("ingest", sqlite_url, kafka_bootstrap, topic, f"g-{uuid.uuid4().hex[:6]}", "--log-format", "json")
    try:
        _wait_for(lambda: _stored(store) >= len(good), "the good events stored")
        _assert_dead_lettered(kafka_bootstrap, topic, values)
    finally:
        log = stop_process(process)
        store.dispose()
    assert process.returncode == 0, log[-3000:]
    lines = [json.loads(line) for line in log.splitlines()]  # one JSON object per line
    warnings = [
        line["message"] for line in lines if line["level"] == "WARNING" and line["logger"] == "consumer.ingest.kafka_loop"
    ]
    assert len(warnings) == 2 and "run.runId" in warnings[0] and "too large: 314" in warnings[1]


def test_large_and_invalid_records_are_dead_lettered_under_serve_whose_readiness_tells_the_truth(sqlite_url, kafka_bootstrap):
    values, good = _large_records()
    topic = _large_records_topic(kafka_bootstrap, "large-serve")
    store = open_store(sqlite_url)
    try:
        with _serving(sqlite_url, kafka_bootstrap, topic) as (base, process):
            _wait_for(lambda: httpx.get(f"{base}/healthz").status_code == 200, "the HTTP server")
            not_ready_before_join = httpx.get(f"{base}/readyz")
            _wait_for(lambda: _consuming(base), "readiness reporting the partitions assigned")
            with _sampling_readiness(base) as answers:  # while the bad records go through
                _produce(kafka_bootstrap, topic, values)
                _wait_for(lambda: _stored(store) >= len(good), "the good events stored")
                _assert_dead_lettered(kafka_bootstrap, topic, values)
            ready = httpx.get(f"{base}/readyz")
            dead = {
                reason: _metric(base, "lineage_events_dead_lettered_total", reason=reason) for reason in ("invalid", "too_large")
            }
            running = (_metric(base, "lineage_ingestion_running"), _metric(base, "lineage_ingestion_restarts_total"))
    finally:
        store.dispose()

    assert not_ready_before_join.status_code == 200  # the API serves before the group assigned the partition
    if not not_ready_before_join.json()["consuming"]:
        assert not_ready_before_join.json()["partitions"] == []
    assert ready.status_code == 200 and ready.json()["ingestion"] == "running" and ready.json()["consuming"]
    assert answers and set(answers) == {True}  # the loop never went down, and readiness never said otherwise
    assert dead == {"invalid": 1, "too_large": 1} and running == (1, 0)


def _consuming(base: str) -> bool:
    """/readyz answers 200 (the API serves) and reports the ingestion consuming its partitions."""
    answer = httpx.get(f"{base}/readyz", timeout=10)
    return answer.status_code == 200 and bool(answer.json()["consuming"])


@contextmanager
def _sampling_readiness(base: str) -> Iterator[list[bool]]:
    """GET /readyz every 50 ms in a thread until the block ends: whether it reported the ingestion consuming."""
    import threading

    answers: list[bool] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            answers.append(_consuming(base))
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield answers
    finally:
        done.set()
        sampler.join(timeout=15)


def _metrics(base: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """GET /metrics (what `curl /metrics` shows) as {(sample, labels): value}."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(httpx.get(f"{base}/metrics").text)
        for sample in family.samples
    }


def _sample(metrics: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return metrics.get((name, frozenset(labels.items())), 0.0)


def _lags(metrics: dict[tuple[str, frozenset[tuple[str, str]]], float], topic: str) -> dict[str, float]:
    """lineage_consumer_lag by partition, for `topic`."""
    return {
        dict(labels)["partition"]: value
        for (name, labels), value in metrics.items()
        if name == "lineage_consumer_lag" and dict(labels)["topic"] == topic
    }


def test_metrics_move_as_events_arrive_and_a_dead_broker_shows(sqlite_url, start_broker):
    """`serve` watched through /metrics and /readyz while events arrive: every counter moves by
    what happened (stored, dead-lettered by class, batch sizes, transactions, lag per partition,
    HTTP requests by route and status); re-read events are not counted twice; a stopped broker
    shows in readiness's report and `lineage_broker_reachable` (the process stays alive and ready to
    serve the API), and ingestion resumes from its committed offsets when the broker is restarted."""
    broker = start_broker()
    topic = unique_topic("watched", broker.bootstrap, partitions=2)
    store = open_store(sqlite_url)
    events = _events(150)  # 300 events keyed by 150 job names: both partitions get some
    late = _events(153)[300:]  # 6 more, after the broker came back
    too_large = _keyed(_events(1, shared_inputs=1))[0]
    too_large = (b"big", json.dumps({**json.loads(too_large[1]), "pad": "x" * 30_000}).encode())
    job_route = "/api/v1/namespaces/{namespace}/jobs/{job}"
    group = f"g-{uuid.uuid4().hex[:6]}"
    serving = _serving(sqlite_url, broker.bootstrap, topic, "--batch-size", "2", "--max-event-bytes", "20000", group=group)
    try:
        with serving as (base, process):
            _wait_for(lambda: _consuming(base), "readiness reporting the ingestion consuming")
            before = _metrics(base)
            _produce(broker.bootstrap, topic, _keyed(events) + [(b"bad", b"not json"), too_large])
            sampled_lags: list[dict[str, float]] = []

            def all_handled() -> bool:
                metrics = _metrics(base)
                sampled_lags.append(_lags(metrics, topic))
                dead = [_sample(metrics, "lineage_events_dead_lettered_total", reason=r) for r in ("invalid", "too_large")]
                return _sample(metrics, "lineage_events_stored_total") >= len(events) and dead == [1, 1]

            _wait_for(all_handled, "every event stored and both bad records dead-lettered")
            final_lags = _wait_for(lambda: (lags := _lags(_metrics(base), topic)) and not any(lags.values()) and lags, "lag 0")
            found = httpx.get(f"{base}/api/v1/namespaces/spark/jobs/app.job0")
            missing = httpx.get(f"{base}/api/v1/namespaces/spark/jobs/no-such-job")
            unrouted = httpx.get(f"{base}/no/such/route")
            after = _metrics(base)

            # The same events once more (a redelivery): stored again as a batch, counted as nothing new.
            _produce(broker.bootstrap, topic, _keyed(events[:10]))
            _wait_for(
                lambda: _sample(_metrics(base), "lineage_store_batch_size_sum") == len(events) + 10, "the redelivered batch"
            )
            redelivered = _metrics(base)
            _wait_for(lambda: _committed_to_the_end(broker.bootstrap, group, topic), "offsets committed up to the end")

            broker.stop()
            gone = _wait_for(
                lambda: (
                    (response := httpx.get(f"{base}/readyz")).status_code == 200
                    and not response.json()["consuming"]
                    and response.json()["broker"] == "unreachable"
                    and response
                ),
                "readiness to report the broker unreachable and the ingestion not consuming",
                60,
            )
            down = _metrics(base)
            alive = httpx.get(f"{base}/healthz").status_code

            broker.start()  # the same broker again, its topics, records and committed offsets kept
            _wait_for(lambda: _consuming(base), "consuming again after the broker came back", 90)
            _produce(broker.bootstrap, topic, _keyed(late))
            _wait_for(
                lambda: _sample(_metrics(base), "lineage_events_stored_total") >= len(events) + len(late),
                "events sent after the broker came back",
                90,
            )
            resumed = _wait_for(
                lambda: (metrics := _metrics(base)) and not any(_lags(metrics, topic).values()) and metrics, "lag 0"
            )
            still_running = process.poll() is None
    finally:
        store.dispose()

    # Stored, dead-lettered by class.
    assert _sample(before, "lineage_events_stored_total") == 0 and _sample(after, "lineage_events_stored_total") == len(events)
    assert _sample(after, "lineage_events_dead_lettered_total", reason="invalid") == 1
    assert _sample(after, "lineage_events_dead_lettered_total", reason="too_large") == 1
    assert _stored_count(sqlite_url) == len(events) + len(late)
    # Batch sizes (at most --batch-size records each) and one transaction duration per batch.
    batches = _sample(after, "lineage_store_batch_size_count")
    assert _sample(before, "lineage_store_batch_size_count") == 0 and batches >= len(events) / 2
    assert _sample(after, "lineage_store_batch_size_sum") == len(events)
    assert _sample(after, "lineage_store_batch_size_bucket", le="5.0") == batches
    assert _sample(after, "lineage_store_transaction_seconds_count") == batches
    assert _sample(after, "lineage_store_transaction_seconds_bucket", le="+Inf") == batches
    assert _sample(after, "lineage_store_transaction_seconds_sum") > 0
    # Lag per partition: behind while the records were being stored, 0 once they all were.
    assert set(final_lags) == {"0", "1"} and _sample(after, "lineage_partitions_assigned") == 2
    assert any(lag > 0 for lags in sampled_lags for lag in lags.values()), sampled_lags
    # HTTP requests by route template and status.
    assert (found.status_code, missing.status_code, unrouted.status_code) == (200, 404, 404)
    for status in ("200", "404"):
        counted = _sample(after, "lineage_http_requests_total", method="GET", route=job_route, status=status)
        assert counted == _sample(before, "lineage_http_requests_total", method="GET", route=job_route, status=status) + 1
    assert _sample(after, "lineage_http_requests_total", method="GET", route="<unmatched>", status="404") == 1
    assert _sample(after, "lineage_http_requests_total", method="GET", route="/readyz", status="200") >= 1
    assert _sample(after, "lineage_http_request_seconds_count", route=job_route) == 2
    # A redelivery is stored as a batch but not counted as new events.
    assert _sample(redelivered, "lineage_events_stored_total") == len(events)
    # After the restart the committed offsets survived: none of the events committed before it was
    # read again. A commit the restarted group coordinator refuses while it loads makes the late
    # events' batch be read again, stored as a batch but not counted as new events.
    assert _sample(resumed, "lineage_events_stored_total") == len(events) + len(late)
    assert len(events) + 10 + len(late) <= _sample(resumed, "lineage_store_batch_size_sum") <= len(events) + 10 + 2 * len(late)
    # The stopped broker: reported unreachable, the API still served; then back and ingesting.
    assert gone.json()["broker"] == "unreachable" and _sample(down, "lineage_broker_reachable") == 0 and alive == 200
    assert _sample(after, "lineage_broker_reachable") == 1 and _sample(resumed, "lineage_broker_reachable") == 1
    assert still_running


def _committed_to_the_end(bootstrap: str, group: str, topic: str) -> bool:
    """Every partition of `topic` has `group`'s committed offset at its end offset."""
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    reader = KafkaConsumer(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        partitions = [TopicPartition(topic, partition) for partition in reader.partitions_for_topic(topic) or ()]
        committed = {tp: meta.offset for tp, meta in admin.list_group_offsets(group)[group].items()}
        return bool(partitions) and all(committed.get(tp) == end for tp, end in reader.end_offsets(partitions).items())
    finally:
        reader.close()
        admin.close()


def _stored_count(store_url: str) -> int:
    store = open_store(store_url)
    try:
        return _stored(store)
    finally:
        store.dispose()


def test_a_failed_ingestion_loop_under_serve_is_logged_reported_and_restarted(sqlite_store, sqlite_url, kafka_bootstrap, caplog):
    import threading

    from consumer.cli import _connect, _supervise
    from consumer.observability import Observability
    from consumer.settings import Settings

    topic = unique_topic("restarted", kafka_bootstrap)
    settings = Settings(
        store_url=sqlite_url,
        bootstrap_servers=kafka_bootstrap,
        topic=topic,
        group=f"g-{uuid.uuid4().hex[:6]}",
        dead_letter_topic=f"{topic}.dlq",
    )
    observability = Observability(ingesting=True)
    first = _connect(settings, sqlite_store, observability)

    def unexpected_failure(timeout_ms: int) -> list:
        raise RuntimeError("unexpected failure inside the loop")

    first.source.poll = unexpected_failure  # the first loop dies on its first poll
    stop = threading.Event()
    thread = threading.Thread(target=_supervise, args=(first, settings, sqlite_store, observability, stop), daemon=True)
    thread.start()
    try:
        _wait_for(lambda: observability.ingestion_checks()["consuming"], "the restarted loop to own the partition")
        _produce(kafka_bootstrap, topic, _keyed(_events(1)))
        _wait_for(lambda: _stored(sqlite_store) == 2, "events stored by the restarted loop")
        restarts = metric_value(observability.render()[0].decode(), "lineage_ingestion_restarts_total")
    finally:
        stop.set()
        thread.join(timeout=60)

    assert restarts == 1 and not thread.is_alive()
    failures = [record for record in caplog.records if "ingestion stopped; restarting" in record.getMessage()]
    assert len(failures) == 1 and failures[0].exc_info is not None
