"""Retention: store bytes before and after pruning a year of hourly runs to 30 days, and what the
prune costs ingestion running beside it, on SQLite and PostgreSQL.

    .venv/bin/python -m benchmarks.retention [--days 365] [--postgres URL] [--sqlite-only]

The store: the history of tests/support/history.py (two hourly jobs, a daily one; `--days` of it).
Bytes: SQLite's file after `VACUUM` and a WAL checkpoint; PostgreSQL's pg_total_relation_size of
every table after `VACUUM` (the space of deleted rows reusable, the files as large) and after
`VACUUM FULL` (the files rewritten). Then the same store twice more, side by side: ingestion alone
for as long as the prune took, and ingestion while `prune --older-than 30d` runs (in another
thread, through its own store connection as another process would on PostgreSQL; on SQLite through
the one writer, as `serve --retention` does): the prune's seconds, ingestion's events/s, and its
slowest batch (how long a batch waited for the prune at most)."""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from consumer.ingest.materialize import materialize
from consumer.ingest.store_writes import StoreWrites
from consumer.ingest.validate import validate
from consumer.store import Store, open_store
from consumer.store.retention import PRUNED_TABLES
from tests.support.events import BASE_TIME
from tests.support.history import report, stage, year_of_events

RETENTION = timedelta(days=30)
CHUNK = 2000
LIVE_BATCH = 100  # events per ingestion transaction while pruning (50 hours of both hourly jobs)


def _write(store: Store, events: Iterator[dict[str, Any]]) -> None:
    writes = StoreWrites(store)
    chunk: list[Any] = []
    for event in events:
        chunk.append(materialize(validate(event)))
        if len(chunk) == CHUNK:
            writes.write(chunk)
            chunk = []
    if chunk:
        writes.write(chunk)


def _history(days: int) -> Iterator[dict[str, Any]]:
    hours = days * 24
    for event in year_of_events():
        if event["eventTime"] < (BASE_TIME + timedelta(hours=hours)).isoformat().replace("+00:00", "Z"):
            yield event


def _live_batches(first_hour: int) -> Iterator[list[Any]]:
    """Ingestion of the hours after the history: batches of LIVE_BATCH events."""
    hour = first_hour
    while True:
        events = [event for h in range(hour, hour + LIVE_BATCH // 2) for event in stage(h) + report(h)]
        hour += LIVE_BATCH // 2
        yield [materialize(validate(event)) for event in events]


def _rows(store: Store) -> int:
    with store.engine.connect() as connection:
        return sum(connection.execute(text(f"SELECT count(*) FROM {name}")).scalar_one() for name in PRUNED_TABLES)


def _bytes(store: Store, full: bool = False) -> int:
    engine = store.engine
    if engine.dialect.name == "sqlite":
        with engine.connect() as connection:
            connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            connection.exec_driver_sql("VACUUM")
            connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        return os.path.getsize(str(engine.url.database))
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.exec_driver_sql("VACUUM FULL" if full else "VACUUM")
        return connection.execute(
            text(
                "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relkind = 'r' AND n.nspname = current_schema()"
            )
        ).scalar_one()


def _ingest_while(store: Store, first_hour: int, busy: threading.Event | None, seconds: float) -> tuple[int, float, float]:
    """Ingest live batches while `busy` is set (or for `seconds`); (events, seconds, slowest batch seconds)."""
    writes = StoreWrites(store)
    events, slowest = 0, 0.0
    started = time.perf_counter()
    for batch in _live_batches(first_hour):
        if busy is not None and not busy.is_set():
            break
        if busy is None and time.perf_counter() - started >= seconds:
            break
        before = time.perf_counter()
        writes.write(batch)
        slowest = max(slowest, time.perf_counter() - before)
        events += len(batch)
    return events, time.perf_counter() - started, slowest


def measure(url: str, days: int) -> dict[str, Any]:
    store = open_store(url)
    _write(store, _history(days))
    end = BASE_TIME + timedelta(days=days)
    figures: dict[str, Any] = {"rows before": _rows(store), "bytes before": _bytes(store)}
    if store.engine.dialect.name == "postgresql":
        figures["bytes before, VACUUM FULL"] = _bytes(store, full=True)
    # ingestion alone first (A), then while pruning (B), on the same store: the prune's horizon is
    # the end of the history, so what the live hours add is never pruned.
    prune_store = open_store(url) if store.engine.dialect.name == "postgresql" else store
    busy = threading.Event()
    busy.set()
    outcome: dict[str, Any] = {}

    def prune() -> None:
        started = time.perf_counter()
        outcome["pruned"] = prune_store.prune(RETENTION, end)
        outcome["seconds"] = time.perf_counter() - started
        busy.clear()

    pruning = threading.Thread(target=prune)
    # A: ingestion alone for a fixed while (the prune's length is not known yet)
    alone = _ingest_while(store, days * 24, None, 10.0)
    pruning.start()
    during = _ingest_while(store, days * 24 + 100_000, busy, 0.0)
    pruning.join()
    figures["prune seconds"] = outcome["seconds"]
    figures["removed"] = outcome["pruned"].rows
    figures["ingest alone events/s"] = alone[0] / alone[1]
    figures["ingest alone slowest batch s"] = alone[2]
    figures["ingest while pruning events/s"] = during[0] / during[1] if during[1] else 0.0
    figures["ingest while pruning slowest batch s"] = during[2]
    figures["rows after"] = _rows(store)
    figures["bytes after"] = _bytes(store)
    if store.engine.dialect.name == "postgresql":
        figures["bytes after, VACUUM FULL"] = _bytes(store, full=True)
        prune_store.dispose()
    store.dispose()
    return figures


def _postgres_database(admin_url: str) -> tuple[str, Any]:
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    name = f"retention_bench_{uuid.uuid4().hex[:8]}"
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()

    return admin_url.rsplit("/", 1)[0] + f"/{name}", drop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--postgres", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--sqlite-only", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        results = {"SQLite": measure(f"sqlite:///{Path(folder) / 'lineage.db'}", args.days)}
    if not args.sqlite_only:
        url, drop = _postgres_database(args.postgres)
        try:
            results["PostgreSQL"] = measure(url, args.days)
        finally:
            drop()
    for database, figures in results.items():
        print(f"## {database}")
        for name, value in figures.items():
            print(
                f"{name}: {value:,.2f}"
                if isinstance(value, float)
                else f"{name}: {value:,}"
                if isinstance(value, int)
                else f"{name}: {value}"
            )


if __name__ == "__main__":
    main()
