"""The only module that imports kafka-python: a consumer-group event source with manual offset
commits, a dead-letter producer and a lineage-changes producer. Each takes the same `security`
keyword arguments (consumer.ingest.kafka_security: protocol, SASL, TLS).

A broker that refuses a client says why in one `KafkaRefused` naming the cause: a secured client
first makes one connection of its own (`check_access`), because kafka-python reports refused
credentials or certificates only as a bootstrap that timed out; an ACL the event source lacks
is reported by its `state()` (nothing is read or committed meanwhile, and reading resumes by
itself once the ACL is there); a producer's refused records raise from `flush`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import attrs
from kafka import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer
from kafka.errors import (
    AuthorizationError,
    CommitFailedError,
    GroupAuthorizationFailedError,
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    SaslAuthenticationFailedError,
    TopicAuthorizationFailedError,
    UnsupportedSaslMechanismError,
)
from kafka.producer.future import FutureRecordMetadata
from kafka.structs import OffsetAndMetadata, TopicPartition

from consumer.ingest.kafka_loop import SourceState

log = logging.getLogger(__name__)

# How long to wait for the first broker before giving up with one clear line.
BOOTSTRAP_TIMEOUT_MS = 10000
TOPIC_READY_TIMEOUT_S = 30.0  # how long a created topic may take to show its partitions
# The lag is computed from the partitions' end offsets, looked up this often (and at once when
# the assignment changes), each lookup bounded so the poll loop never waits long on it.
END_OFFSETS_EVERY_SECONDS = 5.0
END_OFFSETS_TIMEOUT_MS = 1000
# A broker that fails a SASL login answers why and closes the connection; kafka-python drops an
# answer that arrives with the close, so a login the broker closed is tried again for the answer.
ACCESS_CHECK_ATTEMPTS = 3
# kafka-python's default largest produce request; a dead-letter body is cut to leave room for headers.
DEAD_LETTER_REQUEST_BYTES = 1024 * 1024
DEAD_LETTER_VALUE_BYTES = DEAD_LETTER_REQUEST_BYTES - 64 * 1024


class BrokerUnavailable(RuntimeError):
    """The Kafka cluster cannot be reached."""


class KafkaRefused(BrokerUnavailable):
    """The broker answered and refused this client: its SASL credentials, a certificate one side
    does not trust, or a missing ACL. The message names the cause and holds neither a secret nor
    a host, so it may be shown in /readyz."""


def check_access(bootstrap_servers: str, security: Mapping[str, Any], timeout_ms: int = BOOTSTRAP_TIMEOUT_MS) -> None:
    """KafkaRefused when the first bootstrap broker that answers refuses these credentials or
    certificates; nothing when one accepts them or none answers (the client's own bootstrap then
    says so). Only SSL and SASL connections can be refused this early."""
    if str(security.get("security_protocol", "PLAINTEXT")) == "PLAINTEXT":
        return
    deadline = time.monotonic() + timeout_ms / 1000
    for server in bootstrap_servers.split(","):
        for attempt in range(1, ACCESS_CHECK_ATTEMPTS + 1):
            failure, logging_in = _first_connection(server.strip(), security, max(1, int((deadline - time.monotonic()) * 1000)))
            if failure is None:
                return
            if (cause := refusal_cause(failure, security)) is not None:
                raise KafkaRefused(cause)
            if not logging_in:  # nobody there, or no answer in time: the next server
                break
            if attempt == ACCESS_CHECK_ATTEMPTS or time.monotonic() >= deadline:
                raise KafkaRefused(
                    f"{_sasl_failed(security)}: the broker closed the connection at login "
                    "(a wrong user name or password, or a mechanism it does not enable)"
                )


def _first_connection(server: str, security: Mapping[str, Any], timeout_ms: int) -> tuple[BaseException | None, bool]:
    """Why one connection to `server` (TLS handshake, API versions, SASL login) failed, or None;
    and whether it failed during the SASL login. kafka-python's connection layer, because its
    clients retry such failures until they time out."""
    from kafka.net.compat import KafkaNetClient

    client = KafkaNetClient(bootstrap_servers=[server], **security)
    try:
        manager = client._manager
        (broker, *_) = manager.cluster.bootstrap_brokers()
        connection = manager.get_connection(broker.node_id, timeout_ms=timeout_ms)
        client._net.poll(timeout_ms=timeout_ms, future=connection.init_future)
        if connection.init_future.succeeded():
            return None, False
        failure = connection.init_future.exception or KafkaTimeoutError("no answer in time")
        logging_in = connection.broker_version_data is not None and str(security["security_protocol"]).startswith("SASL")
        return failure, logging_in
    except KafkaError as error:
        return error, False
    finally:
        client.close()


# What OpenSSL says when the client does not trust the broker's certificate -> what it means
_UNTRUSTED_BROKER = (
    (
        ("unable to get local issuer", "self-signed", "self signed", "unknown ca"),
        "is not signed by a CA the client trusts (its CA file)",
    ),
    (("hostname mismatch", "ip address mismatch"), "does not name the address the client connected to"),
    (("certificate has expired",), "has expired"),
)
# TLS alerts a broker sends when it does not accept the client's certificate (or got none)
_REFUSED_CLIENT = ("ALERT_CERTIFICATE_UNKNOWN", "ALERT_BAD_CERTIFICATE", "ALERT_UNKNOWN_CA", "CERTIFICATE_REQUIRED")


def refusal_cause(failure: BaseException, security: Mapping[str, Any]) -> str | None:
    """The cause of a refused connection in a few words (no secret, no host), or None when
    `failure` is no refusal (nobody listening, a timeout)."""
    if isinstance(failure, SaslAuthenticationFailedError):
        return f"{_sasl_failed(security)}: wrong user name or password"
    if isinstance(failure, UnsupportedSaslMechanismError):
        return f"{_sasl_failed(security)}: the broker does not offer this mechanism"
    text = str(failure)
    if "CERTIFICATE_VERIFY_FAILED" in text:
        lowered = text.lower()
        why = next((means for signs, means in _UNTRUSTED_BROKER if any(sign in lowered for sign in signs)), "failed verification")
        return f"TLS handshake failed: certificate not trusted: the broker's certificate {why}"
    if any(alert in text for alert in _REFUSED_CLIENT):
        if not security.get("ssl_certfile"):
            return "TLS handshake failed: the broker requires a client certificate and the client has none"
        return "TLS handshake failed: certificate not trusted: the broker does not trust the client's certificate"
    return None


def _sasl_failed(security: Mapping[str, Any]) -> str:
    return (
        f"SASL authentication failed for user {security.get('sasl_plain_username')} ({security.get('sasl_mechanism', 'PLAIN')})"
    )


def authorization_cause(error: AuthorizationError, *, topic: str, group: str | None = None, write: bool = False) -> str:
    """A missing ACL in a few words: which operation on which resource."""
    if isinstance(error, GroupAuthorizationFailedError):
        return f"not authorized to use consumer group {group}"
    if isinstance(error, TopicAuthorizationFailedError):
        return f"not authorized to {'write to' if write else 'read'} topic {topic}"
    return f"not authorized: {type(error).__name__}"


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
        security: Mapping[str, Any] | None = None,
        end_offsets_every_seconds: float = END_OFFSETS_EVERY_SECONDS,
    ) -> None:
        self.topic, self.group = topic, group
        self._revoke_callbacks: list[Callable[[], object]] = [self._forget_read_offsets]
        self._next_offsets: dict[tuple[str, int], int] = {}
        self._refused: str | None = None
        self._end_offsets_every = end_offsets_every_seconds
        self._end_offsets: dict[tuple[str, int], int] = {}
        self._positions: dict[tuple[str, int], int] = {}
        self._end_offsets_due = 0.0
        self._end_offsets_of: tuple[TopicPartition, ...] = ()
        check_access(bootstrap_servers, security or {}, bootstrap_timeout_ms)
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
                **(security or {}),
            )
        except KafkaError:
            raise BrokerUnavailable(f"no Kafka broker answers at {bootstrap_servers}") from None
        self._consumer.subscribe([topic], listener=_RevokeListener(self._revoke_callbacks))

    def on_revoke(self, callback: Callable[[], object]) -> None:
        """Call `callback` (inside `poll`) before partitions are taken away by a rebalance."""
        self._revoke_callbacks.append(callback)

    def state(self) -> SourceState:
        """Assigned partitions, lag per partition (end offset minus the next offset to read, for
        every assigned partition whose offsets are known), whether the group coordinator answers,
        and why the broker refuses to let this member read, if it does."""
        assigned = tuple(sorted(self._consumer.assignment(), key=lambda tp: (tp.topic, tp.partition)))
        if assigned != self._end_offsets_of or time.monotonic() >= self._end_offsets_due:
            self._look_up_end_offsets(assigned)
        lag: dict[tuple[str, int], int] = {}
        for topic_partition in assigned:
            key = (topic_partition.topic, topic_partition.partition)
            # the last fetch's high watermark may be newer than the last lookup
            end = max(self._end_offsets.get(key, -1), self._consumer.highwater(topic_partition) or -1)
            position = self._next_offsets.get(key, self._positions.get(key))
            if end >= 0 and position is not None:
                lag[key] = max(0, end - position)
        return SourceState(
            assigned=tuple((tp.topic, tp.partition) for tp in assigned),
            lag=lag,
            # a refusal is an answer: the broker is there (kafka-python knows no coordinator then)
            broker_reachable=self._refused is not None or not self._consumer._coordinator.coordinator_unknown(),
            refused=self._refused,
        )

    def _look_up_end_offsets(self, assigned: tuple[TopicPartition, ...]) -> None:
        """End offsets of the assigned partitions, and the positions of those nothing was read from
        yet (their committed offset, or where the reset policy starts), within one bounded wait."""
        self._end_offsets_of, self._end_offsets_due = assigned, time.monotonic() + self._end_offsets_every
        if not assigned:
            return
        deadline = time.monotonic() + END_OFFSETS_TIMEOUT_MS / 1000
        try:
            ends = self._consumer.end_offsets(list(assigned), timeout_ms=END_OFFSETS_TIMEOUT_MS)
            self._end_offsets = {(tp.topic, tp.partition): offset for tp, offset in ends.items()}
            for topic_partition in assigned:
                key = (topic_partition.topic, topic_partition.partition)
                left_ms = int((deadline - time.monotonic()) * 1000)
                if key not in self._next_offsets and left_ms > 0:
                    position = self._consumer.position(topic_partition, timeout_ms=left_ms)
                    if position is not None:
                        self._positions[key] = position
        except KafkaError as error:  # the lag stays as last known; the next lookup tries again
            log.debug("end offsets not known this time: %r", error)

    def _forget_read_offsets(self) -> None:
        """Before a rebalance: a partition that comes back may have been read by another member."""
        self._next_offsets.clear()
        self._positions.clear()

    def poll(self, timeout_ms: int) -> list[Record]:
        """The next records; none while the broker refuses this member the group or the topic (the
        refusal is logged once and reported by `state`)."""
        try:
            batches = self._consumer.poll(timeout_ms=timeout_ms)
        except AuthorizationError as error:
            self._refusing(authorization_cause(error, topic=self.topic, group=self.group))
            time.sleep(timeout_ms / 1000)  # kafka-python refuses at once: do not spin
            return []
        # Without DESCRIBE on the topic the broker hides it: kafka-python then sees no partitions, and
        # would look again only when its metadata expires, so ask for it at each poll meanwhile.
        cluster = self._consumer._client.cluster
        unauthorized = self.topic in cluster.unauthorized_topics
        if unauthorized:
            cluster.request_update()
        self._refusing(f"not authorized to read topic {self.topic}" if unauthorized else None)
        records = [
            Record(message.topic, message.partition, message.offset, message.value)
            for partition_records in batches.values()
            for message in partition_records
        ]
        for record in records:
            self._next_offsets[(record.topic, record.partition)] = record.offset + 1
        return sorted(records, key=lambda record: (record.topic, record.partition, record.offset))

    def _refusing(self, cause: str | None) -> None:
        if cause == self._refused:
            return
        if cause is not None:
            log.error("Kafka refuses consumer group %s: %s; nothing is read or committed until it is allowed", self.group, cause)
        else:
            log.info("Kafka allows consumer group %s to read topic %s again", self.group, self.topic)
        self._refused = cause

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


class _TopicProducer:
    """A kafka-python producer for one topic: acknowledged by all replicas, one request in flight
    (a key's messages land in the order sent, even across retries), with the consumer's security
    settings (consumer.ingest.kafka_security) and the subclass's `settings`. `flush` raises
    BrokerUnavailable (KafkaRefused for a missing ACL) unless every record sent was acknowledged."""

    settings: ClassVar[dict[str, Any]] = {}
    what = "topic"

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        bootstrap_timeout_ms: int = BOOTSTRAP_TIMEOUT_MS,
        security: Mapping[str, Any] | None = None,
    ) -> None:
        self.topic = topic
        self._pending: list[FutureRecordMetadata] = []
        check_access(bootstrap_servers, security or {}, bootstrap_timeout_ms)
        try:
            self._producer = KafkaProducer(
                bootstrap_servers=bootstrap_servers.split(","),
                acks="all",
                max_in_flight_requests_per_connection=1,
                bootstrap_timeout_ms=bootstrap_timeout_ms,
                **self.settings,
                **(security or {}),
            )
        except KafkaError:
            raise BrokerUnavailable(f"no Kafka broker answers at {bootstrap_servers}") from None

    def _send(self, key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes]] = ()) -> None:
        try:
            self._pending.append(self._producer.send(self.topic, key=key, value=value, headers=list(headers)))
        except KafkaTimeoutError as error:
            raise BrokerUnavailable(f"{self.what} {self.topic} unreachable: {error}") from None

    def _flush(self, timeout_seconds: float, passed: tuple[type[KafkaError], ...] = ()) -> None:
        """Wait until every record sent is acknowledged; records failing with one of `passed` are
        logged and let go."""
        pending, self._pending = self._pending, []
        try:
            self._producer.flush(timeout=timeout_seconds)
        except KafkaError as error:
            raise BrokerUnavailable(f"{self.what} {self.topic} unreachable: {error}") from None
        for future in pending:
            if not future.is_done:
                raise BrokerUnavailable(f"{self.what} {self.topic} did not acknowledge within {timeout_seconds} s")
            if not future.failed():
                continue
            if isinstance(future.exception, passed):
                log.error("%s %s refused a record: %s", self.what, self.topic, future.exception)
            elif isinstance(future.exception, AuthorizationError):
                raise KafkaRefused(authorization_cause(future.exception, topic=self.topic, write=True))
            else:
                raise BrokerUnavailable(f"{self.what} {self.topic} did not take a record: {future.exception!r}")


class DeadLetters(_TopicProducer):
    """Produces rejected events to the dead-letter topic; `flush` before committing offsets.
    Values above `max_value_bytes` must be cut by the caller (kafka-python's request limit)."""

    max_value_bytes = DEAD_LETTER_VALUE_BYTES
    settings: ClassVar[dict[str, Any]] = {"linger_ms": 5, "max_request_size": DEAD_LETTER_REQUEST_BYTES}
    what = "dead-letter topic"

    def send(self, value: bytes | None, headers: Sequence[tuple[str, bytes]], key: bytes | None = None) -> None:
        """`key`: the source topic/partition, so one partition's rejects stay in order. ValueError
        when this record is refused; BrokerUnavailable when the topic cannot be reached."""
        try:
            self._send(key, value, headers)
        except MessageSizeTooLargeError as error:
            raise ValueError(f"too large for the dead-letter producer: {error}") from None

    def flush(self, timeout_seconds: float = 30.0) -> None:
        """Wait until every record sent is acknowledged: BrokerUnavailable if one was not, so the
        caller does not commit offsets of records whose dead letter was lost."""
        self._flush(timeout_seconds, passed=(MessageSizeTooLargeError, RecordListTooLargeError))

    def close(self) -> None:
        self._producer.close(timeout=10)


class ChangeMessages(_TopicProducer):
    """Produces keyed lineage-change messages (consumer.ingest.change_publishing) to the changes
    topic; `flush` raises BrokerUnavailable when they could not all be written."""

    settings: ClassVar[dict[str, Any]] = {"linger_ms": 20}
    what = "changes topic"

    def send(self, key: bytes, value: bytes) -> None:
        self._send(key, value)

    def flush(self, timeout_seconds: float = 30.0) -> None:
        self._flush(timeout_seconds, passed=(MessageSizeTooLargeError, RecordListTooLargeError))

    def close(self) -> None:
        """Close, dropping what the topic did not acknowledge (it is still in the outbox)."""
        try:
            self._producer.close(timeout=10)
        except KafkaError as error:
            log.warning("changes producer closed with messages unacknowledged (kept in the outbox): %s", error)


@attrs.frozen
class TopicSpec:
    name: str
    partitions: int
    compacted: bool = False  # cleanup.policy=compact: the latest message per key is kept


def create_topics(
    bootstrap_servers: str,
    topics: Sequence[TopicSpec],
    replication_factor: int,
    bootstrap_timeout_ms: int = BOOTSTRAP_TIMEOUT_MS,
    security: Mapping[str, Any] | None = None,
) -> list[str]:
    """Create each topic that does not exist yet; one line per topic saying what was done (an
    existing topic is left as it is: its partition count is reported, never changed)."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    check_access(bootstrap_servers, security or {}, bootstrap_timeout_ms)
    try:
        admin = KafkaAdminClient(
            bootstrap_servers=bootstrap_servers.split(","), bootstrap_timeout_ms=bootstrap_timeout_ms, **(security or {})
        )
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
        _await_partitions(admin, [topic.name for topic in topics], TOPIC_READY_TIMEOUT_S)
    finally:
        admin.close()
    return lines


def _await_partitions(admin: Any, names: Sequence[str], timeout_s: float) -> None:
    """Return once every topic is described with its partitions: a broker acknowledges a creation
    before its metadata shows the partitions, and a topic said to be created should be usable."""
    deadline = time.monotonic() + timeout_s
    while True:
        pending = [topic["name"] for topic in admin.describe_topics(list(names)) if not topic["partitions"]]
        if not pending:
            return
        if time.monotonic() > deadline:
            raise BrokerUnavailable(f"topics created but their partitions not yet known to the broker: {', '.join(pending)}")
        time.sleep(0.1)
