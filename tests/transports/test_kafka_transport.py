"""The kafka transport against a real broker (Apache Kafka): order, outages, spool hand-over between applications."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from openlineage.client.serde import Serde
from openlineage.client.transport import get_default_factory

import emitter.transports
from emitter.transports.kafka import KafkaTransport
from tests.support.broker import free_port, read_topic, unique_topic
from tests.support.paths import PROJECT_ROOT
from tests.support.spec import assert_valid_event
from tests.transports.lineage_events import application_events, identities_of_values, identity, run_emit_app

pytestmark = pytest.mark.kafka

SUBPROCESS_TIMEOUT_SECONDS = 120


def make_transport(bootstrap: str, topic: str, spool_dir: Path, **settings: Any) -> KafkaTransport:
    emitter.transports.register()
    config = {"type": "kafka", "topic": topic, "config": {"bootstrap.servers": bootstrap}, "spoolDir": str(spool_dir)}
    transport = get_default_factory().create({**config, **settings})
    assert isinstance(transport, KafkaTransport)
    return transport


def expected_identities(events: list) -> list[tuple[str, str]]:
    return [identity(json.loads(Serde.to_json(event))) for event in events]


def spooled_identities(transport: KafkaTransport) -> list[tuple[str, str]]:
    return identities_of_values([spooled.record.value for spooled in transport.spool.oldest(10_000)])


def test_events_of_one_application_share_a_key_and_keep_their_order(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = unique_topic("order", bootstrap=kafka_bootstrap, partitions=3)
    first_app, second_app = application_events("app-one", 4), application_events("app-two", 4)
    transport = make_transport(kafka_bootstrap, topic, tmp_path / "spool")
    for pair in zip(first_app, second_app, strict=True):
        for event in pair:
            transport.emit(event)
    assert transport.close(30) is True

    records = read_topic(kafka_bootstrap, topic, expected=len(first_app) + len(second_app))
    for app_name, events in (("app-one", first_app), ("app-two", second_app)):
        mine = [record for record in records if record.key == f"run:spark-tests/{app_name}".encode()]
        assert len({record.partition for record in mine}) == 1
        assert identities_of_values([record.value for record in mine]) == expected_identities(events)
    for record in records:
        assert_valid_event(json.loads(record.value))


def test_a_clean_run_delivers_each_event_exactly_once_and_spools_nothing(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = unique_topic("clean", bootstrap=kafka_bootstrap)
    events = application_events("clean-app", 10)
    transport = make_transport(kafka_bootstrap, topic, tmp_path / "spool")
    for event in events:
        transport.emit(event)

    assert transport.close(30) is True
    assert transport.spool.is_empty()
    records = read_topic(kafka_bootstrap, topic, expected=len(events))
    assert identities_of_values([record.value for record in records]) == expected_identities(events)


def test_emit_with_no_broker_returns_and_the_events_wait_in_the_spool(tmp_path: Path) -> None:
    events = application_events("offline-app", 3)
    transport = make_transport(f"127.0.0.1:{free_port()}", "offline", tmp_path / "spool")
    kafka_handlers = list(logging.getLogger("kafka").handlers)
    assert any(isinstance(handler, logging.NullHandler) for handler in kafka_handlers), (
        "kafka-python's own: its connection errors print nothing in a script with no logging set up"
    )
    for event in events:
        transport.emit(event)  # returns: nothing here waits for the broker that is not there

    assert transport.close(1) is False
    assert logging.getLogger("kafka").handlers == kafka_handlers, "the transport adds no log handler of its own"
    assert spooled_identities(transport) == expected_identities(events)
    for spooled in transport.spool.oldest(100):
        assert spooled.record.topic == "offline"
        assert spooled.record.key == "run:spark-tests/offline-app"
        assert_valid_event(json.loads(spooled.record.value))


def test_a_full_queue_spools_instead_of_blocking_or_dropping(tmp_path: Path) -> None:
    events = application_events("burst-app", 20)
    transport = make_transport(f"127.0.0.1:{free_port()}", "burst", tmp_path / "spool", queueSize=1)
    for event in events:
        transport.emit(event)

    transport.close(1)
    assert spooled_identities(transport) == expected_identities(events)


def test_the_spool_bound_drops_the_oldest_events_and_logs_the_count(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    events = application_events("bounded-app", 20)
    one_event_bytes = len(Serde.to_json(events[-1]).encode()) + 200
    transport = make_transport(
        f"127.0.0.1:{free_port()}", "bounded", tmp_path / "spool", spoolMaxBytes=5 * one_event_bytes, queueSize=1
    )
    with caplog.at_level(logging.WARNING, logger="emitter.transports"):
        for event in events:
            transport.emit(event)
        transport.close(1)

    kept = spooled_identities(transport)
    assert 0 < len(kept) < len(events)
    assert kept == expected_identities(events)[-len(kept) :]
    assert transport.spool.dropped == len(events) - len(kept)
    assert f"{transport.spool.dropped} dropped so far" in caplog.text


def test_events_arrive_in_order_once_a_late_broker_starts(start_broker, tmp_path: Path) -> None:
    port = free_port()
    events = application_events("late-app", 5)
    transport = make_transport(f"127.0.0.1:{port}", "late", tmp_path / "spool")
    for event in events:
        transport.emit(event)

    broker = start_broker(port)
    records = read_topic(broker.bootstrap, "late", expected=len(events), timeout_seconds=60)
    assert identities_of_values([record.value for record in records]) == expected_identities(events)
    assert transport.close(30) is True
    assert transport.spool.is_empty()
    assert len(read_topic(broker.bootstrap, "late", expected=None)) == len(events)


def run_app(app_name: str, actions: int, env: dict[str, str], *flags: str) -> list[tuple[str, str]]:
    return run_emit_app(app_name, actions, env, *flags)[0]


def app_env(bootstrap: str, topic: str, spool_dir: Path, cwd: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENLINEAGE")}
    env.update(
        {
            "OPENLINEAGE__TRANSPORT__TYPE": "kafka",
            "OPENLINEAGE__TRANSPORT__TOPIC": topic,
            "OPENLINEAGE__TRANSPORT__CONFIG__BOOTSTRAP_SERVERS": bootstrap,
            "OPENLINEAGE__TRANSPORT__SPOOLDIR": str(spool_dir),
            "OPENLINEAGE__TRANSPORT__FLUSHTIMEOUTSECONDS": "2",
            "OPENLINEAGE_CONFIG": str(cwd / "absent-openlineage.yml"),
        }
    )
    return env


def test_the_next_application_delivers_what_a_previous_one_spooled(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = unique_topic("handover", bootstrap=kafka_bootstrap)
    spool_dir = tmp_path / "spool"
    offline_env = app_env(f"127.0.0.1:{free_port()}", topic, spool_dir, tmp_path)
    spooled = run_app("offline-app", 3, offline_env)  # exits without closing: its exit hook spools
    assert len(list(spool_dir.glob("*.rec"))) == len(spooled)

    delivered_live = run_app("online-app", 2, app_env(kafka_bootstrap, topic, spool_dir, tmp_path), "--close")

    records = read_topic(kafka_bootstrap, topic, expected=len(spooled) + len(delivered_live))
    assert identities_of_values([record.value for record in records]) == spooled + delivered_live
    assert not list(spool_dir.glob("*.rec"))


def test_two_applications_draining_one_spool_send_each_event_once(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = unique_topic("shared", bootstrap=kafka_bootstrap)
    spool_dir = tmp_path / "spool"
    spooled = run_app("offline-app", 30, app_env(f"127.0.0.1:{free_port()}", topic, spool_dir, tmp_path))

    env = app_env(kafka_bootstrap, topic, spool_dir, tmp_path)
    command = [sys.executable, "-m", "tests.transports.emit_app"]
    apps = [
        subprocess.Popen([*command, f"online-{n}", "1", "--close"], cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE)
        for n in range(2)
    ]
    live = [json.loads(app.communicate(timeout=SUBPROCESS_TIMEOUT_SECONDS)[0]) for app in apps]

    expected_count = len(spooled) + sum(len(events) for events in live)
    records = read_topic(kafka_bootstrap, topic, expected=expected_count)
    delivered = identities_of_values([record.value for record in records])
    assert len(delivered) == expected_count
    assert [event for event in delivered if event in set(spooled)] == spooled
    assert not list(spool_dir.glob("*.rec"))


def test_events_emitted_while_the_broker_is_restarting_arrive_once_it_is_back(start_broker, tmp_path: Path) -> None:
    broker = start_broker()
    before, during = application_events("before-app", 1), application_events("during-app", 1)
    transport = make_transport(broker.bootstrap, "restart", tmp_path / "spool")
    for event in before:
        transport.emit(event)
    assert len(read_topic(broker.bootstrap, "restart", expected=len(before))) == len(before)

    broker.stop()
    for event in during:
        transport.emit(event)
    broker.start()  # the same broker again: it keeps what it had

    records = read_topic(broker.bootstrap, "restart", expected=len(before) + len(during), timeout_seconds=90)
    assert transport.close(30) is True
    assert transport.spool.is_empty()
    assert identities_of_values([record.value for record in records]) == expected_identities(before + during)
    assert len(read_topic(broker.bootstrap, "restart", expected=None)) == len(before) + len(during), "each event once"


def test_an_event_the_broker_never_accepts_is_dropped_without_blocking_the_others(
    start_broker, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    small = application_events("small-app", 1)
    huge = application_events("huge-app-" + "x" * 5000, 0)[0]
    transport = make_transport(
        f"127.0.0.1:{port}",
        "sizes",
        tmp_path / "spool",
        config={
            "bootstrap.servers": f"127.0.0.1:{port}",
            "message.max.bytes": 4000,
        },
    )
    for event in [small[0], huge, *small[1:]]:
        transport.emit(event)

    broker = start_broker(port)
    records = read_topic(broker.bootstrap, "sizes", expected=len(small), timeout_seconds=60)
    assert identities_of_values([record.value for record in records]) == expected_identities(small)
    assert transport.close(30) is True
    assert transport.spool.is_empty()
    assert "rejects a lineage event" in caplog.text


def test_an_application_that_never_closes_still_delivers_everything_at_exit(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = unique_topic("exit", bootstrap=kafka_bootstrap)
    spool_dir = tmp_path / "spool"
    emitted = run_app("exiting-app", 2, app_env(kafka_bootstrap, topic, spool_dir, tmp_path), "--last-at-exit")

    records = read_topic(kafka_bootstrap, topic, expected=len(emitted))
    assert identities_of_values([record.value for record in records]) == emitted
    assert not list(spool_dir.glob("*.rec"))


def test_emit_returns_before_the_broker_has_answered(start_broker, tmp_path: Path) -> None:
    broker = start_broker()
    warm_up, paused = application_events("warm-app", 0), application_events("paused-app", 2)
    transport = make_transport(broker.bootstrap, "paused", tmp_path / "spool")
    for event in warm_up:
        transport.emit(event)
    assert len(read_topic(broker.bootstrap, "paused", expected=len(warm_up))) == len(warm_up)

    broker.pause()  # connected, but nothing will answer now
    try:
        for event in paused:
            transport.emit(event)
        # a transport that waited for the outcome could only come back with the events spooled
        assert transport.spool.is_empty()
    finally:
        broker.resume()

    records = read_topic(broker.bootstrap, "paused", expected=len(warm_up) + len(paused))
    assert identities_of_values([record.value for record in records]) == expected_identities(warm_up + paused)
    assert transport.close(30) is True
