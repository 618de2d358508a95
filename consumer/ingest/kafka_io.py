"""The only module that imports kafka-python: a consumer-group event source with manual offset
commits, a dead-letter producer and a lineage-changes producer."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

import attrs
from kafka import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer
from kafka.errors import CommitFailedError, KafkaError, KafkaTimeoutError, MessageSizeTooLargeError, RecordListTooLargeError
from kafka.producer.future import FutureRecordMetadata
from kafka.structs import OffsetAndMetadata, TopicPartition

from consumer.ingest.kafka_loop import SourceState

log = logging.getLogger(__name__)

# How long to wait for the first broker before giving up with one clear line.
BOOTSTRAP_TIMEOUT_MS = 10000
# kafka-python's default largest produce request; a dead-letter body is cut to leave room for headers.
DEAD_LETTER_REQUEST_BYTES = 1024 * 1024
DEAD_LETTER_VALUE_BYTES = DEAD_LETTER_REQUEST_BYTES - 64 * 1024


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

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        group: str,
        *,
        max_records: int = 500,
        session_timeout_ms: int = 10000,
        max_poll_interval_ms: int = 60000,
        bootstrap_timeout_ms: int = BOOTSTRAP_TIMEOUT_MS,
        max_event_bytes: int = 4 * 1024 * 1024,
    ) -> None:
        self._revoke_callbacks: list[Callable[[], object]] = []
        self._next_offsets: dict[tuple[str, int], int] = {}
        try:
            self._consumer = KafkaConsumer(
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
                # Room for one record above the limit, so it can be fetched and dead-lettered.
                max_partition_fetch_bytes=max(1024 * 1024, max_event_bytes + 64 * 1024),
            )
        except KafkaError:
            raise BrokerUnavailable(f"no Kafka broker answers at {bootstrap_servers}") from None
        self._consumer.subscribe([topic], listener=_RevokeListener(self._revoke_callbacks))

    def on_revoke(self, callback: Callable[[], object]) -> None:
        """Call `callback` (inside `poll`) before partitions are taken away by a rebalance."""
        self._revoke_callbacks.append(callback)

    def state(self) -> SourceState:
        """Assigned partitions, lag per partition (high watermark of the last fetch minus the next
        offset to read; partitions nothing was read from yet are left out) and whether the group
        coordinator answers."""
        assigned = sorted(self._consumer.assignment(), key=lambda tp: (tp.topic, tp.partition))
        lag: dict[tuple[str, int], int] = {}
        for topic_partition in assigned:
            key = (topic_partition.topic, topic_partition.partition)
            highwater = self._consumer.highwater(topic_partition)
            if highwater is not None and key in self._next_offsets:
                lag[key] = max(0, highwater - self._next_offsets[key])
        return SourceState(
            assigned=tuple((tp.topic, tp.partition) for tp in assigned),
            lag=lag,
            broker_reachable=not self._consumer._coordinator.coordinator_unknown(),
        )

    def poll(self, timeout_ms: int) -> list[Record]:
        batches = self._consumer.poll(timeout_ms=timeout_ms)
        records = [
            Record(message.topic, message.partition, message.offset, message.value)
            for partition_records in batches.values()
            for message in partition_records
        ]
        for record in records:
            self._next_offsets[(record.topic, record.partition)] = record.offset + 1
        return sorted(records, key=lambda record: (record.topic, record.partition, record.offset))

    def commit(self, next_offsets: Mapping[tuple[str, int], int]) -> bool:
        """Commit, per (topic, partition), the offset of the next record to read. False when the
        group rebalanced meanwhile or the broker is unavailable: the records are then read again
        (by this member or the partition's new owner), which is harmless because every write is
        idempotent."""
        if not next_offsets:
            return True
        try:
            self._consumer.commit(
                {
                    TopicPartition(topic, partition): OffsetAndMetadata(offset, "", -1)
                    for (topic, partition), offset in next_offsets.items()
                }
            )
        except CommitFailedError as error:
            log.warning("offsets not committed (%s); the records will be read again", error)
            return False
        except KafkaError as error:  # e.g. the coordinator died meanwhile: same outcome, read again
            log.warning("offsets not committed, broker unavailable (%r); the records will be read again", error)
            return False
        return True

    def rewind(self, first_offsets: Mapping[tuple[str, int], int]) -> None:
        """Read these partitions again from these offsets (a batch that could not be stored)."""
        assigned = self._consumer.assignment()
        for (topic, partition), offset in first_offsets.items():
            topic_partition = TopicPartition(topic, partition)
            if topic_partition in assigned:
                self._consumer.seek(topic_partition, offset)
                self._next_offsets[(topic, partition)] = offset

    def close(self) -> None:
        self._consumer.close(autocommit=False)


class _RevokeListener(ConsumerRebalanceListener):
    def __init__(self, callbacks: list[Callable[[], object]]) -> None:
        self.callbacks = callbacks

    def on_partitions_revoked(self, revoked: object) -> None:
        for callback in self.callbacks:
            callback()

    def on_partitions_assigned(self, assigned: object) -> None:
        pass


class DeadLetters:
    """Produces rejected events to the dead-letter topic; `flush` before committing offsets.
    Values above `max_value_bytes` must be cut by the caller (kafka-python's request limit)."""

    max_value_bytes = DEAD_LETTER_VALUE_BYTES

    def __init__(self, bootstrap_servers: str, topic: str, bootstrap_timeout_ms: int = BOOTSTRAP_TIMEOUT_MS) -> None:
        self.topic = topic
        self._pending: list[FutureRecordMetadata] = []
        try:
            self._producer = KafkaProducer(
                bootstrap_servers=bootstrap_servers.split(","),
                acks="all",
                linger_ms=5,
                # Ordered per source partition, even across retries.
                max_in_flight_requests_per_connection=1,
                max_request_size=DEAD_LETTER_REQUEST_BYTES,
                bootstrap_timeout_ms=bootstrap_timeout_ms,
            )
        except KafkaError:
            raise BrokerUnavailable(f"no Kafka broker answers at {bootstrap_servers}") from None

    def send(self, value: bytes | None, headers: Sequence[tuple[str, bytes]], key: bytes | None = None) -> None:
        """`key`: the source topic/partition, so one partition's rejects stay in order. ValueError
        when this record is refused; BrokerUnavailable when the topic cannot be reached."""
        try:
            future = self._producer.send(self.topic, key=key, value=value, headers=list(headers))
        except MessageSizeTooLargeError as error:
            raise ValueError(f"too large for the dead-letter producer: {error}") from None
        except KafkaTimeoutError as error:
            raise BrokerUnavailable(f"dead-letter topic {self.topic} unreachable: {error}") from None
        self._pending.append(future)

    def flush(self, timeout_seconds: float = 30.0) -> None:
        """Wait until every record sent is acknowledged: BrokerUnavailable if one was not, so the
        caller does not commit offsets of records whose dead letter was lost."""
        pending, self._pending = self._pending, []
        try:
            self._producer.flush(timeout=timeout_seconds)
        except KafkaError as error:
            raise BrokerUnavailable(f"dead-letter topic {self.topic} unreachable: {error}") from None
        for future in pending:
            if future.failed():
                if isinstance(future.exception, (MessageSizeTooLargeError, RecordListTooLargeError)):
                    log.error("dead-letter topic %s refused a record: %s", self.topic, future.exception)
                    continue
                raise BrokerUnavailable(f"dead-letter topic {self.topic} did not take a record: {future.exception!r}")
            if not future.is_done:
                raise BrokerUnavailable(f"dead-letter topic {self.topic} did not acknowledge within {timeout_seconds} s")

    def close(self) -> None:
        self._producer.close(timeout=10)


class ChangeMessages:
    """Produces keyed lineage-change messages (consumer.ingest.change_publishing) to the changes topic; `flush`
    raises BrokerUnavailable when they could not all be written."""

    def __init__(self, bootstrap_servers: str, topic: str, bootstrap_timeout_ms: int = BOOTSTRAP_TIMEOUT_MS) -> None:
        self.topic = topic
        try:
            # acks=all and one request in flight: a key's messages land in the order sent.
            self._producer = KafkaProducer(
                bootstrap_servers=bootstrap_servers.split(","),
                acks="all",
                max_in_flight_requests_per_connection=1,
                linger_ms=20,
                bootstrap_timeout_ms=bootstrap_timeout_ms,
            )
        except KafkaError:
            raise BrokerUnavailable(f"no Kafka broker answers at {bootstrap_servers}") from None

    def send(self, key: bytes, value: bytes) -> None:
        try:
            self._producer.send(self.topic, key=key, value=value)
        except KafkaTimeoutError as error:
            raise BrokerUnavailable(f"changes topic {self.topic} unreachable: {error}") from None

    def flush(self, timeout_seconds: float = 30.0) -> None:
        try:
            self._producer.flush(timeout=timeout_seconds)
        except KafkaError as error:
            raise BrokerUnavailable(f"changes topic {self.topic} unreachable: {error}") from None

    def close(self) -> None:
        self._producer.close(timeout=10)


@attrs.frozen
class TopicSpec:
    name: str
    partitions: int
    compacted: bool = False  # cleanup.policy=compact: the latest message per key is kept


def create_topics(
    bootstrap_servers: str, topics: Sequence[TopicSpec], replication_factor: int, bootstrap_timeout_ms: int = BOOTSTRAP_TIMEOUT_MS
) -> list[str]:
    """Create each topic that does not exist yet; one line per topic saying what was done (an
    existing topic is left as it is: its partition count is reported, never changed)."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers.split(","), bootstrap_timeout_ms=bootstrap_timeout_ms)
    except KafkaError:
        raise BrokerUnavailable(f"no Kafka broker answers at {bootstrap_servers}") from None
    lines: list[str] = []
    try:
        for topic in topics:
            configs = {"cleanup.policy": "compact"} if topic.compacted else {}
            policy = f", cleanup.policy={configs['cleanup.policy']}" if configs else ""
            try:
                admin.create_topics([NewTopic(topic.name, topic.partitions, replication_factor, topic_configs=configs)])
                lines.append(f"created {topic.name} ({topic.partitions} partitions{policy})")
            except TopicAlreadyExistsError:
                (described,) = admin.describe_topics([topic.name])
                lines.append(f"exists  {topic.name} ({len(described['partitions'])} partitions, left as it is)")
            except KafkaError as error:
                raise BrokerUnavailable(f"could not create topic {topic.name}: {error}") from None
    finally:
        admin.close()
    return lines
