"""The background sender: the only thread that talks to the broker.

``submit`` (called by ``emit`` on the Spark thread) only puts the event on a bounded
queue; when the queue is full the record goes straight to the spool — never blocking,
never dropping silently. The sender thread serializes, connects lazily (a broker that is
not there must cost the job nothing), sends, and watches deliveries:

* while the spool holds records (left by a previous application, or written because the
  broker was down, slow or the queue full), live events are appended to the spool too and
  the spool is delivered oldest first, so per-key order survives an outage;
* a record whose delivery fails is spooled; a record that was acknowledged is never
  spooled (at-least-once, but no duplicates on the clean path);
* ``close(timeout)`` delivers what it can until the deadline and spools the rest; if the
  thread is stuck in a network call, the closing thread spools the leftovers itself.

It knows the broker only through :class:`Sink` (records in, deliveries out), so the
Kafka client library stays in ``kafka.py``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Protocol

import attrs

from emitter.transports.records import Pending, Record
from emitter.transports.spool import Spool

log = logging.getLogger(__name__)

QUEUE_POLL_SECONDS = 0.05
JOIN_GRACE_SECONDS = 0.25
PERSIST_WAIT_SECONDS = 120.0  # writing leftovers to disk is not optional; this only guards against a hang


class Delivery(Protocol):
    def done(self) -> bool: ...

    def error(self) -> BaseException | None: ...


class Sink(Protocol):
    def send(self, record: Record) -> Delivery: ...

    def flush(self, timeout_seconds: float) -> None: ...

    def close(self) -> None: ...

    def rejects(self, error: BaseException) -> bool:
        """True when `error` means the broker will never take this record (too large, invalid)."""
        ...


@attrs.frozen
class SenderSettings:
    queue_size: int = 1000
    flush_timeout_seconds: float = 10.0
    reconnect_backoff_seconds: tuple[float, float] = (0.2, 5.0)
    spool_rescan_seconds: float = 5.0
    drain_batch_size: int = 200
    drain_ack_timeout_seconds: float = 15.0


@attrs.define
class _Backoff:
    low: float
    high: float
    current: float = 0.0

    def next(self) -> float:
        self.current = min(self.high, self.current * 2) if self.current else self.low
        return self.current

    def reset(self) -> None:
        self.current = 0.0


@attrs.define
class _InFlight:
    record: Record
    delivery: Delivery


class BackgroundSender:
    """Owns the queue, the sink and the spool; see the module docstring."""

    def __init__(self, connect: Callable[[], Sink], spool: Spool, settings: SenderSettings, name: str) -> None:
        self.spool = spool
        self._connect = connect
        self._settings = settings
        self._queue: queue.Queue[Pending] = queue.Queue(maxsize=settings.queue_size)
        self._lock = threading.Lock()
        self._in_flight: list[_InFlight] = []
        self._current: Record | None = None
        self._in_hand: Pending | None = None  # taken from the queue, not yet spooled or in flight
        self._sink: Sink | None = None
        self._backoff = _Backoff(*settings.reconnect_backoff_seconds)
        self._spool_has_records = not spool.is_empty()
        self._last_spool_scan = time.monotonic()
        self._stopping = threading.Event()
        self._persisted = threading.Event()
        self._deadline = float("inf")
        self._abandoned = False
        self._closed = False
        self._all_delivered = False
        self.queue_overflows = 0
        self.rejected = 0
        self._told: str | None = None  # the cause of the last failure logged as a warning
        self._connect_attempted = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    # -- caller side ---------------------------------------------------------------------

    def submit(self, pending: Pending) -> None:
        """Never blocks: queue the event, or spool it when the queue is full or we are closed."""
        if not self._closed:
            try:
                self._queue.put_nowait(pending)
                return
            except queue.Full:
                self._log_queue_full()
        else:
            log.warning("Lineage transport already closed; spooling the event to %s", self.spool.directory)
        # only this event: the queued (older) ones reach the spool before it is drained, and
        # the spool orders by sequence number, so order holds without more work on this thread
        record = self._serialize(pending)
        if record is not None:
            with self._lock:
                self._spool_record(record)

    def close(self, timeout_seconds: float | None) -> bool:
        """Deliver until the bound, spool the rest; True when nothing was left undelivered."""
        if self._closed:
            return self._all_delivered
        bound = self._settings.flush_timeout_seconds if timeout_seconds is None or timeout_seconds < 0 else timeout_seconds
        self._closed = True
        self._deadline = time.monotonic() + bound
        self._stopping.set()
        self._thread.join(bound + JOIN_GRACE_SECONDS)
        if self._thread.is_alive():
            self._abandon()
        return self._all_delivered

    # -- sender thread -------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                self._step()
            self._finish()
        except Exception:
            log.exception("Lineage sender failed; spooling what is left")
            self._abandon()

    def _step(self) -> None:
        if self._sink is None and self._connect_attempted:
            self._spool_queued()  # the broker was unreachable: persist before blocking in another attempt
        sink = self._sink or self._try_connect()
        if sink is None:
            self._spool_queued()
            self._stopping.wait(self._backoff.next())
            return
        if self._spool_pending():
            self._spool_queued()
            if not self._drain_spool(sink):
                self._stopping.wait(self._backoff.next())
            return
        self._send_next_live(sink)

    def _try_connect(self) -> Sink | None:
        self._connect_attempted = True
        try:
            sink = self._connect()
        except Exception as error:  # noqa: BLE001 - an unreachable broker, whatever the client raises: spool and retry
            self._tell(error, "Lineage events not delivered to Kafka: %s; they wait in %s", error, self.spool.directory)
            return None
        if self._abandoned:
            _close_quietly(sink)
            return None
        self._sink = sink
        self._backoff.reset()
        return sink

    def _spool_pending(self) -> bool:
        now = time.monotonic()
        if not self._spool_has_records and now - self._last_spool_scan > self._settings.spool_rescan_seconds:
            self._last_spool_scan = now
            self._spool_has_records = not self.spool.is_empty()  # another application's leftovers
        return self._spool_has_records

    def _send_next_live(self, sink: Sink) -> None:
        try:
            pending = self._queue.get(timeout=QUEUE_POLL_SECONDS)
        except queue.Empty:
            self._reap()
            return
        with self._lock:
            self._in_hand = pending
        record = self._serialize(pending)
        sent = record is None or self._send(sink, record)
        with self._lock:
            self._in_hand = None
        if self._reap() or not sent:
            self._reset_sink()

    def _send(self, sink: Sink, record: Record) -> bool:
        with self._lock:
            self._current = record
        try:
            delivery = sink.send(record)
        except Exception as error:  # noqa: BLE001 - a send failure of any kind must not reach the job: spooled
            rejected = sink.rejects(error)
            if rejected:
                self._log_rejected(error)
            else:
                self._tell(error, "Sending a lineage event failed (%s); spooling it", error)
            with self._lock:
                self._current = None
                if not self._abandoned and not rejected:
                    self._spool_record(record)
            return rejected
        with self._lock:
            self._current = None
            self._in_flight.append(_InFlight(record, delivery))
        return True

    def _reap(self) -> int:
        """Forget acknowledged records, spool failed ones; how many failed."""
        failed: list[_InFlight] = []
        with self._lock:
            still_waiting: list[_InFlight] = []
            for sent in self._in_flight:
                error = sent.delivery.error() if sent.delivery.done() else None
                if not sent.delivery.done():
                    still_waiting.append(sent)
                elif error is None:
                    self._told = None
                elif error is not None and self._sink is not None and self._sink.rejects(error):
                    self._log_rejected(error)
                elif error is not None and not self._abandoned:
                    failed.append(sent)
                    self._spool_record(sent.record)
            self._in_flight = still_waiting
        if failed:
            error = failed[0].delivery.error()
            self._tell(error, "%d lineage event(s) not delivered (%s); spooled", len(failed), error)
        return len(failed)

    def _reset_sink(self) -> None:
        """Start over with a new producer: after a broker restart the old one may never recover."""
        sink, self._sink = self._sink, None
        if sink is not None:
            _close_quietly(sink)
        self._reap()  # the old producer's pending records failed on close: spool them

    def _spool_queued(self) -> None:
        """Move every queued event to the spool, one at a time (serialized outside the lock: it is the slow part)."""
        while not self._abandoned:
            with self._lock:
                try:
                    self._in_hand = self._queue.get_nowait()
                except queue.Empty:
                    return
            record = self._serialize(self._in_hand)
            with self._lock:
                if record is not None:
                    self._spool_record(record)
                self._in_hand = None

    def _take_queued(self) -> list[Pending]:
        taken: list[Pending] = []
        while True:
            try:
                taken.append(self._queue.get_nowait())
            except queue.Empty:
                return taken

    def _drain_spool(self, sink: Sink) -> bool:
        """Deliver the spool oldest first; True when it is empty, False to retry later."""
        with self.spool.drain_lock() as acquired:
            if not acquired:
                return False
            # The oldest record alone first: a producer fails the records it sent while its metadata
            # still said no (a topic just allowed) and may deliver those sent after, out of order.
            size = 1
            while not self._abandoned and time.monotonic() < self._deadline:
                with self._lock:
                    batch = self.spool.oldest(size)
                    if not batch:
                        self._spool_has_records = False
                        return True
                if not self._deliver_spooled(sink, batch):
                    return False
                size = self._settings.drain_batch_size
        return False

    def _deliver_spooled(self, sink: Sink, batch: list) -> bool:
        sent = []
        delivered_all = True
        for spooled in batch:
            try:
                sent.append((spooled, sink.send(spooled.record)))
            except Exception as error:  # noqa: BLE001 - a send failure of any kind must not reach the job: kept spooled
                if sink.rejects(error):  # a record the broker never takes must not block the ones after it
                    self._log_rejected(error)
                    self.spool.remove(spooled)
                    continue
                self._tell(error, "Sending spooled lineage events failed (%s); they stay in %s", error, self.spool.directory)
                delivered_all = False
                break
        self._flush(sink, min(self._settings.drain_ack_timeout_seconds, self._time_left()))
        refused: BaseException | None = None
        for spooled, delivery in sent:
            failure = delivery.error() if delivery.done() else None
            if delivery.done() and (failure is None or sink.rejects(failure)):
                if failure is not None:
                    self._log_rejected(failure)
                self.spool.remove(spooled)
            else:
                delivered_all = False
                refused = refused or failure
        if delivered_all:
            self._backoff.reset()
            self._told = None
        else:
            if refused is not None:
                self._tell(refused, "Spooled lineage events not delivered (%s); they stay in %s", refused, self.spool.directory)
            self._reset_sink()
        return delivered_all

    def _finish(self) -> None:
        """After close(): deliver what is possible until the deadline, then spool the rest."""
        if self._sink is None and not self._connect_attempted:
            self._try_connect()  # close() came before the first connection attempt
        sink = self._sink
        if sink is not None:
            if self._spool_has_records:
                self._spool_queued()
                self._drain_spool(sink)
            else:
                while time.monotonic() < self._deadline and not self._abandoned:
                    with self._lock:
                        try:
                            self._in_hand = self._queue.get_nowait()
                        except queue.Empty:
                            break
                    record = self._serialize(self._in_hand)
                    if record is not None:
                        self._send(sink, record)
                    with self._lock:
                        self._in_hand = None
            self._flush(sink, self._time_left())
            self._reap()
        self._abandon()
        if sink is not None:
            _close_quietly(sink)

    def _abandon(self) -> None:
        """Spool everything not yet acknowledged; from now on the sender thread sends nothing."""
        with self._lock:
            abandoning_elsewhere = self._abandoned
            self._abandoned = True
            if not abandoning_elsewhere:
                leftovers = [sent.record for sent in self._in_flight if not _delivered(sent.delivery)]
                if self._current is not None:
                    leftovers.append(self._current)
                self._in_flight = []
                # an event the sender thread holds may be spooled twice: same file name, no duplicate
                queued = [self._in_hand] if self._in_hand is not None else []
                queued += self._take_queued()
        if abandoning_elsewhere:
            # the other thread is writing the leftovers to disk: wait, or they die with the process
            self._persisted.wait(PERSIST_WAIT_SECONDS)
            return
        for record in [*leftovers, *filter(None, map(self._serialize, queued))]:
            with self._lock:
                self._spool_record(record)
        leftovers_count = len(leftovers) + len(queued)
        self._all_delivered = not leftovers_count and not self._spool_has_records
        self._persisted.set()
        if not self._all_delivered:
            log.warning(
                "Lineage events left undelivered at close (%d pending, %d in the spool); they wait in %s for the next run",
                leftovers_count,
                len(self.spool),
                self.spool.directory,
            )

    # -- helpers -------------------------------------------------------------------------

    def _tell(self, cause: BaseException | None, message: str, *args: object) -> None:
        """Log a failure as a warning when its cause is new (until a delivery succeeds), else at
        debug level: an outage or a refusal is one line, not one per retry."""
        level = logging.DEBUG if str(cause) == self._told else logging.WARNING
        self._told = str(cause)
        log.log(level, message, *args)

    def _log_rejected(self, error: BaseException) -> None:
        self.rejected += 1
        log.error("The broker rejects a lineage event (%s); dropped it (%d so far)", error, self.rejected)

    def _log_queue_full(self) -> None:
        self.queue_overflows += 1
        if self.queue_overflows == 1 or self.queue_overflows % 1000 == 0:
            log.warning(
                "Lineage event queue full (%d events); %d event(s) spooled directly to %s so far",
                self._settings.queue_size,
                self.queue_overflows,
                self.spool.directory,
            )

    def _spool_record(self, record: Record) -> None:
        """Caller holds self._lock."""
        try:
            self.spool.append(record)
        except OSError:
            log.exception("Cannot write lineage spool %s; event lost", self.spool.directory)
            return
        self._spool_has_records = True

    def _serialize(self, pending: Pending) -> Record | None:
        try:
            return pending.record()
        except Exception:
            log.exception("Cannot serialize lineage event; dropping it")
            return None

    def _flush(self, sink: Sink, timeout_seconds: float) -> None:
        try:
            sink.flush(max(0.0, timeout_seconds))
        except Exception as error:  # noqa: BLE001 - a flush that fails at close leaves the records spooled
            log.debug("Flush did not complete: %s", error)

    def _time_left(self) -> float:
        return max(0.0, self._deadline - time.monotonic()) if self._deadline != float("inf") else float("inf")


def _close_quietly(sink: Sink) -> None:
    try:
        sink.close()
    except Exception as error:  # noqa: BLE001 - closing a broken producer must not fail the close
        log.debug("Closing the Kafka producer: %s", error)


def _delivered(delivery: Delivery) -> bool:
    return delivery.done() and delivery.error() is None
