"""The pipeline's own thread: events are built off Spark's listener bus.

Spark calls the listeners on its listener bus thread, which every other listener of the
application shares; while a callback runs, Spark's queue of events waits (and drops events
when it fills up). So a callback only captures and decides: the listener copies the action out
of the JVM, `Pipeline.accept` says at once which actions are ready to become runs (which keeps
the wrapper-command dedupe exact for the next callback), and building their events (plan
parse, column lineage, facets, handing the events to the transport) happens here, one item at a time
in arrival order, streaming callbacks included, so the events come out in the same order as
when they were built on the bus.

The queue is bounded: when the pipeline falls that far behind, the listener waits for room
rather than drop anything. `settle` waits until everything handed over has been built and
handed to the transport; `stop` does that and ends the thread (the attachment's `close`).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from emitter.capture import Capture, RelationInfo, StreamCapture
from emitter.pipeline import Pipeline

log = logging.getLogger(__name__)

QUEUED_ITEMS = 64  # captures hold plan JSON (up to ~1 MB each on large plans): a bounded backlog
_STOP = object()


class PipelineWorker:
    """Stands in for the pipeline towards the listeners (`batch.ActionSink` and the streaming
    listener's handler) and feeds it from one thread."""

    def __init__(self, pipeline: Pipeline, capacity: int = QUEUED_ITEMS) -> None:
        self.pipeline = pipeline
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=capacity)
        self._thread = threading.Thread(target=self._run, name="openlineage-pipeline", daemon=True)
        self._stopped = False
        self._thread.start()

    # what the batch listener asks of the pipeline -------------------------------------
    @property
    def closed(self) -> bool:
        return self.pipeline.closed

    @property
    def wants_reads(self) -> bool:
        return self.pipeline.wants_reads

    def merges(self, command: str, wrapper_id: int, wrapper_target: RelationInfo) -> bool:
        return self.pipeline.merges(command, wrapper_id, wrapper_target)

    def handle(self, capture: Capture) -> None:
        ready = self.pipeline.accept(capture)
        if ready:
            self._put(self.pipeline.emit_actions, ready)

    # what the streaming listener hands over ---------------------------------------------
    def handle_stream(self, capture: StreamCapture) -> None:
        self._put(self.pipeline.handle_stream, capture)

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
        if self._stopped:  # after close: build on the caller's thread rather than lose it
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
            except Exception as error:  # noqa: BLE001 - one bad capture must not end the thread
                log.warning("OpenLineage: events of a Spark action not built: %s", error, exc_info=log.isEnabledFor(10))
            finally:
                self._queue.task_done()
