"""Lineage changes for Kafka subscribers (`--changes-topic`): after each store transaction
commits, one JSON message per table-lineage edge added or retired, column-lineage edge added or
changed, snapshot lineage recorded, run finished and job whose current version changed (with
what changed: consumer.store.version_diff) (schemas/1-0-0/LineageChange*.json).

A message carries what is true after the change (an edge's whole state, `state: retired` once
it is gone), keyed by the thing's identity, so a log-compacted topic holds the current lineage
and a reader applying a message twice ends where it did once. Only the store transactions of
ingestion and of retirement publish; a replay (`rebuild`) does not, unless asked
(`replay --republish-changes` publishes the whole rebuilt lineage).

`change_scope` (pure) says which keys a batch may touch; `ChangePublisher` reads their state
before and after the write, inside the write transaction, and writes the difference to the
store's change outbox (consumer.store.outbox) in that transaction; its publisher sends the outbox
to the topic and removes what was acknowledged, so a crash between commit and publish loses
nothing."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from sqlalchemy import Connection

from consumer.ingest.kafka_io import BrokerUnavailable
from consumer.ingest.store_writes import PRUNE, StoreWrite
from consumer.store import Store, outbox
from consumer.store.lineage_state import (
    COLUMN_EDGE,
    JOB_VERSION,
    RETIRED,
    TABLE_EDGE,
    ChangeScope,
    StateKey,
    everything,
    jobs_named,
    lineage_state,
    stale_job_keys,
    version_contents,
)
from consumer.store.rows import Folded
from consumer.store.version_diff import version_diff

log = logging.getLogger(__name__)

T = TypeVar("T")

RETIRABLE = frozenset({TABLE_EDGE, COLUMN_EDGE})
PUBLISH_CHUNK = 1000  # messages sent and flushed at a time
PUBLISH_RETRY_SECONDS = 5.0  # how often the publisher loop looks for what could not be sent


class ChangeSink(Protocol):
    def send(self, key: bytes, value: bytes) -> None: ...
    def flush(self, timeout_seconds: float = ...) -> None: ...
    def close(self) -> None: ...


def change_scope(batch: Folded) -> ChangeScope:
    """What the batch's events may have changed: every table and column edge of its jobs (a job's
    edges change when its current version does) and its runs."""
    jobs = frozenset(batch.jobs) | frozenset(lineage.job for lineage in batch.lineage.values())
    return ChangeScope(run_uuids=frozenset(batch.runs), jobs=jobs)


def changed_messages(
    before: Mapping[StateKey, dict[str, Any]],
    after: Mapping[StateKey, dict[str, Any]],
    contents: Mapping[int, Mapping[str, Any]] | None = None,
) -> list[tuple[StateKey, dict[str, Any]]]:
    """What differs after the transaction: new or changed keys with their state, edges that are
    gone as `retired` (runs and snapshots are never removed by a transaction that publishes), and
    a `job_version_changed` message per job whose current version changed. `contents`: the content
    of each version id the job states name (see `versions_to_read`)."""
    changed = [(key, message) for key, message in after.items() if key[0] != JOB_VERSION and before.get(key) != message]
    gone = [(key, {**message, "state": RETIRED}) for key, message in before.items() if key not in after and key[0] in RETIRABLE]
    versions = [
        (key, version_message(before.get(key), after.get(key), contents or {}))
        for key in sorted({*before, *after}, key=_by_key)
        if key[0] == JOB_VERSION and _version_of(before.get(key)) != _version_of(after.get(key))
    ]
    return sorted(changed + gone + versions, key=_by_key)


def versions_to_read(before: Mapping[StateKey, dict[str, Any]], after: Mapping[StateKey, dict[str, Any]]) -> set[int]:
    """The ids of the versions whose contents `changed_messages` needs: of the jobs whose current version changed."""
    wanted: set[int] = set()
    for key in {*before, *after}:
        if key[0] == JOB_VERSION and _version_of(before.get(key)) != _version_of(after.get(key)):
            wanted |= {state["versionId"] for state in (before.get(key), after.get(key)) if state is not None}
    return wanted


def version_message(
    before: Mapping[str, Any] | None, after: Mapping[str, Any] | None, contents: Mapping[int, Mapping[str, Any]]
) -> dict[str, Any]:
    """A job's `job_version_changed` message: its previous and new current version (null: none) and what changed."""
    job = (after or before or {})["job"]
    return {
        "kind": JOB_VERSION,
        "job": job,
        "previousVersion": _version_of(before),
        "version": _version_of(after),
        "diff": version_diff(_content_of(before, contents), _content_of(after, contents)),
    }


def _version_of(state: Mapping[str, Any] | None) -> str | None:
    return None if state is None else state["version"]


def _content_of(state: Mapping[str, Any] | None, contents: Mapping[int, Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return None if state is None else contents[state["versionId"]]


def encode(key: StateKey, message: Mapping[str, Any]) -> tuple[bytes, bytes]:
    return (
        json.dumps(list(key), separators=(",", ":"), default=str).encode(),
        json.dumps(message, separators=(",", ":"), sort_keys=True, default=str).encode(),
    )


class ChangePublisher:
    """The write hook (consumer.ingest.store_writes) that records what each ingestion, retirement
    and deletion transaction changes in the store's change outbox, inside that transaction (the
    state of the keys it may touch is read before and after its writes), and publishes the
    outbox: after each commit, and from `start` on also from a thread of its own, at once (what
    an earlier process left) and every `retry_seconds`. Delivery is at least once, in outbox
    order, so in order per key; a message leaves the outbox once the topic acknowledged it."""

    def __init__(self, store: Store, sink: ChangeSink, retry_seconds: float = PUBLISH_RETRY_SECONDS) -> None:
        self.store = store
        self.sink = sink
        self.retry_seconds = retry_seconds
        self._publishing = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._publisher: threading.Thread | None = None

    def __call__(self, write: StoreWrite, proceed: Callable[[], T]) -> T:
        if write.kind == PRUNE:  # history only: no edge, current snapshot or latest run changes
            return proceed()
        scope = self._scope(write)

        @contextmanager
        def recording(connection: Connection) -> Iterator[None]:
            before = lineage_state(connection, scope)
            yield
            after = lineage_state(connection, scope)
            contents = version_contents(connection, versions_to_read(before, after))
            outbox.append(connection, (encode(key, message) for key, message in changed_messages(before, after, contents)))

        with self.store.accompanied(recording):
            outcome = proceed()
        self._published_soon()
        return outcome

    def _scope(self, write: StoreWrite) -> ChangeScope:
        engine = self.store.engine
        if write.folded is not None:
            return change_scope(write.folded)
        if write.cutoff is not None:
            return ChangeScope(jobs=stale_job_keys(engine, write.cutoff))
        assert write.job is not None  # noqa: S101 - an invariant of ChangeScope (narrows the type)
        return ChangeScope(jobs=jobs_named(engine, *write.job))

    def publish_everything(self) -> int:
        """Publish the current state of every edge, snapshot, finished run and job version (after a
        replay, or to seed a new subscriber topic: a job's version as changed from none); the number of messages."""
        with self.store.writing() as connection:
            state = lineage_state(connection, everything(self.store.engine))
            messages = changed_messages({}, state, version_contents(connection, versions_to_read({}, state)))
            outbox.append(connection, (encode(key, message) for key, message in messages))
        self.publish()
        with self.store.engine.connect() as connection:
            left = outbox.count(connection)
        if left:
            raise BrokerUnavailable(f"{left} lineage changes could not be published")
        return len(messages)

    def _published_soon(self) -> None:
        """After a commit: wake the publisher thread, or publish here when there is none."""
        if self._publisher is not None:
            self._wake.set()
        else:
            self.publish()

    def publish(self) -> int:
        """Send the outbox, oldest first, and remove what the topic acknowledged; the number of
        messages published. Whatever could not be sent stays for the next call."""
        published = 0
        with self._publishing, outbox.publisher(self.store.engine) as claimed:
            while claimed:
                with self.store.engine.connect() as connection:
                    messages = outbox.oldest(connection, PUBLISH_CHUNK)
                if not messages:
                    break
                try:
                    for _, key, value in messages:
                        self.sink.send(key, value)
                    self.sink.flush()
                except Exception as error:  # noqa: BLE001 - whatever the sink raises, the messages stay in the outbox for the next publish
                    log.warning("lineage changes not published yet (kept in the store's outbox): %s", error)
                    break
                with self.store.writing() as connection:
                    outbox.remove(connection, [message_id for message_id, _, _ in messages])
                published += len(messages)
        return published

    def start(self) -> None:
        """Publish from a thread of its own from now on: the writes then never wait for the topic."""
        self._publisher = threading.Thread(target=self._publish_until_stopped, name="changes-publisher", daemon=True)
        self._publisher.start()

    def _publish_until_stopped(self) -> None:
        while not self._stop.is_set():
            try:
                self.publish()
            except Exception:  # the database is away: the next round tries again
                log.exception("publishing lineage changes")
            self._wake.wait(self.retry_seconds)
            self._wake.clear()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._publisher is not None:
            self._publisher.join(timeout=60)


def _by_key(item: tuple[StateKey, Any]) -> str:
    return json.dumps(item[0], default=str)
