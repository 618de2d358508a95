"""What one more repeated event costs a store that has seen its jobs before: bytes by table and rows.

    .venv/bin/python -m benchmarks.steady_state [--events 12000] [--batch-size 500] [--postgres URL]

Prepares the ingest benchmark's repeat workload (benchmarks.ingest.repeat_events: 300 scheduled
jobs run round robin, 1 % of runs changing their job) as ingestion does (prepare in batches with the
memo and the store's raw-event dictionary, one store transaction per batch, the dictionary trained
when due) into a fresh SQLite file (and with `--postgres`, a scratch PostgreSQL database), without
Kafka. After the first half of the events and again after the second it measures every table's
bytes with its indexes (SQLite: `dbstat` after a checkpoint; PostgreSQL: `pg_total_relation_size`,
TOAST included, after a plain VACUUM, which leaves the space of updated rows for later rows to reuse
as autovacuum does) and the rows written, updated or deleted (SQLite: each write statement's
row count; PostgreSQL: `pg_stat_user_tables`): the second half's difference divided by its events
is what a repeated event costs once its jobs are known.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from benchmarks.ingest import RowsChanged, postgres_tables, repeat_events
from benchmarks.scratch_postgres import scratch_database
from consumer.ingest.facet_memo import FacetMemo
from consumer.ingest.prepare import prepare_batch
from consumer.ingest.store_writes import StoreWrites
from consumer.store import Store, open_store


class RowsByTable(RowsChanged):
    """RowsChanged, by the table each statement wrote."""

    def __init__(self) -> None:
        super().__init__()
        self.by_table: Counter[str] = Counter()

    def _count(self, connection: Any, cursor: Any, statement: str, *rest: Any) -> None:
        before = self.rows
        super()._count(connection, cursor, statement, *rest)
        if self.rows != before and (written := _WRITTEN_TABLE.search(statement)):
            self.by_table[next(name for name in written.groups() if name)] += self.rows - before


_WRITTEN_TABLE = re.compile(r"^\s*(?:INSERT\s+(?:OR\s+\w+\s+)?INTO\s+(\w+)|UPDATE\s+(\w+)|DELETE\s+FROM\s+(\w+))", re.IGNORECASE)


def table_bytes(writes: StoreWrites) -> dict[str, int]:
    """Bytes by table, its indexes counted with it (SQLite dbstat, after a WAL checkpoint)."""
    with writes.engine.connect() as connection:
        connection.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
        rows = connection.execute(
            text(
                "SELECT coalesce(m.tbl_name, d.name), sum(d.pgsize) FROM dbstat d "
                "LEFT JOIN sqlite_master m ON m.name = d.name GROUP BY 1"
            )
        ).all()
    return {name: int(size) for name, size in rows}


def ingest(writes: StoreWrites, values: Sequence[bytes], batch_size: int, memo: FacetMemo) -> None:
    for start in range(0, len(values), batch_size):
        prepared = prepare_batch(values[start : start + batch_size], None, memo=memo, dictionary=writes.raw_dictionary())
        assert prepared.folded is not None and not prepared.refused
        writes.write_folded(prepared.folded, lambda: [])
        if writes.raw_dictionary() is None:
            writes.train_raw_dictionary()


def sqlite_growth(values: Sequence[bytes], batch_size: int) -> tuple[dict[str, float], dict[str, float]]:
    """(bytes, rows) per event of the second half of `values`, by table, on a fresh SQLite file."""
    half = len(values) // 2
    with tempfile.TemporaryDirectory() as directory:
        store = open_store(f"sqlite:///{Path(directory) / 'store.db'}")
        writes, memo, rows = StoreWrites(store), FacetMemo(), RowsByTable()
        try:
            ingest(writes, values[:half], batch_size, memo)
            before = table_bytes(writes)
            rows.watch(writes.engine)
            ingest(writes, values[half:], batch_size, memo)
            after = table_bytes(writes)
        finally:
            store.dispose()
    return _per_event(before, after, len(values) - half), _per_event({}, dict(rows.by_table), len(values) - half)


def postgres_growth(admin_url: str, values: Sequence[bytes], batch_size: int) -> tuple[dict[str, float], dict[str, float]]:
    """`sqlite_growth` on a scratch PostgreSQL database."""
    half = len(values) // 2
    url, drop = scratch_database(admin_url, "steady_state")
    try:
        store = open_store(url)
        writes, memo = StoreWrites(store), FacetMemo()
        try:
            ingest(writes, values[:half], batch_size, memo)
            before = postgres_tables(vacuumed(flushed(store, url)))
            ingest(writes, values[half:], batch_size, memo)
            after = postgres_tables(vacuumed(flushed(store, url)))
        finally:
            store.dispose()
    finally:
        drop()
    added = len(values) - half
    sizes = _per_event({name: size for name, _, size in before}, {name: size for name, _, size in after}, added)
    rows = _per_event({name: changed for name, changed, _ in before}, {name: changed for name, changed, _ in after}, added)
    return sizes, rows


def flushed(store: Store, url: str) -> str:
    """`url`, the store's connections closed: a PostgreSQL session reports its row counts to the
    statistics when it ends, but while it lives only about once per 10 s idle."""
    store.engine.dispose()
    return url


def vacuumed(url: str) -> str:
    """`url`, its database VACUUMed: the space of rows updated or deleted is free for later ones, as
    autovacuum keeps it in a store that runs for long (the files keep their size)."""
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as connection:
            connection.execute(text("VACUUM"))
    finally:
        engine.dispose()
    return url


def _per_event(before: dict[str, int], after: dict[str, int], events: int) -> dict[str, float]:
    return {table: (after.get(table, 0) - before.get(table, 0)) / events for table in set(before) | set(after)}


def report(label: str, sizes: dict[str, float], rows: dict[str, float]) -> None:
    print(
        f"{label}: rows written, updated or deleted per event {sum(rows.values()):.2f}, store bytes per event {sum(sizes.values()):,.0f}"
    )
    for table in sorted(set(sizes) | set(rows), key=lambda name: -sizes.get(name, 0)):
        if abs(sizes.get(table, 0)) >= 1 or rows.get(table, 0) >= 0.005:
            print(f"  {table:<28} {sizes.get(table, 0):8,.0f} B {rows.get(table, 0):6.2f} rows")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=12_000)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--postgres", help="also on a scratch database of this server (an admin URL)")
    args = parser.parse_args()
    values = [json.dumps(event).encode() for event in repeat_events(args.events // 2)]
    print(f"repeat workload: the last {len(values) - len(values) // 2} of {len(values)} events, batches of {args.batch_size}")
    report("SQLite", *sqlite_growth(values, args.batch_size))
    if args.postgres:
        report("PostgreSQL", *postgres_growth(args.postgres, values, args.batch_size))


if __name__ == "__main__":
    main()
