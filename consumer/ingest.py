"""Ingestion: records -> validated, materialized events -> one store transaction per batch ->
offsets committed. At-least-once delivery made exactly-once in effect by idempotent writes.

A bad record (not JSON, invalid, or failing to store) never stops the loop: it goes to the
dead-letter topic with the reason and its source topic/partition/offset in headers, and the
rest of its batch is stored (a failing batch is split until the culprit is alone)."""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any, Callable, Iterable, Protocol, Sequence

import attrs
from sqlalchemy.exc import DBAPIError, DisconnectionError, IntegrityError, InterfaceError, OperationalError

from consumer.events import InvalidEvent, decode, validate
from consumer.materialize import EventRows, materialize
from consumer.store import Store

log = logging.getLogger(__name__)

REASON_HEADER = "lineage.error.reason"
TOPIC_HEADER = "lineage.source.topic"
PARTITION_HEADER = "lineage.source.partition"
OFFSET_HEADER = "lineage.source.offset"


class RecordLike(Protocol):
    topic: str
    partition: int
    offset: int
    value: bytes | None


class Source(Protocol):
    def poll(self, timeout_ms: int) -> Sequence[RecordLike]: ...
    def commit(self, next_offsets: dict[tuple[str, int], int]) -> bool: ...
    def rewind(self, first_offsets: dict[tuple[str, int], int]) -> None: ...


class DeadLetterSink(Protocol):
    def send(self, value: bytes | None, headers: Sequence[tuple[str, bytes]], key: bytes | None = None) -> None: ...
    def flush(self, timeout_seconds: float = ...) -> None: ...


@attrs.define
class IngestStats:
    records: int = 0
    stored: int = 0
    duplicates: int = 0
    dead_lettered: int = 0
    batches: int = 0


def prepare(value: Any) -> EventRows:
    """Raw bytes/str or an already decoded event -> rows; raises InvalidEvent."""
    if isinstance(value, bytes):
        try:
            value = value.decode()
        except UnicodeDecodeError as error:
            raise InvalidEvent("", f"not JSON: not UTF-8 ({error})") from None
    if isinstance(value, str):
        return materialize(validate(decode(value)), raw_text=value)
    return materialize(validate(value))


def _is_transient(error: DBAPIError) -> bool:
    return isinstance(error, (OperationalError, InterfaceError, DisconnectionError)) or bool(error.connection_invalidated)


def write_isolating(store: Store, items: Sequence[tuple[Any, EventRows]]) -> tuple[int, list[tuple[Any, str]]]:
    """Store `items` ((tag, rows) pairs) in as few transactions as possible; a batch that fails
    is split in halves until each failing event is alone. (stored count, [(tag, reason)] failed).
    Database outages are re-raised: nothing is dead-lettered for them."""
    if not items:
        return 0, []
    failure: Exception | None = None
    for attempt in range(2):
        try:
            return store.write([rows for _, rows in items]), []
        except DBAPIError as error:
            if _is_transient(error):
                raise
            # An IntegrityError is usually a concurrent consumer inserting the same key: retry once.
            if isinstance(error, IntegrityError) and attempt == 0:
                continue
            failure = error
            break
        except Exception as error:  # a materialization bug must not stop the consumer either
            failure = error
            break
    if len(items) == 1:
        cause = getattr(failure, "orig", None) or failure
        return 0, [(items[0][0], f"store rejected the event: {type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}")]
    middle = len(items) // 2
    stored_left, failed_left = write_isolating(store, items[:middle])
    stored_right, failed_right = write_isolating(store, items[middle:])
    return stored_left + stored_right, failed_left + failed_right


class Ingestor:
    """One consumer-group member's loop: poll, store, dead-letter, commit."""

    def __init__(self, store: Store, source: Source, dead_letters: DeadLetterSink, *,
                 poll_timeout_ms: int = 1000, retire_after: timedelta | None = None,
                 sweep_every_seconds: float = 60.0, retry_backoff_seconds: float = 5.0) -> None:
        self.store = store
        self.source = source
        self.dead_letters = dead_letters
        self.poll_timeout_ms = poll_timeout_ms
        self.retire_after = retire_after
        self.sweep_every_seconds = sweep_every_seconds
        self.retry_backoff_seconds = retry_backoff_seconds
        self.stats = IngestStats()
        self._last_sweep = 0.0

    def run(self, should_stop: Callable[[], bool] = lambda: False) -> IngestStats:
        while not should_stop():
            self.run_once()
        return self.stats

    def run_once(self) -> int:
        """Poll once and handle what arrived; the number of records handled."""
        records = self.source.poll(self.poll_timeout_ms)
        if records:
            self.handle(records)
        self._maybe_sweep()
        return len(records)

    def handle(self, records: Sequence[RecordLike]) -> bool:
        """Store a polled batch, dead-letter what cannot be stored, then commit. On a database
        outage nothing is committed, the source is rewound to the batch and False returned."""
        good: list[tuple[RecordLike, EventRows]] = []
        rejected: list[tuple[RecordLike, str]] = []
        for record in records:
            try:
                good.append((record, prepare(record.value if record.value is not None else b"")))
            except InvalidEvent as error:
                rejected.append((record, f"invalid event: {error}"))
            except Exception as error:  # materialization bug: keep the event, keep going
                rejected.append((record, f"cannot materialize: {type(error).__name__}: {error}"))
        try:
            stored, failed = write_isolating(self.store, good)
        except DBAPIError as error:
            log.error("store unavailable, will retry the batch: %s", str(error.orig or error).splitlines()[0])
            self.source.rewind(_first_offsets(records))
            time.sleep(self.retry_backoff_seconds)
            return False
        for record, reason in sorted(rejected + failed, key=lambda item: (item[0].partition, item[0].offset)):
            self._dead_letter(record, reason)
        self.dead_letters.flush()
        self.source.commit(_next_offsets(records))
        self.stats.records += len(records)
        self.stats.stored += stored
        self.stats.duplicates += len(good) - len(failed) - stored
        self.stats.batches += 1
        return True

    def _dead_letter(self, record: RecordLike, reason: str) -> None:
        log.warning("dead-lettering %s[%d]@%d: %s", record.topic, record.partition, record.offset, reason)
        self.dead_letters.send(record.value, [
            (REASON_HEADER, reason.encode()),
            (TOPIC_HEADER, record.topic.encode()),
            (PARTITION_HEADER, str(record.partition).encode()),
            (OFFSET_HEADER, str(record.offset).encode()),
        ], key=f"{record.topic}/{record.partition}".encode())
        self.stats.dead_lettered += 1

    def _maybe_sweep(self) -> None:
        if self.retire_after is None or time.monotonic() - self._last_sweep < self.sweep_every_seconds:
            return
        self._last_sweep = time.monotonic()
        retired = self.store.retire_stale_jobs(self.retire_after)
        if retired:
            log.info("retired the table lineage of %d jobs: %s", len(retired), ", ".join(sorted(retired)[:10]))


def _first_offsets(records: Iterable[RecordLike]) -> dict[tuple[str, int], int]:
    offsets: dict[tuple[str, int], int] = {}
    for record in records:
        key = (record.topic, record.partition)
        offsets[key] = min(offsets.get(key, record.offset), record.offset)
    return offsets


def _next_offsets(records: Iterable[RecordLike]) -> dict[tuple[str, int], int]:
    offsets: dict[tuple[str, int], int] = {}
    for record in records:
        key = (record.topic, record.partition)
        offsets[key] = max(offsets.get(key, 0), record.offset + 1)
    return offsets
