"""The lineage-changes topic (`--changes-topic`): a subscriber that reads it from the beginning,
keeping the latest message per key, holds the store's table lineage, column lineage and
finished runs, on SQLite and PostgreSQL, with a real broker and the demo pipeline's events."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from kafka import KafkaConsumer, KafkaProducer
from sqlalchemy import select

from consumer.cli import main as cli_main
from consumer.ingest.change_publishing import ChangePublisher, change_scope, changed_messages, versions_to_read
from consumer.ingest.fold import fold
from consumer.ingest.kafka_io import ChangeMessages
from consumer.ingest.prepare import prepare
from consumer.ingest.store_writes import StoreWrites
from consumer.query import history
from consumer.store import Store, open_store
from consumer.store import schema as s
from consumer.store.version_diff import version_diff
from tests.consumer import history_scenario as scenario
from tests.consumer.helpers import DRAIN_LIMIT_SECONDS, ingest_all, outbox_size, stop_process
from tests.support.broker import free_port, read_topic, unique_topic

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[2]
DEMO_EVENTS = ROOT / "tests" / "fixtures" / "demo_events.jsonl"
SCHEMAS = {
    "table_lineage_edge": "LineageChangeTableEdge.json",
    "column_lineage_edge": "LineageChangeColumnEdge.json",
    "snapshot_lineage": "LineageChangeSnapshot.json",
    "run_finished": "LineageChangeRunFinished.json",
    "job_version_changed": "LineageChangeJobVersion.json",
}


def _demo_events() -> list[bytes]:
    return [line for line in DEMO_EVENTS.read_bytes().splitlines() if line.strip()]


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for value in values:
        producer.send(topic, value=value)
    producer.flush()
    producer.close()


def _subscriber_view(bootstrap: str, topic: str) -> dict[bytes, dict[str, Any]]:
    """What a subscriber holds after reading the topic: the latest message of every key."""
    latest: dict[bytes, dict[str, Any]] = {}
    for record in read_topic(bootstrap, topic, expected=None, timeout_seconds=30):
        latest[record.key] = json.loads(record.value)
    return latest


def _present_table_edges(view: dict[bytes, dict[str, Any]]) -> set[tuple[str, ...]]:
    return {
        (m["job"]["namespace"], m["job"]["name"], m["direction"], m["dataset"]["namespace"], m["dataset"]["name"])
        for m in view.values()
        if m["kind"] == "table_lineage_edge" and m["state"] == "present"
    }


def _implied_table_edges(events: list[bytes]) -> set[tuple[str, ...]]:
    """The table-lineage edges the events themselves name: each job to each dataset it read or wrote."""
    edges: set[tuple[str, ...]] = set()
    for raw in events:
        event = json.loads(raw)
        for direction, datasets in (("input", event.get("inputs")), ("output", event.get("outputs"))):
            for dataset in datasets or []:
                edges.add((event["job"]["namespace"], event["job"]["name"], direction, dataset["namespace"], dataset["name"]))
    return edges


def _store_table_edges(store: StoreWrites | Store) -> set[tuple[str, ...]]:
    job_ns, ds_ns = s.namespaces.alias("job_ns"), s.namespaces.alias("ds_ns")
    query = (
        select(job_ns.c.name, s.jobs.c.name, s.job_io.c.direction, ds_ns.c.name, s.datasets.c.name)
        .join(s.jobs, s.jobs.c.id == s.job_io.c.job_id)
        .join(job_ns, job_ns.c.id == s.jobs.c.namespace_id)
        .join(s.datasets, s.datasets.c.id == s.job_io.c.dataset_id)
        .join(ds_ns, ds_ns.c.id == s.datasets.c.namespace_id)
    )
    with store.engine.connect() as conn:
        return {tuple(row) for row in conn.execute(query)}


def _count(store: StoreWrites, table: Any, *where: Any) -> int:
    with store.engine.connect() as conn:
        return len(conn.execute(select(table.c.id).where(*where)).all())


@pytest.fixture
def publishing(store_url: str, kafka_bootstrap: str) -> Any:
    opened = open_store(store_url)
    changes_topic = unique_topic("changes")
    sink = ChangeMessages(kafka_bootstrap, changes_topic)
    yield StoreWrites(opened, [ChangePublisher(opened, sink)]), changes_topic
    sink.close()
    opened.dispose()


def _ingest_all_cleanly(store: StoreWrites, bootstrap: str, topic: str, expected: int) -> None:
    ingestor = ingest_all(store, bootstrap, topic, expected, max_records=50)
    assert ingestor.stats.records == expected and ingestor.stats.dead_lettered == 0


def test_a_subscriber_rebuilds_the_stores_lineage_from_the_changes_topic(publishing: Any, kafka_bootstrap: str) -> None:
    store, changes_topic = publishing
    events = _demo_events()
    events_topic = unique_topic("events")
    _produce(kafka_bootstrap, events_topic, events)
    _ingest_all_cleanly(store, kafka_bootstrap, events_topic, len(events))

    view = _subscriber_view(kafka_bootstrap, changes_topic)
    store_edges = _store_table_edges(store)
    assert len(store_edges) >= 10
    assert _present_table_edges(view) == store_edges == _implied_table_edges(events)
    kinds = [message["kind"] for message in view.values()]
    assert kinds.count("column_lineage_edge") == _count(store, s.column_lineage)
    assert kinds.count("run_finished") == _count(store, s.runs, s.runs.c.state.in_(["COMPLETED", "FAILED", "ABORTED"]))

    # Delivered again (a rebalance, a restart): the store does not change, nothing is published.
    published = len(read_topic(kafka_bootstrap, changes_topic, expected=None, timeout_seconds=30))
    _ingest_all_cleanly(store, kafka_bootstrap, events_topic, len(events))
    assert len(read_topic(kafka_bootstrap, changes_topic, expected=None, timeout_seconds=30)) == published

    # A job's table lineage deleted: its edges arrive as retired, the subscriber follows.
    job_namespace, job_name = sorted(store_edges)[0][:2]
    store.delete_table_lineage(job_name, job_namespace)
    view = _subscriber_view(kafka_bootstrap, changes_topic)
    assert (
        _present_table_edges(view) == _store_table_edges(store) == {e for e in store_edges if e[:2] != (job_namespace, job_name)}
    )
    assert any(
        m["kind"] == "table_lineage_edge" and m["state"] == "retired" and m["job"]["name"] == job_name for m in view.values()
    )


def _subscribe(bootstrap: str, topic: str) -> dict[bytes, dict[str, Any]]:
    """A subscriber as docs/changes.md shows one: a consumer group reading the changes topic from the
    beginning, keeping present table-lineage edges by key and dropping retired ones; it stops once
    it has read up to the end offsets the broker reports when the group assigned it the partitions."""
    edges: dict[bytes, dict[str, Any]] = {}
    subscriber = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=f"lineage-view-{uuid.uuid4().hex[:6]}", auto_offset_reset="earliest"
    )
    try:
        deadline = time.monotonic() + DRAIN_LIMIT_SECONDS
        end_offsets: dict[Any, int] = {}
        while not end_offsets or any(subscriber.position(partition) < end for partition, end in end_offsets.items()):
            assert time.monotonic() < deadline, f"{topic} not read to its end within {DRAIN_LIMIT_SECONDS:.0f} s"
            for records in subscriber.poll(timeout_ms=500).values():
                for record in records:
                    change = json.loads(record.value)
                    if change["kind"] == "table_lineage_edge":
                        if change["state"] == "present":
                            edges[record.key] = change
                        else:
                            edges.pop(record.key, None)
            if not end_offsets and subscriber.assignment():
                end_offsets = subscriber.end_offsets(list(subscriber.assignment()))
    finally:
        subscriber.close()
    return edges


def test_serve_with_a_changes_topic_tells_a_subscriber_the_demo_pipelines_table_lineage(
    sqlite_url: str, kafka_bootstrap: str
) -> None:
    """`serve --changes-topic` as operators run it, fed the demo pipeline's events: a subscriber of
    the changes topic ends with exactly the table-lineage edges the events imply, which are the
    store's, each keyed by its identity."""
    events = _demo_events()
    events_topic = unique_topic("events", kafka_bootstrap)
    changes_topic = unique_topic("changes")
    port = free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "consumer", "serve", "--store", sqlite_url, "--bootstrap-servers", kafka_bootstrap]
        + ["--topic", events_topic, "--group", f"g-{uuid.uuid4().hex[:6]}", "--dead-letter-topic", f"{events_topic}.dlq"]
        + ["--changes-topic", changes_topic, "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _produce(kafka_bootstrap, events_topic, events)
        deadline = time.monotonic() + DRAIN_LIMIT_SECONDS
        while _stored_through_api(port) < len(events) or outbox_size(sqlite_url):  # stored, and every change published
            assert serve.poll() is None, "serve exited"
            assert time.monotonic() < deadline, f"the consumer did not store the {len(events)} events and publish their changes"
            time.sleep(0.2)
        subscribed = _subscribe(kafka_bootstrap, changes_topic)
        store = open_store(sqlite_url)
        try:
            store_edges = _store_table_edges(store)
        finally:
            store.dispose()
    finally:
        log = stop_process(serve)

    rebuilt = {
        (m["job"]["namespace"], m["job"]["name"], m["direction"], m["dataset"]["namespace"], m["dataset"]["name"])
        for m in subscribed.values()
    }
    assert len(rebuilt) >= 10, log[-2000:]
    assert rebuilt == _implied_table_edges(events) == store_edges
    assert {key: json.loads(key) for key in subscribed} == {
        key: [
            "table_lineage_edge",
            m["job"]["namespace"],
            m["job"]["name"],
            m["direction"],
            m["dataset"]["namespace"],
            m["dataset"]["name"],
        ]
        for key, m in subscribed.items()
    }


def _stored_through_api(port: int) -> int:
    try:
        response = httpx.get(f"http://127.0.0.1:{port}/api/v1/events/lineage", params={"limit": 1}, timeout=5)
        return int(response.json()["totalCount"]) if response.status_code == 200 else 0
    except httpx.HTTPError:
        return 0


def test_every_message_matches_its_schema_and_its_key(publishing: Any, kafka_bootstrap: str) -> None:
    store, changes_topic = publishing
    store.write([prepare(event) for event in _demo_events()])
    records = read_topic(kafka_bootstrap, changes_topic, expected=None, timeout_seconds=30)
    assert {json.loads(record.value)["kind"] for record in records} == set(SCHEMAS)
    validators = {
        kind: jsonschema.Draft202012Validator(
            json.loads((ROOT / "schemas" / "1-0-0" / name).read_text()), format_checker=jsonschema.FormatChecker()
        )
        for kind, name in SCHEMAS.items()
    }
    for record in records:
        message = json.loads(record.value)
        validators[message["kind"]].validate(message)
        key = json.loads(record.key)
        assert key[0] == message["kind"]
    assert len({record.key for record in records}) == len(records), "one message per key and transaction"


def _validator(kind: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((ROOT / "schemas" / "1-0-0" / SCHEMAS[kind]).read_text())
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


def test_a_job_version_change_is_published_once_per_change_with_the_diff(publishing: Any, kafka_bootstrap: str) -> None:
    """The scenario job's lineage changes twice over five daily runs: a subscriber receives its first
    version and the two changes, each once, with exactly the diff the API answers; repeated runs and
    the same events delivered again publish no version message."""
    store, changes_topic = publishing
    for _ in range(2):  # the second time: every event delivered again
        for events in scenario.every_day():
            store.write([prepare(event) for event in events])
    records = read_topic(kafka_bootstrap, changes_topic, expected=None, timeout_seconds=30)
    changes = [json.loads(record.value) for record in records if json.loads(record.key)[0] == "job_version_changed"]
    assert {record.key for record in records if json.loads(record.key)[0] == "job_version_changed"} == {
        json.dumps(["job_version_changed", scenario.NAMESPACE, scenario.JOB], separators=(",", ":")).encode()
    }
    v1, v2, v3 = (v["version"] for v in history.job_versions(store.store, scenario.NAMESPACE, scenario.JOB)["versions"])
    assert [(m["previousVersion"], m["version"]) for m in changes] == [(None, v1), (v1, v2), (v2, v3)]
    for message in changes:
        _validator("job_version_changed").validate(message)
    for message in changes[1:]:
        answered = history.job_version_diff(
            store.store, scenario.NAMESPACE, scenario.JOB, message["previousVersion"], message["version"]
        )
        assert message["diff"] == answered["diff"]
    [retyped] = changes[2]["diff"]["edges"]["changed"]
    assert (retyped["to"]["subtype"], retyped["to"]["description"]) == ("TRANSFORMATION", scenario.ROUND)
    assert [d["name"] for d in changes[0]["diff"]["outputs"]["added"]] == [scenario.ENRICHED["name"]]

    # its table lineage deleted: the job has no current version any more, and says so once
    store.delete_table_lineage(scenario.JOB, scenario.NAMESPACE)
    records = read_topic(kafka_bootstrap, changes_topic, expected=None, timeout_seconds=30)
    last = [json.loads(record.value) for record in records if json.loads(record.key)[0] == "job_version_changed"][3:]
    assert [(m["previousVersion"], m["version"]) for m in last] == [(v3, None)]
    assert [d["name"] for d in last[0]["diff"]["outputs"]["removed"]] == [scenario.ENRICHED["name"]]


def test_retiring_stale_jobs_publishes_their_edges_as_retired(publishing: Any, kafka_bootstrap: str) -> None:
    store, changes_topic = publishing
    store.write([prepare(event) for event in _demo_events()])
    edges = _store_table_edges(store)
    assert _present_table_edges(_subscriber_view(kafka_bootstrap, changes_topic)) == edges != set()
    retired = store.retire_stale_jobs(timedelta(days=1), now=datetime.now(timezone.utc) + timedelta(days=3650))
    view = _subscriber_view(kafka_bootstrap, changes_topic)
    assert _present_table_edges(view) == _store_table_edges(store) == set()
    retired_edges = {
        (m["job"]["namespace"], m["job"]["name"], m["direction"], m["dataset"]["namespace"], m["dataset"]["name"])
        for m in view.values()
        if m["kind"] == "table_lineage_edge" and m["state"] == "retired"
    }
    assert retired_edges == edges and {edge[1] for edge in edges} <= set(retired)


def test_replay_publishes_nothing(publishing: Any, kafka_bootstrap: str, store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store, changes_topic = publishing
    store.write([prepare(event) for event in _demo_events()])
    published = len(read_topic(kafka_bootstrap, changes_topic, expected=None, timeout_seconds=30))
    monkeypatch.setenv("LINEAGE_CHANGES_TOPIC", changes_topic)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap)
    assert cli_main(["replay", "--store", store_url]) == 0
    assert len(read_topic(kafka_bootstrap, changes_topic, expected=None, timeout_seconds=10)) == published


def test_replay_republishes_the_whole_lineage_when_asked(
    publishing: Any, kafka_bootstrap: str, store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store, first_topic = publishing
    store.write([prepare(event) for event in _demo_events()])
    fresh_topic = unique_topic("changes-seed")
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap)
    assert cli_main(["replay", "--store", store_url, "--changes-topic", fresh_topic, "--republish-changes"]) == 0
    assert f"lineage changes to {fresh_topic}" in capsys.readouterr().out
    seeded = _subscriber_view(kafka_bootstrap, fresh_topic)
    assert _present_table_edges(seeded) == _store_table_edges(store) != set()
    assert {json.loads(k)[0] for k in seeded} == {json.loads(k)[0] for k in _subscriber_view(kafka_bootstrap, first_topic)}


def test_change_scope_names_the_batchs_jobs_and_runs() -> None:
    """A job's edges change when its current version does: the scope is every edge of the batch's jobs."""
    rows = [prepare(event) for event in _demo_events()]
    scope = change_scope(fold(rows))
    assert scope.jobs == {(r.job.namespace, r.job.name) for r in rows if r.job}
    assert scope.run_uuids == {r.run.uuid for r in rows if r.run}
    assert not change_scope(fold([]))


def test_changed_messages_are_whole_states_not_deltas() -> None:
    edge: tuple[str, ...] = ("table_lineage_edge", "ns", "job", "input", "ns", "t")
    run: tuple[str, ...] = ("run_finished", "r1")
    column: tuple[str, ...] = ("column_lineage_edge", "ns", "o", "f", "ns", "i", "g", "DIRECT", "IDENTITY")
    before: dict[tuple[str, ...], dict[str, Any]] = {
        edge: {"kind": "table_lineage_edge", "state": "present"},
        run: {"kind": "run_finished", "state": "COMPLETED"},
        column: {"kind": "column_lineage_edge", "transformation": {"description": "a"}, "state": "present"},
    }
    assert changed_messages(before, before) == []
    after = {column: {**before[column], "transformation": {"description": "b"}}}
    changed = dict(changed_messages(before, after))
    assert changed[column]["transformation"] == {"description": "b"}
    assert changed[edge] == {"kind": "table_lineage_edge", "state": "retired"}
    assert run not in changed, "a run is never retired"


def test_a_version_message_names_both_versions_and_what_changed() -> None:
    key = ("job_version_changed", "ns", "job")
    content = {"inputs": [["ns", "a"]], "outputs": [["ns", "o"]], "schemas": [], "edges": []}
    swapped = {**content, "inputs": [["ns", "b"]]}
    before = {key: {"kind": "job_version_changed", "job": {"namespace": "ns", "name": "job"}, "version": "h1", "versionId": 1}}
    after = {key: {**before[key], "version": "h2", "versionId": 2}}
    assert changed_messages(before, before) == [] and versions_to_read(before, before) == set()
    assert versions_to_read(before, after) == {1, 2}
    assert changed_messages(before, after, {1: content, 2: swapped}) == [
        (
            key,
            {
                "kind": "job_version_changed",
                "job": {"namespace": "ns", "name": "job"},
                "previousVersion": "h1",
                "version": "h2",
                "diff": version_diff(content, swapped),
            },
        )
    ]
    [(_, first)] = changed_messages({}, after, {2: swapped})
    assert first["previousVersion"] is None and first["diff"] == version_diff(None, swapped)
