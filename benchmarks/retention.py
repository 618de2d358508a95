"""Retention: store bytes before and after pruning a year of hourly runs to 30 days, and what the
prune costs ingestion running beside it, on SQLite and PostgreSQL.

    .venv/bin/python -m benchmarks.retention [--days 365] [--postgres URL] [--sqlite-only]

The store: the history of tests/support/history.py (two hourly jobs, a daily one; `--days` of it),
built twice per database. The first is pruned with nothing else running: rows of the pruned tables
and bytes before and after (SQLite's file after `VACUUM` and a WAL checkpoint; PostgreSQL's
pg_total_relation_size of every table after `VACUUM`, which makes the space of deleted rows
reusable but keeps the files, and after `VACUUM FULL`, which rewrites them). The second is pruned
while ingestion of later hours runs in batches of 100 events (the prune in another thread, on
PostgreSQL through a store connection of its own as another process; on SQLite through the one
writer, as `--retention` does), with ingestion alone for 10 s before and after: the prune's seconds,
ingestion's events/s alone and while pruning, and its slowest batch (how long a batch waited for a
prune transaction at most)."""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import text

from benchmarks.scratch_postgres import scratch_database
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


def measure_bytes(url: str, days: int) -> dict[str, Any]:
    """A store of `days` of history pruned to 30 days, nothing else running: rows and bytes before and after."""
    store = open_store(url)
    _write(store, _history(days))
    postgres = store.engine.dialect.name == "postgresql"
    figures: dict[str, Any] = {"rows before": _rows(store), "bytes before": _bytes(store)}
    if postgres:
        figures["bytes before, VACUUM FULL"] = _bytes(store, full=True)
    started = time.perf_counter()
    pruned = store.prune(RETENTION, BASE_TIME + timedelta(days=days))
    figures["prune alone seconds"] = time.perf_counter() - started
    figures["removed"] = pruned.rows
    figures["rows after"] = _rows(store)
    figures["bytes after"] = _bytes(store)
    if postgres:
        figures["bytes after, VACUUM FULL"] = _bytes(store, full=True)
    store.dispose()
    return figures


def measure_beside_ingestion(url: str, days: int) -> dict[str, Any]:
    """The same store pruned while ingestion runs: ingestion alone for 10 s before and after (A),
    and while the prune runs (B); the prune's seconds and the slowest ingestion batch of each."""
    store = open_store(url)
    _write(store, _history(days))
    # PostgreSQL: the prune on a connection of its own, as another process; SQLite: through the one writer.
    prune_store = open_store(url) if store.engine.dialect.name == "postgresql" else store
    busy = threading.Event()
    busy.set()
    outcome: dict[str, Any] = {}

    def prune() -> None:
        started = time.perf_counter()
        outcome["pruned"] = prune_store.prune(RETENTION, BASE_TIME + timedelta(days=days))
        outcome["seconds"] = time.perf_counter() - started
        busy.clear()

    # the live hours come after the history's end, so the prune never removes them
    first = _ingest_while(store, days * 24, None, 10.0)
    pruning = threading.Thread(target=prune)
    pruning.start()
    during = _ingest_while(store, days * 24 + 100_000, busy, 0.0)
    pruning.join()
    second = _ingest_while(store, days * 24 + 200_000, None, 10.0)
    if prune_store is not store:
        prune_store.dispose()
    store.dispose()
    alone_events, alone_seconds = first[0] + second[0], first[1] + second[1]
    return {
        "prune beside ingestion seconds": outcome["seconds"],
        "ingest alone events/s": alone_events / alone_seconds,
        "ingest alone slowest batch s": max(first[2], second[2]),
        "ingest while pruning events/s": during[0] / during[1] if during[1] else 0.0,
        "ingest while pruning slowest batch s": during[2],
        "ingest while pruning batches": during[0] // LIVE_BATCH,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--postgres", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--sqlite-only", action="store_true")
    args = parser.parse_args()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as folder:
        results["SQLite"] = measure_bytes(f"sqlite:///{Path(folder) / 'bytes.db'}", args.days)
        results["SQLite"] |= measure_beside_ingestion(f"sqlite:///{Path(folder) / 'beside.db'}", args.days)
    if not args.sqlite_only:
        figures: dict[str, Any] = {}
        for measure in (measure_bytes, measure_beside_ingestion):
            url, drop = scratch_database(args.postgres, "retention_bench")
            try:
                figures |= measure(url, args.days)
            finally:
                drop()
        results["PostgreSQL"] = figures
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
