"""Changes not lost: lineage-change messages are written to the outbox in the store transaction
that made them and published from there. A consumer SIGKILLed after the commit, while the
broker does not answer its publish, loses none: the next consumer on the store publishes them.
Per key, subscribers see the changes in the order they were made. SQLite and PostgreSQL, real
broker, real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import select

from consumer.ingest.change_publishing import ChangePublisher
from consumer.ingest.kafka_io import ChangeMessages
from consumer.ingest.materialize import materialize
from consumer.ingest.store_writes import StoreWrites
from consumer.ingest.validate import validate
from consumer.store import open_store
from consumer.store import schema as s
from demo.broker import KafkaBroker, start_kafka
from tests.consumer.helpers import outbox_size, stop_process
from tests.support.broker import free_port, read_topic, unique_topic
from tests.support.events import batch_write, table
from tests.support.kafka_server import _started
from tests.support.paths import PROJECT_ROOT

pytestmark = pytest.mark.kafka

WAIT_LIMIT_SECONDS = 60.0
JOB = "app.outbox.o"


def _events() -> list[dict]:
    return batch_write(JOB, [table("raw", "a", ["id"])], table("mart", "o", ["id"]))


def _wait_until(probe, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + WAIT_LIMIT_SECONDS
    while not (found := probe()):
        assert time.monotonic() < deadline, f"no {what} before the wait limit"
        time.sleep(0.2)
    return found


def _finished_runs(store_url: str) -> int:
    store = open_store(store_url, migrate=False)
    try:
        with store.engine.connect() as connection:
            return len(connection.execute(select(s.runs.c.id).where(s.runs.c.state == "COMPLETED")).all())
    finally:
        store.dispose()


def _consumer(command: str, store_url: str, bootstrap: str, changes_topic: str, *extra: str) -> subprocess.Popen[str]:
    events_topic = unique_topic("outbox-events")
    return subprocess.Popen(
        [sys.executable, "-m", "consumer", command, "--store", store_url, "--bootstrap-servers", bootstrap]
        + ["--topic", events_topic, "--group", f"g-{uuid.uuid4().hex[:6]}", "--changes-topic", changes_topic, *extra],
        cwd=PROJECT_ROOT,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A broker of this module's own, for the test that freezes it (the shared one serves other tests)."""
    broker = _started(lambda: start_kafka(tmp_path_factory.mktemp("kafka-outbox")))
    assert isinstance(broker, KafkaBroker)
    yield broker
    broker.stop()


def test_a_consumer_killed_between_commit_and_publish_loses_no_change(store_url, own_broker):
    open_store(store_url).dispose()  # migrated, so the probes below can read it
    broker = own_broker
    changes_topic = unique_topic("outbox-changes", broker.bootstrap)
    port = free_port()
    serve = _consumer("serve", store_url, broker.bootstrap, changes_topic, "--host", "127.0.0.1", "--port", str(port))
    try:
        _wait_until(lambda: _answers(port), "API")
        broker.pause()  # from now on the broker answers nothing, its connections stay open: the publish hangs
        complete = _events()[-1]  # a whole finished run in one event: one write
        posting = threading.Thread(target=_post_all, args=(port, [complete]), daemon=True)
        posting.start()
        _wait_until(lambda: _finished_runs(store_url), "committed run")
        serve.kill()  # SIGKILL: the run is committed, its changes not published
        serve.wait(30)
        assert outbox_size(store_url) > 0, "the changes wait in the outbox"
    finally:
        stop_process(serve)
        broker.resume()
    assert read_topic(broker.bootstrap, changes_topic, expected=None, timeout_seconds=10) == []

    ingest = _consumer("ingest", store_url, broker.bootstrap, changes_topic)
    try:
        published = read_topic(broker.bootstrap, changes_topic, expected=3, timeout_seconds=WAIT_LIMIT_SECONDS)
        _wait_until(lambda: outbox_size(store_url) == 0 or None, "empty outbox")
    finally:
        log = stop_process(ingest)
    messages = [json.loads(record.value) for record in published]
    assert {(m["kind"], m.get("state")) for m in messages} >= {
        ("run_finished", "COMPLETED"),
        ("table_lineage_edge", "present"),
    }, log
    assert {m["job"]["name"] for m in messages} == {JOB}


def _answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/api/v1/namespaces", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _post_all(port: int, events: list[dict]) -> None:
    for event in events:
        try:
            httpx.post(f"http://127.0.0.1:{port}/api/v1/lineage", json=event, timeout=WAIT_LIMIT_SECONDS)
        except httpx.HTTPError:
            return  # the server was killed under the request


def test_each_key_gets_its_changes_in_the_order_they_were_made(store, kafka_bootstrap):
    changes_topic = unique_topic("outbox-order")
    sink = ChangeMessages(kafka_bootstrap, changes_topic)
    publishing = StoreWrites(store, [ChangePublisher(store, sink)])
    try:
        publishing.write([materialize(validate(event)) for event in _events()])
        publishing.delete_table_lineage(JOB)
        publishing.write([materialize(validate(_events()[-1]))])  # the same run's COMPLETE again: the edges come back
    finally:
        sink.close()
    edge_states: dict[bytes, list[str]] = {}
    for record in read_topic(kafka_bootstrap, changes_topic, expected=None, timeout_seconds=30):
        message = json.loads(record.value)
        if message["kind"] == "table_lineage_edge":
            edge_states.setdefault(record.key, []).append(message["state"])
    assert len(edge_states) == 2  # the job's input and its output
    assert all(states == ["present", "retired", "present"] for states in edge_states.values()), edge_states
