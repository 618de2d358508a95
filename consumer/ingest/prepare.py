"""Preparing a polled batch for its store transaction: each record decoded, validated and
materialized, then the batch folded into its rows by natural key (consumer.ingest.fold). All of it is
pure, so it runs in this process or in a worker process.

Ingestion prepares batch k+1 while batch k is in its store transaction. Both are Python, and
threads of one process take turns on one interpreter lock; a worker process prepares on another
core instead. What crosses back is the folded batch only (plain tuples, and facets as encoded
JSON members: a few thousand objects for 500 events), not every event's rows. The rare paths
that need every event's rows (a batch partly stored already, or one the database rejects) prepare
them again in this process: preparing is a function of the record's bytes.
"""

from __future__ import annotations

import gc
import logging
import os
import pickle
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

from consumer.ingest.facet_memo import FacetMemo
from consumer.ingest.fold import Folded, fold
from consumer.ingest.materialize import EventRows, materialize
from consumer.ingest.validate import InvalidEvent, decode, validate
from consumer.store.compressed_text import Dictionary

log = logging.getLogger(__name__)

# Reason classes: the `reason` label of the dead-letter metric and the class header.
TOO_LARGE = "too_large"
INVALID = "invalid"
NOT_MATERIALIZABLE = "not_materializable"
STORE_REJECTED = "store_rejected"

# A batch of events is hundreds of thousands of short-lived, acyclic objects: with the default
# threshold (700 allocations) the cycle collector runs thousands of times per batch over everything
# alive. Measured on the ingest benchmark: +25-35 % events/s.
GC_YOUNG_THRESHOLD = 50_000


def tune_garbage_collector() -> None:
    gc.freeze()  # what startup loaded is never collected: keep it out of every collection
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


@contextmanager
def cycle_collection_paused() -> Iterator[None]:
    """No cycle collection while a batch is stored. A store transaction holds the batch's rows and
    the statements' parameters, tens of thousands of acyclic objects alive for its whole length,
    which every collection would traverse again (measured: a seventh of the write's CPU even with
    the young threshold above). Collections resume after it, the collector's state as it was
    found (a concurrent transaction's pause ends with the one that began it)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def prepare(value: Any, memo: FacetMemo | None = None) -> EventRows:
    """Raw bytes/str or an already decoded event -> rows; raises InvalidEvent. `memo`: the
    preparing process's memo of schema and column-lineage facets (consumer.ingest.facet_memo)."""
    if isinstance(value, bytes):
        try:
            text = value.decode()
        except UnicodeDecodeError as error:
            raise InvalidEvent("", f"not JSON: not UTF-8 ({error})") from None
    elif isinstance(value, str):
        text = value
    else:
        return materialize(validate(value))
    if memo is not None and _may_hold_non_finite(value):
        memo = None
    return materialize(validate(decode(value), memo), raw_text=text, memo=memo)  # bytes are decoded as they are: no copy


def _may_hold_non_finite(text: bytes | str) -> bool:
    """Whether `text` may hold NaN or an infinity (which facet_memo's keys would not tell from null)."""
    if isinstance(text, str):
        return "NaN" in text or "Infinity" in text
    return b"NaN" in text or b"Infinity" in text


class Refused(NamedTuple):
    reason_class: str
    reason: str


def prepare_one(value: bytes | str | None, max_event_bytes: int | None, memo: FacetMemo | None = None) -> EventRows | Refused:
    value = value if value is not None else b""
    if max_event_bytes is not None and len(value) > max_event_bytes:
        return Refused(TOO_LARGE, f"too large: {len(value)} bytes, limit {max_event_bytes}")
    try:
        return prepare(value, memo)
    except InvalidEvent as error:
        return Refused(INVALID, f"invalid event: {error}")
    except Exception as error:  # noqa: BLE001 - materialization bug: keep the event, keep going
        return Refused(NOT_MATERIALIZABLE, f"cannot materialize: {type(error).__name__}: {error}")


class Prepared(NamedTuple):
    """A batch ready for its store transaction. `folded`: the good events folded (None if folding
    failed: then each event is stored on its own to find the culprit); `events`: their rows, when
    they were prepared in this process."""

    refused: dict[int, Refused]  # by the record's position in the batch
    folded: Folded | None
    events: list[EventRows] | None


def prepare_batch(
    values: Sequence[bytes | str | None],
    max_event_bytes: int | None,
    *,
    by_hash: bool = True,
    keep_events: bool = True,
    memo: FacetMemo | None = None,
    dictionary: Dictionary | None = None,
) -> Prepared:
    """Prepare and fold a batch (`by_hash`: in the order ingestion applies it; False: as given, as
    replay does; raw events compressed with `dictionary`). `keep_events=False` leaves the events'
    rows out (a worker's answer)."""
    refused: dict[int, Refused] = {}
    events: list[EventRows] = []
    for position, value in enumerate(values):
        outcome = prepare_one(value, max_event_bytes, memo)
        if isinstance(outcome, Refused):
            refused[position] = outcome
        else:
            events.append(outcome)
    try:
        folded: Folded | None = fold(events, by_hash=by_hash, dictionary=dictionary)
    except Exception:
        log.exception("cannot fold a batch of %d events: storing them one by one", len(events))
        folded = None
    return Prepared(refused, folded, events if keep_events or folded is None else None)


def good_events(values: Sequence[bytes | str | None], prepared: Prepared) -> list[EventRows]:
    """The rows of every event of the batch that was not refused (prepared again if need be)."""
    if prepared.events is not None:
        return prepared.events
    events = []
    for position, value in enumerate(values):
        if position not in prepared.refused:
            outcome = prepare_one(value, None)
            if isinstance(outcome, Refused):  # it was good in the worker: preparing is pure
                raise RuntimeError(f"event {position} prepared differently the second time: {outcome.reason}")
            events.append(outcome)
    return events


class Preparer:
    """Prepares batches in this process (`in_worker=False`) or in a worker process (the default
    where there is a second CPU): `python -m consumer.ingest.prepare`, started on the first batch, fed
    over a pipe. A worker that dies is replaced, and the batch it held is prepared here; a worker
    whose parent dies reads the end of its pipe and exits. The raw events' dictionary goes to a
    worker with the first batch to use it; later batches name it by id."""

    def __init__(self, max_event_bytes: int | None, *, in_worker: bool | None = None, by_hash: bool = True) -> None:
        self.max_event_bytes = max_event_bytes
        # A worker on the same single core would only add the cost of the pipe.
        self.in_worker = (os.cpu_count() or 1) > 1 if in_worker is None else in_worker
        self.by_hash = by_hash
        self._worker: _Worker | None = None
        self._memo = FacetMemo()  # preparing here (the worker process keeps its own)

    def submit(self, values: Sequence[bytes | str | None], dictionary: Dictionary | None = None) -> Callable[[], Prepared]:
        """Start preparing `values` (raw events compressed with `dictionary`); call the result to
        wait for the prepared batch."""
        if not self.in_worker:
            prepared = prepare_batch(values, self.max_event_bytes, by_hash=self.by_hash, memo=self._memo, dictionary=dictionary)
            return lambda: prepared
        try:
            worker = self._worker = self._worker or _Worker()
            worker.send((list(values), self.max_event_bytes, self.by_hash, worker.dictionary_reference(dictionary)))
        except (OSError, pickle.PicklingError) as error:
            prepared = self._here(values, dictionary, error)
            return lambda: prepared
        return lambda: self._receive(worker, values, dictionary)

    def _receive(self, worker: _Worker, values: Sequence[bytes | str | None], dictionary: Dictionary | None) -> Prepared:
        try:
            return worker.receive()
        except (OSError, EOFError, pickle.UnpicklingError) as error:
            return self._here(values, dictionary, error)

    def _here(self, values: Sequence[bytes | str | None], dictionary: Dictionary | None, error: BaseException) -> Prepared:
        log.warning(
            "the preparing worker process failed (%s): preparing this batch here, starting a new worker for the next", error
        )
        self.close()
        return prepare_batch(values, self.max_event_bytes, by_hash=self.by_hash, memo=self._memo, dictionary=dictionary)

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None


class _Worker:
    """A `python -m consumer.ingest.prepare` process: requests in on one pipe, prepared batches out on
    another (pickled), one at a time."""

    def __init__(self) -> None:
        requests_read, requests_write = os.pipe()
        answers_read, answers_write = os.pipe()
        # The worker imports this very package, however this process found it.
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (package_root, os.environ.get("PYTHONPATH"))))}
        self.process = subprocess.Popen(  # noqa: S603 - the consumer's own worker program, no shell
            [sys.executable, "-m", "consumer.ingest.prepare", str(requests_read), str(answers_write)],
            pass_fds=(requests_read, answers_write),
            stdin=subprocess.DEVNULL,
            env=environment,
        )
        os.close(requests_read)
        os.close(answers_write)
        self.requests = os.fdopen(requests_write, "wb")
        self.answers = os.fdopen(answers_read, "rb")
        self.dictionaries_sent: set[int] = set()

    def dictionary_reference(self, dictionary: Dictionary | None) -> Dictionary | int | None:
        """How a request names `dictionary`: whole the first time, by id after that (the worker keeps it)."""
        if dictionary is None:
            return None
        if dictionary.id in self.dictionaries_sent:
            return dictionary.id
        self.dictionaries_sent.add(dictionary.id)
        return dictionary

    def send(self, request: Any) -> None:
        pickle.dump(request, self.requests, protocol=pickle.HIGHEST_PROTOCOL)
        self.requests.flush()

    def receive(self) -> Prepared:
        answer: Prepared = pickle.load(self.answers)  # noqa: S301 - frames from the consumer's own worker process
        return answer

    def close(self) -> None:
        for pipe in (self.requests, self.answers):
            try:
                pipe.close()
            except OSError:
                pass
        try:
            self.process.wait(timeout=5)  # its requests pipe is closed: it ends
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def serve_requests(requests_fd: int, answers_fd: int) -> None:
    """The worker's loop: prepare each batch that arrives, until the requests pipe ends.

    Preparing builds no reference cycles, so the cycle collector runs once per batch, when the
    batch is gone, rather than every 50,000 allocations over the batch's hundreds of thousands
    of live objects (a third of the worker's time); and it collects only what the batch made:
    what outlives it is frozen (the facet memo's results, thousands of objects, would otherwise
    be traversed after every batch; those it evicts are freed by reference counting)."""
    gc.freeze()
    gc.disable()
    memo = FacetMemo()
    dictionaries: dict[int, Dictionary] = {}
    with os.fdopen(requests_fd, "rb") as requests, os.fdopen(answers_fd, "wb") as answers:
        while True:
            try:
                values, max_event_bytes, by_hash, reference = pickle.load(requests)  # noqa: S301 - frames from the consumer's own worker process
            except EOFError:
                return
            if isinstance(reference, Dictionary):
                dictionaries[reference.id] = reference
            dictionary = dictionaries[reference] if isinstance(reference, int) else reference
            prepared = prepare_batch(
                values, max_event_bytes, by_hash=by_hash, keep_events=False, memo=memo, dictionary=dictionary
            )
            pickle.dump(prepared, answers, protocol=pickle.HIGHEST_PROTOCOL)
            answers.flush()
            del values, prepared
            gc.collect()
            gc.freeze()  # what outlives a batch (the memo's results) is not traversed by the next batches' collections


if __name__ == "__main__":
    # This module again under its own name, so that what the worker pickles names consumer.ingest.prepare.
    from consumer.ingest.prepare import serve_requests as serve

    serve(int(sys.argv[1]), int(sys.argv[2]))
