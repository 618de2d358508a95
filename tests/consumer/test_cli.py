"""`python -m consumer ...` as a user runs it: real processes, real databases, real broker."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import uuid

import httpx
import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient
from sqlalchemy.engine import make_url

from consumer.store.single_writer import WriterLock
from tests.consumer import history_scenario
from tests.consumer.helpers import dump, write_events
from tests.support.broker import free_port, unique_topic
from tests.support.events import batch_write, table, with_column_lineage
from tests.support.paths import PROJECT_ROOT

WAIT_LIMIT_SECONDS = 60.0


def _consumer(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "consumer", *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def _events() -> list[dict]:
    source = table("raw", "orders", ["id"], snapshot="o1")
    output = with_column_lineage(table("mart", "o", ["id"], snapshot="m1"), {"id": [(source, "id")]})
    return batch_write("app.insert_into.o", [source], output)


def test_missing_database_is_one_line_and_a_nonzero_exit():
    result = _consumer("migrate", "--store", f"postgresql://postgres@127.0.0.1:{free_port()}/nothing")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: cannot open the lineage store")


def test_missing_broker_is_one_line_and_a_nonzero_exit(sqlite_url):
    result = _consumer("ingest", "--bootstrap-servers", f"127.0.0.1:{free_port()}", env={"LINEAGE_STORE_URL": sqlite_url})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()] and "no Kafka broker answers" in result.stderr


def test_create_topics_makes_the_three_topics_once(kafka_bootstrap):
    events, changes = unique_topic("created"), unique_topic("changes")
    names = {"LINEAGE_TOPIC": events, "LINEAGE_DEAD_LETTER_TOPIC": f"{events}.dlq", "LINEAGE_CHANGES_TOPIC": changes}
    first = _consumer("create-topics", "--bootstrap-servers", kafka_bootstrap, "--partitions", "3", env=names)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [
        f"created {events} (3 partitions)",
        f"created {events}.dlq (3 partitions)",
        f"created {changes} (3 partitions, cleanup.policy=compact)",
    ]
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        assert [len(topic["partitions"]) for topic in admin.describe_topics([events, f"{events}.dlq", changes])] == [3, 3, 3]
    finally:
        admin.close()
    again = _consumer("create-topics", "--bootstrap-servers", kafka_bootstrap, "--partitions", "6", env=names)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[0] == f"exists  {events} (3 partitions, left as it is)"


def test_create_topics_without_a_broker_is_one_line_and_a_nonzero_exit():
    result = _consumer("create-topics", "--bootstrap-servers", f"127.0.0.1:{free_port()}")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()] and "no Kafka broker answers" in result.stderr


def test_migrate_is_versioned_and_idempotent(store_url):
    first = _consumer("migrate", "--store", store_url)
    second = _consumer("migrate", env={"LINEAGE_STORE_URL": store_url})
    assert first.stdout.strip() == "schema at revision 0001 (applied 0001)"
    assert second.stdout.strip() == "schema at revision 0001 (nothing to apply)"


@pytest.mark.parametrize("prepare_process", ["yes", "no"])
def test_replay_rebuilds_the_same_stores_with_a_progress_bar(store, store_url, prepare_process):
    write_events(store, _events())
    before = dump(store)
    result = _consumer("replay", "--store", store_url, "--prepare-process", prepare_process)
    assert result.returncode == 0, result.stderr
    assert "replay [" in result.stderr and "100% 2/2" in result.stderr
    assert re.search(r"100% 2/2 \d+ events/s", result.stderr) and "events/s)" in result.stdout
    assert dump(store) == before


def test_replay_keeps_the_tags_set_through_the_api(store, store_url):
    from consumer.store import tags

    write_events(store, _events())
    output = _events()[-1]["outputs"][0]
    tags.tag_job(store, "spark", "app.insert_into.o", "NIGHTLY", add=True)
    tags.tag_dataset(store, output["namespace"], output["name"], "GOLD", add=True)
    tags.tag_field(store, output["namespace"], output["name"], "id", "PII", add=True)
    with store.engine.connect() as connection:
        tagged = tags.saved_assignments(connection)
    assert tagged == tags.TagAssignments(
        jobs=(("spark", "app.insert_into.o", "NIGHTLY"),),
        datasets=((output["namespace"], output["name"], "GOLD"),),
        fields=((output["namespace"], output["name"], "id", ("PII",)),),
    )
    before = dump(store)
    result = _consumer("replay", "--store", store_url)
    assert result.returncode == 0, result.stderr
    with store.engine.connect() as connection:
        assert tags.saved_assignments(connection) == tagged
    assert dump(store) == before


def test_delete_commands_remove_a_jobs_lineage(store, store_url):
    write_events(store, _events())
    table_result = _consumer("delete-table-lineage", "--job", "app.insert_into.o", "--store", store_url)
    data_result = _consumer("delete-data-lineage", "--job", "app.insert_into.o", "--store", store_url)
    assert json.loads(table_result.stdout)["removedRows"] == 3
    assert json.loads(data_result.stdout)["removedRows"] == 2
    assert dump(store)["job_io"] == [] and dump(store)["snapshot_lineage"] == []


@pytest.mark.kafka
def test_serve_ingests_from_kafka_and_over_http(sqlite_url, kafka_bootstrap):
    topic = unique_topic("serve", kafka_bootstrap)
    port = free_port()
    start, complete = _events()
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    producer.send(topic, json.dumps(start).encode())
    producer.flush()
    producer.close()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "consumer",
            "serve",
            "--store",
            sqlite_url,
            "--bootstrap-servers",
            kafka_bootstrap,
            "--topic",
            topic,
            "--group",
            f"g-{uuid.uuid4().hex[:6]}",
            "--port",
            str(port),
            "--host",
            "127.0.0.1",
        ],
        cwd=PROJECT_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        base = f"http://127.0.0.1:{port}/api/v1"
        runs = _wait_for(lambda: httpx.get(f"{base}/namespaces/spark/jobs/app.insert_into.o/runs").json()["runs"])
        posted = httpx.post(f"{base}/lineage", json=complete)
        final = _wait_for(
            lambda: [
                r
                for r in httpx.get(f"{base}/namespaces/spark/jobs/app.insert_into.o/runs").json()["runs"]
                if r["state"] == "COMPLETED"
            ]
        )
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
    assert len(runs) == 1 and posted.status_code == 201 and len(final) == 1


def _wait_for(probe):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + WAIT_LIMIT_SECONDS
    while True:
        try:
            found = probe()
            if found:
                return found
        except (httpx.HTTPError, KeyError, ValueError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError("nothing arrived before the wait limit")
        time.sleep(0.2)


def test_lineage_questions_are_handed_to_the_read_side_with_the_store(store, store_url):
    write_events(store, _events())
    result = _consumer("lineage", "--json", "upstream", "mart.o", "--store", store_url)
    assert result.returncode == 0, result.stderr
    assert [t["name"] for t in json.loads(result.stdout)["tables"]] == ["/tmp/warehouse/raw.db/orders"]


def test_a_jobs_lineage_history_on_the_command_line(store, store_url):
    for events in history_scenario.every_day():
        write_events(store, events)
    versions = _consumer("lineage", "versions", history_scenario.JOB, "--store", store_url)
    assert versions.returncode == 0, versions.stderr
    assert len(versions.stdout.splitlines()) == 3 + 3  # title, headers, rule, one line per version
    diff = _consumer(
        "lineage", "diff", history_scenario.JOB, "--from", "2026-01-02T12:00:00Z", "--to", "2026-01-06", "--store", store_url
    )
    assert diff.returncode == 0, diff.stderr
    assert [line.split()[:2] for line in diff.stdout.splitlines()[3:]] == [
        ["reads", "added"],
        ["reads", "removed"],
        ["field", "added"],
        ["edge", "added"],
        ["edge", "changed"],
    ]
    unknown = _consumer("lineage", "diff", "no.such.job", "--from", "a", "--to", "b", "--store", store_url)
    assert (unknown.returncode, unknown.stderr.strip()) == (1, "error: job 'no.such.job' not found")


def test_store_urls_are_logged_and_reported_without_their_passwords(postgres_url, kafka_bootstrap):
    with_password = make_url(postgres_url).set(password="hunter2-store").render_as_string(hide_password=False)
    command = [sys.executable, "-m", "consumer", "ingest", "--store", with_password, "--bootstrap-servers", kafka_bootstrap]
    ingesting = subprocess.Popen(
        [*command, "--topic", unique_topic("secrets", kafka_bootstrap)], cwd=PROJECT_ROOT, stderr=subprocess.PIPE, text=True
    )
    try:
        assert ingesting.stderr is not None
        lines = []
        while not any("ingesting" in line for line in lines):
            line = ingesting.stderr.readline()
            assert line, f"ingest ended before it started: {''.join(lines)}"
            lines.append(line)
    finally:
        ingesting.send_signal(signal.SIGTERM)
        _, rest = ingesting.communicate(timeout=WAIT_LIMIT_SECONDS)
    logged = "".join(lines) + rest
    assert "hunter2" not in logged and "***@" in logged
    unreachable = make_url(with_password).set(port=free_port()).render_as_string(hide_password=False)
    failed = _consumer("migrate", "--store", unreachable + "&sslpassword=hunter2-key")
    assert failed.returncode == 2 and "hunter2" not in failed.stderr + failed.stdout


def test_a_redacted_store_url_keeps_everything_but_its_secrets():
    from consumer.store import redacted_url

    url = "postgresql://lineage:hunter2@db:5432/lineage?sslmode=verify-full&sslpassword=hunter2&application_name=x"
    assert (
        redacted_url(url)
        == "postgresql://lineage:***@db:5432/lineage?application_name=x&sslmode=verify-full&sslpassword=redacted"
    )


def test_writer_commands_take_the_sqlite_writer_lock_before_any_migration(tmp_path):
    database = tmp_path / "fresh.db"
    other_writer = WriterLock(database)
    other_writer.acquire()
    try:
        refused = [
            _consumer("migrate", "--store", f"sqlite:///{database}"),
            _consumer("ingest", "--store", f"sqlite:///{database}", "--bootstrap-servers", f"127.0.0.1:{free_port()}"),
            _consumer("replay", "--store", f"sqlite:///{database}"),
        ]
    finally:
        other_writer.release()
    for result in refused:
        assert result.returncode == 2 and "is being written by another process" in result.stderr
    with sqlite3.connect(database) as connection:
        assert connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall() == [], "nothing migrated"
