"""The only module that imports kafka-python: a consumer-group event source with manual offset
commits and a dead-letter producer."""

from __future__ import annotations

import logging
from typing import Mapping, Sequence

import attrs
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import CommitFailedError, KafkaError
from kafka.structs import OffsetAndMetadata, TopicPartition

log = logging.getLogger(__name__)

# How long to wait for the first broker before giving up with one clear line.
BOOTSTRAP_TIMEOUT_MS = 10000


class BrokerUnavailable(RuntimeError):
    """The Kafka cluster cannot be reached."""


@attrs.frozen
class Record:
    topic: str
    partition: int
    offset: int
    value: bytes | None


class EventSource:
    """Polls the events topic as a member of a consumer group; offsets move only on `commit`."""

    def __init__(self, bootstrap_servers: str, topic: str, group: str, *, max_records: int = 500,
                 session_timeout_ms: int = 10000, max_poll_interval_ms: int = 60000,
                 bootstrap_timeout_ms: int = BOOTSTRAP_TIMEOUT_MS) -> None:
        try:
            self._consumer = KafkaConsumer(
                topic,
                bootstrap_servers=bootstrap_servers.split(","),
                group_id=group,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                max_poll_records=max_records,
                session_timeout_ms=session_timeout_ms,
                heartbeat_interval_ms=max(100, session_timeout_ms // 4),
                max_poll_interval_ms=max_poll_interval_ms,
                # A rebalance must finish within the group's rebalance timeout (max poll interval).
                request_timeout_ms=max(max_poll_interval_ms + 5000, 30000),
                bootstrap_timeout_ms=bootstrap_timeout_ms,
            )
        except KafkaError:
            raise BrokerUnavailable(f"no Kafka broker answers at {bootstrap_servers}") from None

    def poll(self, timeout_ms: int) -> list[Record]:
        batches = self._consumer.poll(timeout_ms=timeout_ms)
        records = [
            Record(message.topic, message.partition, message.offset, message.value)
            for partition_records in batches.values()
            for message in partition_records
        ]
        return sorted(records, key=lambda record: (record.topic, record.partition, record.offset))

    def commit(self, next_offsets: Mapping[tuple[str, int], int]) -> bool:
        """Commit, per (topic, partition), the offset of the next record to read. False when the
        group rebalanced meanwhile: the records are then redelivered to the partition's new
        owner, which is harmless because every write is idempotent."""
        if not next_offsets:
            return True
        try:
            self._consumer.commit({
                TopicPartition(topic, partition): OffsetAndMetadata(offset, "", -1)
                for (topic, partition), offset in next_offsets.items()
            })
        except CommitFailedError as error:
            log.warning("offsets not committed (%s); the records will be read again", error)
            return False
        return True

    def rewind(self, first_offsets: Mapping[tuple[str, int], int]) -> None:
        """Read these partitions again from these offsets (a batch that could not be stored)."""
        assigned = self._consumer.assignment()
        for (topic, partition), offset in first_offsets.items():
            topic_partition = TopicPartition(topic, partition)
            if topic_partition in assigned:
                self._consumer.seek(topic_partition, offset)

    def close(self) -> None:
        self._consumer.close(autocommit=False)


class DeadLetters:
    """Produces rejected events to the dead-letter topic; `flush` before committing offsets."""

    def __init__(self, bootstrap_servers: str, topic: str, bootstrap_timeout_ms: int = BOOTSTRAP_TIMEOUT_MS) -> None:
        self.topic = topic
        try:
            self._producer = KafkaProducer(bootstrap_servers=bootstrap_servers.split(","), acks="all", linger_ms=5,
                                           # Ordered per source partition, even across retries.
                                           max_in_flight_requests_per_connection=1,
                                           bootstrap_timeout_ms=bootstrap_timeout_ms)
        except KafkaError:
            raise BrokerUnavailable(f"no Kafka broker answers at {bootstrap_servers}") from None

    def send(self, value: bytes | None, headers: Sequence[tuple[str, bytes]], key: bytes | None = None) -> None:
        """`key`: the source topic/partition, so one partition's rejects stay in order."""
        self._producer.send(self.topic, key=key, value=value, headers=list(headers))

    def flush(self, timeout_seconds: float = 30.0) -> None:
        try:
            self._producer.flush(timeout=timeout_seconds)
        except KafkaError as error:
            raise BrokerUnavailable(f"dead-letter topic {self.topic} unreachable: {error}") from None

    def close(self) -> None:
        self._producer.close(timeout=10)
