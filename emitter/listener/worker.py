"""The attachment's pipeline thread: events are built off Spark's listener bus, then handed to
the transport.

Spark calls the listeners on its listener bus thread, which every other listener of the
application shares; while a callback runs, Spark's queue of events waits (and drops events
when it fills up). So a callback only captures and decides: the batch listener copies the
action out of the JVM and asks its `emitter.dedupe.WrapperDedupe` which actions are ready to
become runs; building their events (`emitter.pipeline`: plan parse, column lineage, facets)
and handing them to the transport (`client.emit`, the only I/O) happen here, one item at a
time in arrival order, streaming callbacks included, so the events come out in the order
Spark reported what they describe.

Python's cyclic garbage collector is paused while this thread builds an item's events, not
while it hands them to the transport (_collector_paused).

This thread keeps the attachment's streaming runs (`streams.StreamRuns`): a StreamStarted
registers its run before its events are built, so a foreachBatch write queued after it finds
its parent. The queue is bounded: when building falls that far behind, the listener waits for
room rather than drop anything. `settle` waits until everything handed over has been built and
handed to the transport; `stop` does that and ends the thread (the attachment's `close`).
"""

from __future__ import annotations

import gc
import logging
import queue
import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from openlineage.client.event_v2 import RunEvent

from emitter import pipeline
from emitter.capture import Capture, StreamCapture, StreamStarted
from emitter.streams import StreamRuns

log = logging.getLogger(__name__)

T = TypeVar("T")

QUEUED_ITEMS = 64  # captures hold plan JSON (up to ~1 MB each on large plans): a bounded backlog
_STOP = object()


class PipelineWorker:
    """Builds an attachment's events from the captures its listeners hand over, on one thread,
    and emits them through `client` (openlineage-python's client: the transport stage)."""

    def __init__(self, context: pipeline.Context, client: Any, capacity: int = QUEUED_ITEMS) -> None:
        self.context = context
        self.client = client
        self.streams = StreamRuns()  # touched by the building thread only
        self.emitted_events = 0  # handed to the transport (which may still be delivering them)
        self._closed = False  # after the application COMPLETE nothing more is emitted
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=capacity)
        self._thread = threading.Thread(target=self._run, name="openlineage-pipeline", daemon=True)
        self._stopped = False
        self._thread.start()

    @property
    def closed(self) -> bool:
        return self._closed

    # what the listeners hand over -------------------------------------------------------
    def handle_actions(self, actions: list[Capture]) -> None:
        """Actions the dedupe let through (the batch listener, on Spark's listener bus)."""
        if actions and not self._closed:
            self._put(self.build_actions, actions)

    def handle_stream(self, capture: StreamCapture) -> None:
        """One streaming callback (the streaming listener)."""
        if not self._closed:
            self._put(self.build_stream, capture)

    # building (on this worker's thread) ---------------------------------------------------
    def build_actions(self, actions: list[Capture]) -> list[RunEvent]:
        context = self.context.with_streams(self.streams.live())
        built = _collector_paused(lambda: [event for action in actions for event in pipeline.action_events(action, context)])
        self.emit(built)
        return built

    def build_stream(self, capture: StreamCapture) -> list[RunEvent]:
        built = _collector_paused(lambda: self._stream_events(capture))
        self.emit(built)
        return built

    def _stream_events(self, capture: StreamCapture) -> list[RunEvent]:
        if isinstance(capture, StreamStarted):
            self.streams.started(pipeline.started_run(capture, self.context))
        return pipeline.stream_events(capture, self.context.with_streams(self.streams.live()))

    # the transport stage ------------------------------------------------------------------
    def emit(self, built: Iterable[RunEvent]) -> None:
        for event in built:
            if self._closed:
                return
            try:
                self.client.emit(event)
            except Exception as error:  # noqa: BLE001 - a transport failure must never reach the job
                log.warning("OpenLineage event not emitted: %s", error)
            else:
                self.emitted_events += 1

    def start_application(self) -> None:
        self.emit([pipeline.application_event(self.context, "START")])

    def complete_application(self) -> None:
        """The application COMPLETE, last: nothing is emitted after it."""
        if not self._closed:
            self.emit([pipeline.application_event(self.context, "COMPLETE")])
            self._closed = True

    # waiting ----------------------------------------------------------------------------
    def settle(self, timeout_s: float | None = None) -> bool:
        """Wait until every item handed over has been built and emitted; False on timeout."""
        with self._queue.all_tasks_done:
            return self._queue.all_tasks_done.wait_for(lambda: self._queue.unfinished_tasks == 0, timeout_s)

    def stop(self, timeout_s: float | None = None) -> bool:
        """Settle, then end the thread; False when the backlog did not drain in time."""
        settled = self.settle(timeout_s)
        if not self._stopped:
            self._stopped = True
            try:
                self._queue.put_nowait(_STOP)
            except queue.Full:  # not drained in time: the daemon thread ends with the process
                pass
        return settled

    def _put(self, step: Callable[[Any], object], item: Any) -> None:
        if self._stopped:  # after stop: build on the caller's thread rather than lose it
            step(item)
            return
        self._queue.put((step, item))

    def _run(self) -> None:
        while True:
            entry = self._queue.get()
            try:
                if entry is _STOP:
                    return
                step, item = entry
                step(item)
            except Exception as error:  # one bad capture must not end the thread
                log.warning("OpenLineage: events of a Spark action not built: %s", error, exc_info=log.isEnabledFor(10))
            finally:
                self._queue.task_done()


def _collector_paused(build: Callable[[], T]) -> T:
    """`build()` with Python's cyclic garbage collector paused, if it runs. A large plan's build
    holds hundreds of thousands of objects for a few milliseconds, all freed by reference counting
    at its end (it makes no reference cycles). Collections during it promoted them to the oldest
    generation and so set off full collections of the whole process (about 50 ms each on TPC-DS,
    the emitter's longest builds). The pause is process-wide while it lasts, so it covers the
    pure build only, never the transport (which may wait on a network); collection resumes after
    it, unless the collector was off when the build began."""
    if not gc.isenabled():
        return build()
    gc.disable()
    try:
        return build()
    finally:
        gc.enable()
