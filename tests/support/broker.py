"""Helpers for tests that use Kafka; the brokers themselves are tests/support/kafka_server.py's
fixtures (``kafka``, ``kafka_bootstrap``, ``start_broker``).

``unique_topic(prefix="test", bootstrap=None, partitions=1) -> str``
    A topic name no other test uses; created explicitly when ``bootstrap`` is given (the broker
    also creates a topic on first use, with one partition).
``read_topic(bootstrap, topic, expected, timeout_seconds=30.0, security=None) -> list[ConsumerRecord]``
    Reads a topic from the beginning with ``assign()`` + ``seek_to_beginning`` (no consumer group)
    until ``expected`` records arrived or the time is up, then returns what it read, partition by
    partition in offset order. Pass ``expected=None`` to read whatever is there up to the end offsets.
``free_port() -> int``
    A TCP port nobody listens on right now (for "no broker here" tests).
"""

from __future__ import annotations

import time
import uuid

from demo.broker import KafkaBroker, free_port

__all__ = ["KafkaBroker", "free_port", "unique_topic", "read_topic"]


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
