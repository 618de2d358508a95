"""The write side's one way into the store: `StoreWrites` runs every write-side store transaction
(a batch of events from Kafka or HTTP, the retirement or deletion of jobs' table lineage), and
whatever must accompany one (metrics, lineage-change messages) is a `WriteHook` around it.

A hook is called with what the transaction is about to do and a `proceed` that runs it; it
calls `proceed()` once and returns its result. Hooks run in the order given, the first one
outermost. The store itself knows nothing of them: it takes folded rows (consumer.store.rows)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence, Set
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol, TypeVar

import attrs
from sqlalchemy import Engine

from consumer.ingest.fold import fold
from consumer.ingest.materialize import EventRows
from consumer.ingest.prepare import cycle_collection_paused
from consumer.store import Store
from consumer.store.compressed_text import Dictionary
from consumer.store.retention import Pruned
from consumer.store.rows import Folded

T = TypeVar("T")

BATCH = "batch"
RETIRE = "retire"
DELETE_TABLE_LINEAGE = "delete_table_lineage"
PRUNE = "prune"


@attrs.frozen
class StoreWrite:
    """What one transaction is about to do: store `folded` (kind `batch`), retire the table lineage
    of the jobs not seen since `cutoff` (`retire`), or delete job `job` (name, namespace or None)'s
    table lineage (`delete_table_lineage`), or remove what is older than `cutoff` (`prune`, many short
    transactions, changing no current lineage)."""

    kind: str
    folded: Folded | None = None
    cutoff: datetime | None = None
    job: tuple[str, str | None] | None = None


class WriteHook(Protocol):
    def __call__(self, write: StoreWrite, proceed: Callable[[], T]) -> T: ...


@attrs.frozen
class StoredBatch:
    """One committed store transaction: how many events it held (re-read duplicates included), how
    many were new, and how long it took."""

    events: int
    new_events: int
    seconds: float


def batch_observer(report: Callable[[StoredBatch], None]) -> WriteHook:
    """A hook that reports every committed batch (size, new events, seconds) to `report`."""

    def observe(write: StoreWrite, proceed: Callable[[], T]) -> T:
        if write.folded is None:
            return proceed()
        started = time.perf_counter()
        outcome = proceed()
        report(StoredBatch(write.folded.events, int(outcome), time.perf_counter() - started))  # type: ignore[call-overload]
        return outcome

    return observe


class StoreWrites:
    def __init__(self, store: Store, hooks: Sequence[WriteHook] = ()) -> None:
        self.store = store
        self.hooks = tuple(hooks)

    def with_hooks(self, *hooks: WriteHook) -> StoreWrites:
        """These writes with `hooks` added inside the present ones."""
        return StoreWrites(self.store, (*self.hooks, *hooks))

    @property
    def engine(self) -> Engine:
        return self.store.engine

    def write(self, batch: Sequence[EventRows]) -> int:
        """Fold and store a batch of events in one transaction; the number not seen before."""
        return self.write_folded(fold(batch, dictionary=self.raw_dictionary()), lambda: batch)

    def write_folded(self, folded: Folded, events: Callable[[], Sequence[EventRows]]) -> int:
        """`write` of a batch folded already (consumer.ingest.prepare); `events()` gives its
        events' rows, needed only when some of them are stored already."""

        def without_stored(fresh: Set[str]) -> Folded:
            return fold([rows for rows in events() if rows.raw.content_hash in fresh], dictionary=self.raw_dictionary())

        with cycle_collection_paused():
            return self._run(StoreWrite(BATCH, folded=folded), lambda: self.store.write(folded, without_stored))

    def raw_dictionary(self) -> Dictionary | None:
        """The dictionary new raw events are compressed with (consumer.store.raw_dictionaries)."""
        return self.store.raw_dictionaries.current()

    def train_raw_dictionary(self) -> Dictionary | None:
        """Train the store's raw event dictionary if it is due (once per store: ~0.2 s of CPU, no
        lineage change, so no hook runs); the current dictionary."""
        return self.store.raw_dictionaries.train_if_due()

    def retire_stale_jobs(self, retire_after: timedelta, now: datetime | None = None) -> list[str]:
        now = now or datetime.now(timezone.utc)
        return self._run(StoreWrite(RETIRE, cutoff=now - retire_after), lambda: self.store.retire_stale_jobs(retire_after, now))

    def delete_table_lineage(self, job_name: str, namespace: str | None = None) -> int:
        write = StoreWrite(DELETE_TABLE_LINEAGE, job=(job_name, namespace))
        return self._run(write, lambda: self.store.delete_table_lineage(job_name, namespace))

    def prune(
        self,
        older_than: timedelta,
        now: datetime | None = None,
        *,
        budget_seconds: float | None = None,
        resume_at: tuple[int, Any] | None = None,
    ) -> Pruned:
        """Retention (consumer.store.retention): what is older than `older_than` and nothing current points to."""
        now = now or datetime.now(timezone.utc)
        write = StoreWrite(PRUNE, cutoff=now - older_than)
        return self._run(write, lambda: self.store.prune(older_than, now, budget_seconds=budget_seconds, resume_at=resume_at))

    def delete_data_lineage(self, job_name: str, namespace: str | None = None) -> int:
        return self.store.delete_data_lineage(job_name, namespace)

    def rebuild(self, batch: Folded) -> None:
        """Replay's rebuild of derived rows: not a change of lineage, so no hook runs."""
        with cycle_collection_paused():
            self.store.rebuild(batch)

    def _run(self, write: StoreWrite, transaction: Callable[[], T]) -> T:
        proceed = transaction
        for hook in reversed(self.hooks):
            proceed = _wrapped(hook, write, proceed)
        return proceed()


def _wrapped(hook: WriteHook, write: StoreWrite, inner: Callable[[], Any]) -> Callable[[], Any]:
    return lambda: hook(write, inner)
