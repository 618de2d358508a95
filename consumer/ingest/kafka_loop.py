"""Ingestion: records -> validated, materialized, folded events -> one store transaction per
batch -> offsets committed. At-least-once delivery made exactly-once in effect by idempotent writes.

Batches are pipelined: while batch k is in its store transaction (on the store thread), batch
k+1 is polled and prepared (decoded, validated, materialized and folded: consumer.ingest.prepare, in a
worker process unless told otherwise); never more than one batch ahead. Offsets are committed in
poll order, each only after the transaction holding its records committed.

A bad record (too large, not JSON, invalid, or failing to store) never stops the loop: it goes
to the dead-letter topic with the reason and its source topic/partition/offset in headers (its
body cut to what the dead-letter producer can send, with the original size in a header), and
the rest of its batch is stored (a failing batch is split until the culprit is alone)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from typing import Any, Protocol

import attrs
from sqlalchemy.exc import DBAPIError, DisconnectionError, IntegrityError, InterfaceError, OperationalError

from consumer.ingest.materialize import EventRows
from consumer.ingest.prepare import STORE_REJECTED, Prepared, Preparer, good_events
from consumer.ingest.store_writes import StoredBatch, StoreWrites, batch_observer
from consumer.store import Store
from consumer.store.rows import Folded

log = logging.getLogger(__name__)

REASON_HEADER = "lineage.error.reason"
REASON_CLASS_HEADER = "lineage.error.class"
TOPIC_HEADER = "lineage.source.topic"
PARTITION_HEADER = "lineage.source.partition"
OFFSET_HEADER = "lineage.source.offset"
ORIGINAL_SIZE_HEADER = "lineage.source.size"
TRUNCATED_HEADER = "lineage.error.truncated"

DEFAULT_MAX_EVENT_BYTES = 4 * 1024 * 1024
IN_FLIGHT_POLL_MS = 50
# Retention works at most this long between two batches (then goes on after the next one).
PRUNE_STEP_SECONDS = 1.0


class RecordLike(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def value(self) -> bytes | None: ...


@attrs.frozen
class SourceState:
    """What the event source knows about itself after a poll. `lag`: records between the next
    offset to read and the partition's end, per assigned partition whose offsets are known;
    `refused`: why the broker refuses to let this member read (a missing ACL), if it does."""

    assigned: tuple[tuple[str, int], ...] = ()
    lag: dict[tuple[str, int], int] = attrs.Factory(dict)
    broker_reachable: bool = True
    refused: str | None = None


class Source(Protocol):
    def poll(self, timeout_ms: int) -> Sequence[RecordLike]: ...
    def commit(self, next_offsets: dict[tuple[str, int], int]) -> bool: ...
    def rewind(self, first_offsets: dict[tuple[str, int], int]) -> None: ...
    def on_revoke(self, callback: Callable[[], object]) -> None: ...
    def state(self) -> SourceState: ...


class DeadLetterSink(Protocol):
    """`send` raises ValueError when the sink refuses this one record (logged and passed), anything
    else when the sink is unreachable (the batch is then read again)."""

    max_value_bytes: int

    def send(self, value: bytes | None, headers: Sequence[tuple[str, bytes]], key: bytes | None = None) -> None: ...
    def flush(self, timeout_seconds: float = ...) -> None: ...


class IngestMetrics(Protocol):
    def batch_stored(self, batch: StoredBatch) -> None: ...
    def dead_lettered(self, reason_class: str) -> None: ...
    def source_state(self, state: SourceState) -> None: ...
    def pruned(self, rows: Mapping[str, int]) -> None: ...


class NoMetrics:
    def batch_stored(self, batch: StoredBatch) -> None:
        pass

    def pruned(self, rows: Mapping[str, int]) -> None:
        pass

    def dead_lettered(self, reason_class: str) -> None:
        pass

    def source_state(self, state: SourceState) -> None:
        pass


@attrs.define
class IngestStats:
    records: int = 0
    stored: int = 0
    duplicates: int = 0
    dead_lettered: int = 0
    batches: int = 0


@attrs.frozen
class Rejected:
    record: RecordLike
    reason_class: str
    reason: str


@attrs.frozen
class PolledBatch:
    """A polled batch, prepared: ready for its store transaction."""

    records: Sequence[RecordLike]
    prepared: Prepared

    def rejected(self) -> list[Rejected]:
        return [
            Rejected(self.records[position], refused.reason_class, refused.reason)
            for position, refused in self.prepared.refused.items()
        ]

    def events(self) -> list[EventRows]:
        return good_events([record.value for record in self.records], self.prepared)

    def items(self) -> list[tuple[RecordLike, EventRows]]:
        good = [record for position, record in enumerate(self.records) if position not in self.prepared.refused]
        return list(zip(good, self.events(), strict=True))


class Writer(Protocol):  # consumer.ingest.store_writes.StoreWrites
    def write(self, batch: Sequence[EventRows]) -> int: ...
    def write_folded(self, folded: Folded, events: Callable[[], Sequence[EventRows]]) -> int: ...


def _is_transient(error: DBAPIError) -> bool:
    return isinstance(error, (OperationalError, InterfaceError, DisconnectionError)) or bool(error.connection_invalidated)


def _attempt(write: Callable[[], int]) -> int | Exception:
    """The events stored by `write`, or why the database (or the writer) refused them. Database
    outages are re-raised: nothing is dead-lettered for them."""
    for attempt in range(2):
        try:
            return write()
        except DBAPIError as error:
            if _is_transient(error):
                raise
            # An IntegrityError is usually a concurrent consumer inserting the same key: retry once.
            if isinstance(error, IntegrityError) and attempt == 0:
                continue
            return error
        except Exception as error:  # noqa: BLE001 - a materialization bug must not stop the consumer either
            return error
    raise AssertionError("unreachable")


def store_polled(store: Writer, batch: PolledBatch) -> tuple[int, list[tuple[RecordLike, str]]]:
    """Store a prepared batch in one transaction; if that fails, find the events that fail."""
    folded = batch.prepared.folded
    if folded is None:
        return write_isolating(store, batch.items())
    outcome = _attempt(lambda: store.write_folded(folded, batch.events))
    if isinstance(outcome, int):
        return outcome, []
    return write_isolating(store, batch.items(), whole_failed=outcome)


def write_isolating(
    store: Writer, items: Sequence[tuple[Any, EventRows]], whole_failed: Exception | None = None
) -> tuple[int, list[tuple[Any, str]]]:
    """Store `items` ((tag, rows) pairs) in as few transactions as possible; a batch that fails
    (or `whole_failed` already did) is split in halves until each failing event is alone.
    (stored count, [(tag, reason)] failed). Database outages are re-raised."""
    if not items:
        return 0, []
    failure = whole_failed
    if failure is None:
        outcome = _attempt(lambda: store.write([rows for _, rows in items]))
        if isinstance(outcome, int):
            return outcome, []
        failure = outcome
    if len(items) == 1:
        cause = getattr(failure, "orig", None) or failure
        return 0, [
            (items[0][0], f"store rejected the event: {type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}")
        ]
    middle = len(items) // 2
    stored_left, failed_left = write_isolating(store, items[:middle])
    stored_right, failed_right = write_isolating(store, items[middle:])
    return stored_left + stored_right, failed_left + failed_right


class Ingestor:
    """One consumer-group member's loop: poll, prepare, store (one batch in flight on the store
    thread), dead-letter, commit."""

    def __init__(
        self,
        store: Store | StoreWrites,
        source: Source,
        dead_letters: DeadLetterSink,
        *,
        poll_timeout_ms: int = 1000,
        retire_after: timedelta | None = None,
        retention: timedelta | None = None,
        sweep_every_seconds: float = 60.0,
        retry_backoff_seconds: float = 5.0,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        metrics: IngestMetrics | None = None,
        preparer: Preparer | None = None,
    ) -> None:
        writes = store if isinstance(store, StoreWrites) else StoreWrites(store)
        self.source = source
        self.dead_letters = dead_letters
        self.poll_timeout_ms = poll_timeout_ms
        self.retire_after = retire_after
        self.retention = retention
        self.sweep_every_seconds = sweep_every_seconds
        self.retry_backoff_seconds = retry_backoff_seconds
        self.max_event_bytes = max_event_bytes
        self.metrics = metrics or NoMetrics()
        self.preparer = preparer or Preparer(max_event_bytes)
        # every committed batch reaches the metrics, inside the other hooks (their work is not timed)
        self.writes = writes.with_hooks(batch_observer(self.metrics.batch_stored))
        self.stats = IngestStats()
        self._last_sweep = 0.0
        self._last_prune = 0.0
        self._prune_resume_at: tuple[int, Any] | None = None
        self._store_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store")
        self._in_flight: tuple[PolledBatch, Future[tuple[int, list[tuple[RecordLike, str]]]]] | None = None
        self._to_reread: list[RecordLike] = []
        source.on_revoke(self.finish_in_flight)

    def run(self, should_stop: Callable[[], bool] = lambda: False) -> IngestStats:
        try:
            while not should_stop():
                self.run_once()
        finally:
            self.close()
        return self.stats

    def run_once(self) -> int:
        """Poll and prepare the next batch while the previous one is being stored, then finish the
        previous one and hand this one to the store thread. The number of records polled."""
        # With a batch in flight, wait little for the next one: an idle topic must not delay its commit.
        records = self.source.poll(self.poll_timeout_ms if self._in_flight is None else IN_FLIGHT_POLL_MS)
        dictionary = self.writes.raw_dictionary()
        preparing = self.preparer.submit([record.value for record in records], dictionary) if records else None
        self.finish_in_flight()
        batch = PolledBatch(records, preparing()) if preparing else None
        if self._to_reread:
            self._reread(list(batch.records) if batch else [])
        elif batch is not None:
            self._in_flight = (batch, self._store_thread.submit(store_polled, self.writes, batch))
            if dictionary is None:
                self._store_thread.submit(self.writes.train_raw_dictionary)  # after the batch: not waited for
        self.metrics.source_state(self.source.state())
        self._maybe_sweep()
        self._maybe_prune()
        return len(records)

    def finish_in_flight(self) -> bool:
        """Wait for the batch in its store transaction, dead-letter its rejects, commit its offsets.
        On a database or dead-letter outage nothing is committed, its records are remembered to be
        read again, and False returned. Also called by the source before a rebalance takes
        partitions away, so what was stored is committed while this member still owns them."""
        if self._in_flight is None:
            return True
        batch, future = self._in_flight
        self._in_flight = None
        try:
            stored, failed = future.result()
        except DBAPIError as error:  # write_isolating re-raises outages only
            return self._unavailable(batch, "store", str(error.orig or error))
        rejected = batch.rejected() + [Rejected(record, STORE_REJECTED, reason) for record, reason in failed]
        try:
            for item in sorted(rejected, key=lambda item: (item.record.partition, item.record.offset)):
                self._dead_letter(item)
            self.dead_letters.flush()
        except Exception as error:  # noqa: BLE001 - refusals of one record are handled in _dead_letter: this is an outage
            return self._unavailable(batch, "dead-letter topic", str(error))
        self.source.commit(_next_offsets(batch.records))
        self.stats.records += len(batch.records)
        self.stats.stored += stored
        self.stats.duplicates += len(batch.records) - len(batch.prepared.refused) - len(failed) - stored
        self.stats.dead_lettered += len(rejected)
        self.stats.batches += 1
        return True

    def close(self) -> None:
        """Finish the batch in flight (commit it if it was stored); a batch only prepared is dropped
        uncommitted and read again by whoever owns its partitions next."""
        try:
            self.finish_in_flight()
        finally:
            self._store_thread.shutdown(wait=True)
            self.preparer.close()

    def _unavailable(self, batch: PolledBatch, what: str, cause: str) -> bool:
        log.error("%s unavailable, will read the batch again: %s", what, cause.splitlines()[0] if cause else "")
        self._to_reread = list(batch.records)
        return False

    def _reread(self, polled_since: list[RecordLike]) -> None:
        self.source.rewind(_first_offsets(self._to_reread + polled_since))
        self._to_reread = []
        time.sleep(self.retry_backoff_seconds)

    def _dead_letter(self, item: Rejected) -> None:
        record = item.record
        log.warning("dead-lettering %s[%d]@%d: %s", record.topic, record.partition, record.offset, item.reason[:500])
        headers = [
            (REASON_HEADER, item.reason.encode()[:4096]),
            (REASON_CLASS_HEADER, item.reason_class.encode()),
            (TOPIC_HEADER, record.topic.encode()),
            (PARTITION_HEADER, str(record.partition).encode()),
            (OFFSET_HEADER, str(record.offset).encode()),
        ]
        value = record.value
        if value is not None and len(value) > self.dead_letters.max_value_bytes:
            # The producer cannot send it whole: keep its head, say how large it was.
            headers += [(ORIGINAL_SIZE_HEADER, str(len(value)).encode()), (TRUNCATED_HEADER, b"true")]
            value = value[: self.dead_letters.max_value_bytes]
        try:
            self.dead_letters.send(value, headers, key=f"{record.topic}/{record.partition}".encode())
        except ValueError as error:
            log.error("dead-letter topic refused %s[%d]@%d, passing it: %s", record.topic, record.partition, record.offset, error)
        self.metrics.dead_lettered(item.reason_class)

    def _maybe_sweep(self) -> None:
        if self.retire_after is None or time.monotonic() - self._last_sweep < self.sweep_every_seconds:
            return
        self._last_sweep = time.monotonic()
        try:
            retired = self._store_thread.submit(self.writes.retire_stale_jobs, self.retire_after).result()
        except DBAPIError as error:
            log.error("store unavailable, stale jobs not retired this time: %s", str(error.orig or error).splitlines()[0])
            return
        if retired:
            log.info("retired the table lineage of %d jobs: %s", len(retired), ", ".join(sorted(retired)[:10]))

    def _maybe_prune(self) -> None:
        """Retention: every `sweep_every_seconds`, and between batches while an earlier prune is
        unfinished, at most PRUNE_STEP_SECONDS of pruning (its transactions are short: ingestion
        waits for one at most)."""
        if self.retention is None:
            return
        if self._prune_resume_at is None and time.monotonic() - self._last_prune < self.sweep_every_seconds:
            return
        self._last_prune = time.monotonic()
        try:
            pruned = self._store_thread.submit(
                self.writes.prune, self.retention, budget_seconds=PRUNE_STEP_SECONDS, resume_at=self._prune_resume_at
            ).result()
        except DBAPIError as error:
            log.error("store unavailable, nothing pruned this time: %s", str(error.orig or error).splitlines()[0])
            return
        self._prune_resume_at = pruned.resume_at
        self.metrics.pruned(pruned.rows)
        if pruned.total:
            log.info(
                "retention removed %d rows older than %s: %s",
                pruned.total,
                self.retention,
                ", ".join(f"{table} {count}" for table, count in pruned.rows.items() if count),
            )


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
