"""`Store`: engine construction, migrations, batched writes and lifecycle operations."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Set
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, delete, event, func, select, update
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import OperationalError

from consumer import json_codec
from consumer.store import migrations, retention, tags
from consumer.store.compressed_text import Dictionary
from consumer.store.raw_dictionaries import RawDictionaries, Recompressed
from consumer.store.rows import TERMINAL_STATES, Folded
from consumer.store.schema import (
    column_lineage,
    column_lineage_of_jobs,
    dataset_fields,
    dataset_version_contents,
    dataset_versions,
    datasets,
    job_io,
    job_seen_at,
    job_versions,
    jobs,
    latest_run,
    lineage_events,
    namespaces,
    partition_lineage,
    runs,
    snapshot_lineage,
)
from consumer.store.single_writer import LockHeld, WriterLock
from consumer.store.writer import write_batch

# Everything derived from raw events, children first: what replay empties before rebuilding.
DERIVED_TABLES = (
    partition_lineage,
    snapshot_lineage,
    column_lineage,
    job_io,
    dataset_versions,
    dataset_version_contents,
    dataset_fields,
    runs,
    job_versions,
    jobs,
    datasets,
    namespaces,
)


REDACTED = "redacted"  # a query value: "***" would be percent-encoded
SECRET_QUERY_KEY = re.compile(r"pass|pwd|secret|token|key|auth", re.IGNORECASE)


class StoreUnavailable(RuntimeError):
    """The database cannot be reached or opened."""


class StoreBusy(StoreUnavailable):
    """Another process writes this SQLite store (SQLite has one writer)."""


def redacted_url(url: str | URL) -> str:
    """`url` fit for a log line or an error message: no password, nor any secret-looking query
    parameter (`?password=`, `sslpassword=`, `sslkey=` ...)."""
    parsed = make_url(url)
    query = {key: REDACTED if SECRET_QUERY_KEY.search(key) else value for key, value in parsed.query.items()}
    return parsed.set(query=query).render_as_string(hide_password=True)


def engine_for(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    # JSON columns (facets) are most of what a batch writes and a graph answer reads
    codec = {"json_serializer": json_codec.dumps, "json_deserializer": json_codec.loads}
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(parsed, connect_args={"timeout": 30}, **codec)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(parsed, pool_pre_ping=True, **codec)


def _sqlite_pragmas(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
    cursor = dbapi_connection.cursor()
    # WAL lets the API read while ingestion writes; foreign keys make deletes cascade.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


class Store:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        database = engine.url.database if engine.dialect.name == "sqlite" else None
        # SQLite: one writing process (lock file), one writing thread in it.
        self._writer_lock = WriterLock(Path(database)) if database and database != ":memory:" else None
        self._write_mutex = threading.Lock()
        self._companions = threading.local()  # `accompanied`: per thread, for its next transaction
        self.raw_dictionaries = RawDictionaries(engine, self.writing)

    def claim_writer(self) -> None:
        """Be this SQLite store's one writer until `dispose`, or raise StoreBusy at once (writer
        commands call this on start). Nothing to claim on PostgreSQL, which has many writers."""
        if self._writer_lock is not None and not self._writer_lock.held:
            self._acquire(wait_seconds=0.0)

    def _acquire(self, wait_seconds: float) -> None:
        assert self._writer_lock is not None  # noqa: S101 - set by the constructor when writing (narrows the type)
        try:
            self._writer_lock.acquire(wait_seconds)
        except LockHeld as held:
            raise StoreBusy(
                f"the SQLite store {self.url} is being written by another process (pid {held.holder}); "
                "SQLite has one writer: stop that process first, or use PostgreSQL for several"
            ) from None

    @contextmanager
    def accompanied(self, companion: Callable[[Connection], AbstractContextManager[object]]) -> Iterator[None]:
        """Within the block, the write transaction this thread runs also enters
        `companion(connection)` around its writes: what the companion reads sees the transaction,
        what it writes commits or rolls back with it (the change outbox)."""
        self._companions.current = companion
        try:
            yield
        finally:
            self._companions.current = None

    @contextmanager
    def writing(self) -> Iterator[Connection]:
        """One write transaction; on SQLite the only one at a time (waiting up to 30 s for
        another process's transaction unless this store claimed the writer lock)."""
        companion, self._companions.current = getattr(self._companions, "current", None), None
        with self._write_mutex:
            lock = self._writer_lock
            per_transaction = lock is not None and not lock.held
            if per_transaction:
                self._acquire(wait_seconds=30.0)
            try:
                with self.engine.begin() as connection, companion(connection) if companion else nullcontext():
                    yield connection
            finally:
                if per_transaction and lock is not None:
                    lock.release()

    @property
    def url(self) -> str:
        return redacted_url(self.engine.url)

    def migrate(self) -> list[str]:
        """Upgrade the schema to the newest revision; the revisions applied. On SQLite under the
        writer lock: claimed already by a writer command, else taken for the migration (a
        reader opening a current store while a writer runs needs none)."""
        lock = self._writer_lock
        per_call = lock is not None and not lock.held
        if per_call and migrations.is_current(self.engine):
            return []
        if per_call:
            self._acquire(wait_seconds=30.0)
        try:
            return migrations.migrate(self.engine)
        finally:
            if per_call and lock is not None:
                lock.release()

    def write(self, batch: Folded, without_stored: Callable[[Set[str]], Folded]) -> int:
        """Store a batch of events (its rows by natural key, consumer.store.rows) and everything
        derived from them in one transaction; the number of events not seen before. Events already
        stored are skipped whole: when some of the batch's are, `without_stored(hashes of the
        others)` gives the batch without them."""
        with self.writing() as connection:
            return write_batch(connection, batch, without_stored)

    def raw_event_count(self) -> int:
        with self.engine.connect() as connection:
            return connection.execute(select(func.count()).select_from(lineage_events)).scalar_one()

    def raw_payloads(self, chunk_size: int = 1000) -> Iterator[list[str]]:
        """Raw events in event-time order (ties by arrival), in chunks."""
        last: tuple[datetime, int] | None = None
        while True:
            query = select(lineage_events.c.event_time, lineage_events.c.id, lineage_events.c.payload)
            if last is not None:
                query = query.where(
                    (lineage_events.c.event_time > last[0])
                    | ((lineage_events.c.event_time == last[0]) & (lineage_events.c.id > last[1]))
                )
            with self.engine.connect() as connection:
                rows = connection.execute(
                    query.order_by(lineage_events.c.event_time, lineage_events.c.id).limit(chunk_size)
                ).all()
            if not rows:
                return
            last = (rows[-1].event_time, rows[-1].id)
            yield [self.raw_text(row.payload) for row in rows]

    def recompress_raw_events(self) -> tuple[Dictionary | None, Recompressed]:
        """Rewrite the stored raw events with the store's newest dictionary (trained now if due),
        those made without it or with an older one; (None, nothing) when the store has none yet."""
        dictionary = self.raw_dictionaries.train_if_due()
        if dictionary is None:
            return None, Recompressed()
        return dictionary, self.raw_dictionaries.recompress(dictionary)

    def raw_text(self, payload: bytes) -> str:
        """The text of a stored raw event (`lineage_events.payload`), whatever dictionary compressed it."""
        return self.raw_dictionaries.text(payload)

    def clear_derived(self) -> tags.TagAssignments:
        """Empty everything derived from the raw events (for replay); the tag assignments that
        go with it are returned, for `restore_tags` once the rows exist again."""
        with self.writing() as connection:
            saved = tags.saved_assignments(connection)
            connection.execute(update(jobs).values(parent_job_id=None, current_version_id=None, declared_version_id=None))
            for table in DERIVED_TABLES:
                connection.execute(delete(table))
        return saved

    def restore_tags(self, saved: tags.TagAssignments) -> None:
        with self.writing() as connection:
            tags.restore_assignments(connection, saved)

    def rebuild(self, batch: Folded) -> None:
        """Derive the rows of stored raw events again (replay): `batch` folded in event-time order."""
        with self.writing() as connection:
            write_batch(connection, batch, store_raw=False)

    def delete_table_lineage(self, job_name: str, namespace: str | None = None) -> int:
        """Forget which datasets the job reads and writes now (and its column lineage) until its next
        event; rows removed. Its versions stay stored."""
        with self.writing() as connection:
            job_id_list = self._job_ids(connection, job_name, namespace)
            removed = connection.execute(delete(job_io).where(job_io.c.job_id.in_(job_id_list))).rowcount
            of_jobs = column_lineage_of_jobs(job_id_list, connection.dialect.name)
            removed += connection.execute(delete(column_lineage).where(of_jobs)).rowcount
            connection.execute(update(jobs).where(jobs.c.id.in_(job_id_list)).values(current_version_id=None))
            return removed

    def delete_data_lineage(self, job_name: str, namespace: str | None = None) -> int:
        """Forget the snapshots (and partitions) the job's runs consumed and produced; rows removed."""
        with self.writing() as connection:
            job_id_list = self._job_ids(connection, job_name, namespace)
            of_jobs = snapshot_lineage.c.job_id.in_(job_id_list)
            partitions = partition_lineage.c.snapshot_lineage_id.in_(select(snapshot_lineage.c.id).where(of_jobs))
            removed = connection.execute(delete(partition_lineage).where(partitions)).rowcount
            return removed + connection.execute(delete(snapshot_lineage).where(of_jobs)).rowcount

    @staticmethod
    def _job_ids(connection, job_name: str, namespace: str | None) -> list[int]:  # type: ignore[no-untyped-def]
        query = select(jobs.c.id).where(jobs.c.name == job_name)
        if namespace is not None:
            query = query.join(namespaces, namespaces.c.id == jobs.c.namespace_id).where(namespaces.c.name == namespace)
        return list(connection.execute(query).scalars())

    def retire_stale_jobs(self, retire_after: timedelta, now: datetime | None = None) -> list[str]:
        """Retire the table lineage of every job whose latest run reached a terminal state and
        which was not seen within `retire_after`; the names of the jobs retired."""
        now = now or datetime.now(timezone.utc)
        cutoff = now - retire_after
        with self.writing() as connection:
            candidates = connection.execute(
                select(jobs.c.id, jobs.c.name, job_seen_at(jobs.c.last_seen).label("last_seen"))
                .join_from(jobs, runs, runs.c.id == latest_run(jobs.c.id))
                .where(jobs.c.lineage_retired_at.is_(None), runs.c.state.in_(sorted(TERMINAL_STATES)))
            ).all()
            stale = [row for row in candidates if row.last_seen < cutoff]
            if not stale:
                return []
            stale_ids = [row.id for row in stale]
            connection.execute(delete(job_io).where(job_io.c.job_id.in_(stale_ids)))
            connection.execute(delete(column_lineage).where(column_lineage_of_jobs(stale_ids, connection.dialect.name)))
            connection.execute(update(jobs).where(jobs.c.id.in_(stale_ids)).values(lineage_retired_at=now))
            return [row.name for row in stale]

    def prune(
        self,
        older_than: timedelta,
        now: datetime | None = None,
        *,
        batch: int = retention.BATCH,
        budget_seconds: float | None = None,
        resume_at: tuple[int, Any] | None = None,
    ) -> retention.Pruned:
        """Remove what is older than `older_than` and nothing current points to (consumer.store.retention),
        in transactions of at most `batch` rows; with `budget_seconds`, no new one starts after that
        long, and the result's `resume_at` given to the next call goes on where this one stopped."""
        horizon = (now or datetime.now(timezone.utc)) - older_than
        return retention.prune(self.writing, horizon, batch=batch, budget_seconds=budget_seconds, resume_at=resume_at)

    def dispose(self) -> None:
        self.engine.dispose()
        if self._writer_lock is not None:
            self._writer_lock.release()


def open_store(url: str, *, migrate: bool = True, claim_writer: bool = False) -> Store:
    """A store on `url`, migrated to the latest schema unless `migrate` is False; with
    `claim_writer`, this process's SQLite writer lock is taken first (StoreBusy if another
    process writes), so no migration runs under another writer.
    Raises StoreUnavailable with one readable line when the database cannot be reached."""
    try:
        store = Store(engine_for(url))
        if claim_writer:
            store.claim_writer()
        if migrate:
            store.migrate()
        else:
            with store.engine.connect():
                pass
    except OperationalError as error:
        reason = str(error.orig).strip().splitlines()[0] if error.orig else str(error)
        raise StoreUnavailable(f"cannot open the lineage store {redacted_url(url)}: {reason}") from None
    return store
