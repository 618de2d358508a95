"""Lineage changes for Kafka subscribers (`--changes-topic`): after each store transaction
commits, one JSON message per table-lineage edge added or retired, column-lineage edge added or
changed, snapshot lineage recorded and run finished (schemas/1-0-0/LineageChange*.json).

A message carries what is true after the change (an edge's whole state, `state: retired` once
it is gone), keyed by the thing's identity, so a log-compacted topic holds the current lineage
and a reader applying a message twice ends where it did once. Only the store transactions of
ingestion and of retirement publish; a replay (`rebuild`) does not, unless asked
(`replay --republish-changes` publishes the whole rebuilt lineage).

`change_scope` (pure) says which keys a batch may touch; `ChangePublisher` reads their state
before and after the write and publishes the difference."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from sqlalchemy import Engine

from consumer.ingest.kafka_io import BrokerUnavailable
from consumer.ingest.store_writes import RETIRE, StoreWrite
from consumer.store.lineage_state import (
    COLUMN_EDGE,
    RETIRED,
    TABLE_EDGE,
    ChangeScope,
    StateKey,
    everything,
    jobs_named,
    lineage_state,
    stale_job_keys,
)
from consumer.store.rows import Folded

log = logging.getLogger(__name__)

T = TypeVar("T")

RETIRABLE = frozenset({TABLE_EDGE, COLUMN_EDGE})


class ChangeSink(Protocol):
    def send(self, key: bytes, value: bytes) -> None: ...
    def flush(self, timeout_seconds: float = ...) -> None: ...
    def close(self) -> None: ...


def change_scope(batch: Folded) -> ChangeScope:
    """The edges, column-lineage outputs and runs the batch's events may have changed."""
    return ChangeScope(
        frozenset((*job, direction, *dataset) for job, dataset, direction, *_ in batch.job_io),
        frozenset(edge[0] for edge in batch.edges),
        frozenset(batch.runs),
    )


def changed_messages(
    before: Mapping[StateKey, dict[str, Any]], after: Mapping[StateKey, dict[str, Any]]
) -> list[tuple[StateKey, dict[str, Any]]]:
    """What differs after the transaction: new or changed keys with their state, and edges that
    are gone as `retired` (runs and snapshots are never removed by a transaction that publishes)."""
    changed = [(key, message) for key, message in after.items() if before.get(key) != message]
    gone = [(key, {**message, "state": RETIRED}) for key, message in before.items() if key not in after and key[0] in RETIRABLE]
    return sorted(changed + gone, key=lambda item: json.dumps(item[0], default=str))


def encode(key: StateKey, message: Mapping[str, Any]) -> tuple[bytes, bytes]:
    return (
        json.dumps(list(key), separators=(",", ":"), default=str).encode(),
        json.dumps(message, separators=(",", ":"), sort_keys=True, default=str).encode(),
    )


class ChangePublisher:
    """The write hook (consumer.ingest.store_writes) that publishes what each ingestion, retirement
    and deletion transaction changed, once it committed: the state of the keys it may touch is read
    before and after it. Messages that cannot be sent are kept and sent before the next ones."""

    def __init__(self, engine: Engine, sink: ChangeSink) -> None:
        self.engine = engine
        self.sink = sink
        self._pending: list[tuple[bytes, bytes]] = []

    def __call__(self, write: StoreWrite, proceed: Callable[[], T]) -> T:
        scope = self._scope(write)
        before = lineage_state(self.engine, scope)
        outcome = proceed()
        if write.kind != RETIRE or outcome:
            self._publish(before, lineage_state(self.engine, scope))
        return outcome

    def _scope(self, write: StoreWrite) -> ChangeScope:
        if write.folded is not None:
            return change_scope(write.folded)
        if write.cutoff is not None:
            return ChangeScope(jobs=stale_job_keys(self.engine, write.cutoff))
        assert write.job is not None  # noqa: S101 - an invariant of ChangeScope (narrows the type)
        return ChangeScope(jobs=jobs_named(self.engine, *write.job))

    def publish_everything(self) -> int:
        """Publish the current state of every edge, snapshot and finished run (after a replay,
        or to seed a new subscriber topic); the number of messages."""
        state = lineage_state(self.engine, everything(self.engine))
        self._publish({}, state)
        if self._pending:
            raise BrokerUnavailable(f"{len(self._pending)} lineage changes could not be published")
        return len(state)

    def _publish(self, before: Mapping[StateKey, dict[str, Any]], after: Mapping[StateKey, dict[str, Any]]) -> None:
        self._pending.extend(encode(key, message) for key, message in changed_messages(before, after))
        if not self._pending:
            return
        try:
            for key, value in self._pending:
                self.sink.send(key, value)
            self.sink.flush()
        except Exception as error:  # noqa: BLE001 - the events are stored; the messages go out with the next ones
            log.warning("lineage changes not published yet (%d kept): %s", len(self._pending), error)
            return
        self._pending.clear()
