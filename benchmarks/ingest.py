"""Ingest and replay rates vs raw rate, and what the store keeps per event, for SQLite and
PostgreSQL; PostgreSQL with 1, 2 and 3 processes.

    .venv/bin/python -m benchmarks.ingest [--events 4000] [--workload new|repeat|both]
        [--batch-size 500] [--postgres URL] [--processes 3]

Produces realistic Spark write events (START + COMPLETE per run, 10-40 column-lineage edges,
two indirect JOIN inputs, schema, symlinks and snapshot facets) to a fresh topic. Workloads:
  new     every run picks random tables (today's random events): most runs are new lineage;
  repeat  300 scheduled jobs, each run many times with the same tables, schemas and column
          lineage (new run ids, snapshots and times); about 1 % of runs change the job's schema
          or an edge, which later runs keep.
Per workload and database, in the same run, it measures:
  raw     reading the topic with kafka-python and json-parsing every record;
  ingest  the consumer's real path (EventSource -> validate -> materialize -> one store
          transaction per poll -> commit offsets) into a fresh SQLite file / PostgreSQL database.
  replay  `python -m consumer replay` of the store ingest built (its own events/s figure);
  scale   PostgreSQL only: 1, 2, 3 `python -m consumer ingest` processes in one group on a
          6-partition copy of the topic, each count into a fresh database; the clock runs from
          the first event stored to the last (group joins not counted).
  store   rows written or updated per event (PostgreSQL: pg_stat_user_tables inserts + updates
          + deletes; SQLite: the rows each write statement changed), store bytes per event
          (SQLite: the file after a WAL checkpoint; PostgreSQL: pg_total_relation_size of every
          table, indexes and TOAST included) and PostgreSQL WAL bytes per event (the WAL records
          of the scratch database, from pg_walinspect; the cluster's whole WAL where that
          extension is missing);
  cpu     with 1 and 2 processes: CPU-seconds of the ingest processes and their workers per
          stored event (/proc; the database server not counted).
Both raw and ingest clocks start at the first record received, so the group join is not counted.
Beside raw and ingest, how many of the machine's cores were busy meanwhile (every process: the
consumer and its worker, the database server, the broker; from /proc/stat).
Uses $KAFKA_BOOTSTRAP_SERVERS, else starts an Apache Kafka broker (demo.broker) on a free port.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from benchmarks.proc_stat import live_processes
from benchmarks.scratch_postgres import scratch_database
from consumer.ingest.kafka_io import DeadLetters, EventSource
from consumer.ingest.kafka_loop import Ingestor, SourceState
from consumer.ingest.prepare import tune_garbage_collector
from consumer.store import open_store
from demo.broker import start_kafka
from tests.support.events import BASE_TIME, batch_write, table, with_column_lineage


def spark_events(runs: int, seed: int = 7) -> Iterator[dict[str, Any]]:
    """START and COMPLETE of `runs` write actions over 300 tables; 10-40 column edges each."""
    rng = random.Random(seed)
    for index in range(runs):
        width = rng.randint(10, 40)
        columns = [f"col_{i}" for i in range(width)]
        source = _table(f"src_{rng.randrange(300)}", columns, snapshot=f"in-{index}")
        dim = f"dim_{rng.randrange(20)}"
        target_name = f"tgt_{rng.randrange(300)}"
        yield from _run(index, source, dim, (target_name, columns), {c: [(source, c)] for c in columns}, rng)


def _run(
    index: int,
    source: dict[str, Any],
    dim_name: str,
    target: tuple[str, list[str]],
    lineage: dict[str, list[Any]],
    rng: random.Random,
) -> list[dict[str, Any]]:
    """START and COMPLETE of run `index`: `source` and a dimension joined into `target` (name, columns)."""
    dim = _table(dim_name, ["key", "label"], snapshot=f"dim-{index // 50}")
    output = with_column_lineage(
        _table(target[0], target[1], snapshot=f"out-{index}"),
        lineage,
        indirect=[(source, "col_0", "JOIN"), (dim, "key", "JOIN")],
    )
    run_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    return batch_write(
        f"bench.insert_into.{target[0]}",
        [source, dim],
        output,
        run_id=run_id,
        start=BASE_TIME + timedelta(seconds=index * 10),
        duration=timedelta(seconds=7),
    )


REPEAT_JOBS = 300
REPEAT_CHANGE_RATE = 0.01


class _ScheduledJob:
    """A job reading one source table (and a dimension) and writing its own target; its target's
    columns are the source's plus those its changes added (fed from col_0)."""

    def __init__(self, number: int, source: tuple[str, list[str]], rng: random.Random) -> None:
        self.target = f"tgt_{number}"
        self.source, self.source_columns = source
        self.dim = f"dim_{rng.randrange(20)}"
        self.added: list[str] = []
        self.moved: set[str] = set()  # output columns read from col_0 instead of their namesake

    def change(self, rng: random.Random) -> None:
        if rng.random() < 0.5:
            self.added = [*self.added, f"added_{len(self.added)}"]
        else:
            self.moved = {*self.moved, rng.choice(self.source_columns)}

    def lineage(self, source: dict[str, Any]) -> dict[str, list[Any]]:
        direct = {c: [(source, "col_0" if c in self.moved else c)] for c in self.source_columns}
        return {**direct, **{c: [(source, "col_0")] for c in self.added}}


def repeat_events(runs: int, seed: int = 11) -> Iterator[dict[str, Any]]:
    """START and COMPLETE of `runs` runs of REPEAT_JOBS scheduled jobs over 100 source tables,
    round robin: each job keeps its tables, schemas and column lineage from run to run (new run
    id, snapshots and times); a run changes its job (one more output column, or one edge moved to
    another input column) with probability REPEAT_CHANGE_RATE, and the job's later runs keep it."""
    rng = random.Random(seed)
    sources = [(f"src_{number}", [f"col_{i}" for i in range(rng.randint(10, 40))]) for number in range(100)]
    jobs = [_ScheduledJob(number, rng.choice(sources), rng) for number in range(REPEAT_JOBS)]
    for index in range(runs):
        job = jobs[index % REPEAT_JOBS]
        if rng.random() < REPEAT_CHANGE_RATE:
            job.change(rng)
        source = _table(job.source, job.source_columns, snapshot=f"in-{index}")
        yield from _run(index, source, job.dim, (job.target, [*job.source_columns, *job.added]), job.lineage(source), rng)


WORKLOADS: dict[str, Callable[[int], Iterator[dict[str, Any]]]] = {"new": spark_events, "repeat": repeat_events}


def _table(name: str, columns: list[str], snapshot: str) -> dict[str, Any]:
    return table("bench", name, columns, snapshot=snapshot, location=f"/warehouse/bench.db/{name}")


def produce(bootstrap: str, topic: str, runs: int, partitions: int = 1, workload: str = "new") -> int:
    if partitions > 1:
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=256 * 1024)
    count = 0
    for event in WORKLOADS[workload](runs):
        producer.send(topic, key=event["run"]["runId"].encode(), value=json.dumps(event).encode())
        count += 1
    producer.flush()
    producer.close()
    return count


class BusyCores:
    """Cores busy on the whole machine between `start` and `stop` (None where /proc/stat is missing)."""

    def __init__(self) -> None:
        self._start: tuple[int, int] | None = None
        self.busy: float | None = None

    def start(self) -> None:
        self._start = _cpu_ticks()

    def stop(self) -> None:
        end = _cpu_ticks()
        if self._start is not None and end is not None and end[1] > self._start[1]:
            self.busy = (end[0] - self._start[0]) / (end[1] - self._start[1]) * (os.cpu_count() or 1)

    def __str__(self) -> str:
        return "" if self.busy is None else f" ({self.busy:.1f} of {os.cpu_count()} cores busy)"


def _cpu_ticks() -> tuple[int, int] | None:
    """(busy, all) clock ticks of every CPU since boot."""
    try:
        ticks = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    return sum(ticks) - idle, sum(ticks)


def raw_rate(bootstrap: str, topic: str, expected: int, cores: BusyCores | None = None) -> float:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, max_poll_records=500)
    partitions = [TopicPartition(topic, number) for number in sorted(consumer.partitions_for_topic(topic) or {0})]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    cores = cores or BusyCores()
    seen, started = 0, None
    while seen < expected:
        for records in consumer.poll(timeout_ms=1000).values():
            if started is None:
                started = time.perf_counter()
                cores.start()
            for record in records:
                json.loads(record.value)
                seen += 1
    elapsed = time.perf_counter() - (started or time.perf_counter())
    cores.stop()
    consumer.close()
    return seen / elapsed


class _FirstArrival:
    """Wraps the event source to note when the first records arrived (after the group join)."""

    def __init__(self, source: EventSource, cores: BusyCores) -> None:
        self.source = source
        self.cores = cores
        self.first_arrival: float | None = None

    def poll(self, timeout_ms: int) -> list[Any]:
        records = self.source.poll(timeout_ms)
        if records and self.first_arrival is None:
            self.first_arrival = time.perf_counter()
            self.cores.start()
        return records

    def commit(self, next_offsets: dict[tuple[str, int], int]) -> bool:
        return self.source.commit(next_offsets)

    def rewind(self, first_offsets: dict[tuple[str, int], int]) -> None:
        self.source.rewind(first_offsets)

    def on_revoke(self, callback: Callable[[], object]) -> None:
        self.source.on_revoke(callback)

    def state(self) -> SourceState:
        return self.source.state()


def ingest_rate(
    store_url: str,
    bootstrap: str,
    topic: str,
    expected: int,
    batch_size: int,
    cores: BusyCores | None = None,
    rows: RowsChanged | None = None,
) -> float:
    store = open_store(store_url)
    if rows is not None:
        rows.watch(store.engine)
    source = EventSource(bootstrap, topic, f"bench-{uuid.uuid4().hex[:8]}", max_records=batch_size)
    cores = cores or BusyCores()
    timed = _FirstArrival(source, cores)
    dead_letters = DeadLetters(bootstrap, f"{topic}.dlq")
    ingestor = Ingestor(store, timed, dead_letters, poll_timeout_ms=1000)
    # Until every event is stored: records re-read after a rebalance count against the rate.
    while ingestor.stats.stored < expected:
        ingestor.run_once()
    elapsed = time.perf_counter() - (timed.first_arrival or time.perf_counter())
    cores.stop()
    ingestor.close()
    source.close()
    dead_letters.close()
    store.dispose()
    if ingestor.stats.dead_lettered:
        raise SystemExit(f"ingest went wrong: {ingestor.stats}")
    return expected / elapsed


class RowsChanged:
    """SQLite: the rows every INSERT/UPDATE/DELETE of an engine changed (the driver's rowcount)."""

    def __init__(self) -> None:
        self.rows = 0

    def watch(self, engine: Any) -> None:
        from sqlalchemy import event

        event.listen(engine, "after_cursor_execute", self._count)

    def _count(self, _connection: Any, cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip()[:6].upper() in ("INSERT", "UPDATE", "DELETE") and cursor.rowcount > 0:
            self.rows += cursor.rowcount


def postgres_rows_changed(url: str) -> int:
    """Rows inserted, updated and deleted in every table of the database so far (statistics)."""
    time.sleep(1.5)  # statistics reach the shared view at most once a second
    engine = create_engine(url)
    with engine.connect() as connection:
        connection.execute(text("SELECT pg_stat_clear_snapshot()"))
        rows = connection.execute(
            text("SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables")
        ).scalar_one()
    engine.dispose()
    return int(rows)


def postgres_tables(url: str) -> list[tuple[str, int, int]]:
    """(table, rows inserted + updated + deleted, bytes with indexes and TOAST), largest first."""
    time.sleep(1.5)
    engine = create_engine(url)
    with engine.connect() as connection:
        connection.execute(text("SELECT pg_stat_clear_snapshot()"))
        rows = connection.execute(
            text(
                "SELECT relname, n_tup_ins + n_tup_upd + n_tup_del, pg_total_relation_size(relid) FROM pg_stat_user_tables "
                "ORDER BY 3 DESC"
            )
        ).all()
    engine.dispose()
    return [(name, int(changed), int(size)) for name, changed, size in rows]


def store_bytes(url: str) -> int:
    """SQLite: the file after a checkpoint; PostgreSQL: every table with its indexes and TOAST."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            if engine.dialect.name == "sqlite":
                connection.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
                assert engine.url.database
                return Path(engine.url.database).stat().st_size
            return int(
                connection.execute(
                    text("SELECT coalesce(sum(pg_total_relation_size(relid)), 0) FROM pg_stat_user_tables")
                ).scalar_one()
            )
    finally:
        engine.dispose()


class WalMeter:
    """PostgreSQL WAL written for one database between `start` and `stop`: pg_walinspect's records
    touching that database's relations, or (without the extension) the whole cluster's WAL."""

    def __init__(self, url: str) -> None:
        self.engine = create_engine(url, isolation_level="AUTOCOMMIT")
        self.start_lsn = ""
        with self.engine.connect() as connection:
            try:
                connection.execute(text("CREATE EXTENSION IF NOT EXISTS pg_walinspect"))
                self.inspect = True
            except DBAPIError:  # not installed on this server
                self.inspect = False
            self.database_oid = connection.execute(
                text("SELECT oid FROM pg_database WHERE datname = current_database()")
            ).scalar_one()

    def start(self) -> None:
        with self.engine.connect() as connection:
            self.start_lsn = connection.execute(text("SELECT pg_current_wal_insert_lsn()::text")).scalar_one()

    def stop(self) -> tuple[int, str]:
        """(bytes, of what): this database's WAL records, or the whole cluster's WAL when the records
        are gone already (the server recycles segments under load) or pg_walinspect is missing."""
        bounds = {"a": self.start_lsn}
        try:
            with self.engine.connect() as connection:
                bounds["b"] = connection.execute(text("SELECT pg_current_wal_flush_lsn()::text")).scalar_one()
                if self.inspect:
                    try:
                        written = connection.execute(
                            text(
                                "SELECT coalesce(sum(record_length), 0) FROM pg_get_wal_records_info("
                                "CAST(:a AS pg_lsn), CAST(:b AS pg_lsn)) WHERE block_ref LIKE :rel"
                            ),
                            {**bounds, "rel": f"%/{self.database_oid}/%"},
                        ).scalar_one()
                        return int(written), "this database"
                    except DBAPIError as error:  # a segment was recycled meanwhile
                        print(f"WAL records not readable ({str(error.orig).strip()}): the cluster's WAL instead", file=sys.stderr)
                written = connection.execute(
                    text("SELECT pg_wal_lsn_diff(CAST(:b AS pg_lsn), CAST(:a AS pg_lsn))"), bounds
                ).scalar_one()
                return int(written), "whole cluster"
        finally:
            self.engine.dispose()


def replay_rate(store_url: str) -> float:
    """The events/s `consumer replay` reports for the whole store."""
    result = subprocess.run(
        [sys.executable, "-m", "consumer", "replay", "--store", store_url], capture_output=True, text=True, check=True
    )
    found = re.search(r"\((\d+) events/s\)", result.stdout)
    if not found:
        raise SystemExit(f"replay printed no rate: {result.stdout} {result.stderr}")
    return float(found.group(1))


def _process_tree_cpu_seconds(roots: list[int]) -> float:
    """User + system CPU-seconds of the processes `roots` and their children (from /proc)."""
    processes = {process.pid: process for process in live_processes()}
    tree = set(roots)
    grown = True
    while grown:
        children = {pid for pid, process in processes.items() if process.parent in tree} - tree
        grown = bool(children)
        tree |= children
    return sum(processes[pid].cpu_seconds for pid in tree if pid in processes)


def processes_rate(
    store_url: str,
    bootstrap: str,
    topic: str,
    expected: int,
    processes: int,
    batch_size: int,
    cores: BusyCores,
    cpu: list[float] | None = None,
) -> float:
    """`processes` ingest processes in one group; events/s from the first event stored to the last.
    `cpu` gets the processes' (and their workers') CPU-seconds per event stored meanwhile."""
    env = {
        **os.environ,
        "LINEAGE_STORE_URL": store_url,
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "LINEAGE_TOPIC": topic,
        "LINEAGE_GROUP": f"bench-{uuid.uuid4().hex[:8]}",
        "LINEAGE_DEAD_LETTER_TOPIC": f"{topic}.dlq",
        "LINEAGE_BATCH_SIZE": str(batch_size),
    }
    open_store(store_url).dispose()  # migrate once, before the processes race to
    engine = create_engine(store_url)
    workers = [
        subprocess.Popen([sys.executable, "-m", "consumer", "ingest"], env=env, stderr=subprocess.DEVNULL)
        for _ in range(processes)
    ]
    first: tuple[float, int] | None = None
    try:
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            with engine.connect() as connection:
                stored = connection.execute(text("SELECT count(*) FROM lineage_events")).scalar_one()
            now = time.perf_counter()
            if stored and first is None:
                first = (now, stored)
                first_cpu = _process_tree_cpu_seconds([worker.pid for worker in workers])
                cores.start()
            if stored >= expected:
                assert first is not None
                cores.stop()
                if cpu is not None:
                    spent = _process_tree_cpu_seconds([worker.pid for worker in workers]) - first_cpu
                    cpu.append(spent / max(stored - first[1], 1))
                return (stored - first[1]) / max(now - first[0], 1e-9)
            time.sleep(0.2)
        raise SystemExit(f"{processes} ingest processes did not store {expected} events in time")
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(timeout=60)
        engine.dispose()


def measure(label: str, url: str, bootstrap: str, topic: str, count: int, batch_size: int, tables: bool = False) -> str:
    """One database's line: rates, rows, bytes and (PostgreSQL) WAL per event."""
    raw_cores, ingest_cores = BusyCores(), BusyCores()
    raw = raw_rate(bootstrap, topic, count, raw_cores)
    sqlite = url.startswith("sqlite")
    rows = RowsChanged() if sqlite else None
    wal = None if sqlite else WalMeter(url)
    if wal is not None:
        wal.start()
    ingest = ingest_rate(url, bootstrap, topic, count, batch_size, ingest_cores, rows)
    wal_text = ""
    if wal is not None:
        written, how = wal.stop()
        wal_text = f"   WAL {written / count:7.0f} B/event ({how})"
    changed = rows.rows if rows is not None else postgres_rows_changed(url)
    size = store_bytes(url)
    per_table = postgres_tables(url) if tables and not sqlite else []
    replay = replay_rate(url)
    return (
        f"{label:<11} raw {raw:7.0f} events/s{raw_cores}   ingest {ingest:6.0f} events/s{ingest_cores}"
        f"   ratio {ingest / raw:.3f}   replay {replay:6.0f} events/s   rows {changed / count:5.1f}/event"
        f"   store {size / count:7.0f} B/event{wal_text}"
    ) + "".join(
        f"\n    {name:<20} rows {changed / count:5.2f}/event   {size / count:7.0f} B/event" for name, changed, size in per_table
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=4000, help="events to produce (two per run)")
    parser.add_argument("--workload", choices=("new", "repeat", "both"), default="both", help="see the module's docstring")
    parser.add_argument("--batch-size", type=int, default=500, help="records per poll / store transaction")
    parser.add_argument("--tables", action="store_true", help="PostgreSQL: rows and bytes per event of each table too")
    parser.add_argument("--processes", type=int, default=3, help="PostgreSQL: up to this many ingest processes")
    parser.add_argument(
        "--postgres",
        default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres",
        help="admin URL of a PostgreSQL where a scratch database is created and dropped",
    )
    args = parser.parse_args()
    tune_garbage_collector()  # as `python -m consumer` does
    workloads = ["new", "repeat"] if args.workload == "both" else [args.workload]

    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    broker = None
    if not bootstrap:
        broker = start_kafka(Path(tempfile.mkdtemp(prefix="bench-kafka-")))
        bootstrap = broker.bootstrap
    try:
        for workload in workloads:
            run_workload(workload, bootstrap, args)
    finally:
        if broker is not None:
            broker.stop()


def run_workload(workload: str, bootstrap: str, args: argparse.Namespace) -> None:
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    count = produce(bootstrap, topic, args.events // 2, workload=workload)
    print(f"workload {workload}: {count} events on {topic}")
    with tempfile.TemporaryDirectory() as scratch:
        print(measure("sqlite", f"sqlite:///{Path(scratch) / 'bench.db'}", bootstrap, topic, count, args.batch_size))
        pg_url, drop_pg = scratch_database(args.postgres, "lineage_bench")
        try:
            print(measure("postgresql", pg_url, bootstrap, topic, count, args.batch_size, args.tables))
        finally:
            drop_pg()
    scaled_topic = f"bench-{uuid.uuid4().hex[:8]}"
    produce(bootstrap, scaled_topic, args.events // 2, partitions=6, workload=workload)
    rates: list[float] = []
    cpu: list[float] = []
    for processes in range(1, args.processes + 1):
        pg_url, drop_pg = scratch_database(args.postgres, "lineage_bench")
        cores = BusyCores()
        try:
            rates.append(processes_rate(pg_url, bootstrap, scaled_topic, count, processes, args.batch_size, cores, cpu))
        finally:
            drop_pg()
        print(
            f"postgresql  {processes} ingest process{'es' if processes > 1 else '  '} on 6 partitions "
            f"{rates[-1]:8.0f} events/s{cores}   x{_ratio(rates[-1], rates[0])} of one"
            f"   {cpu[-1] * 1000:6.2f} CPU-ms/event (x{_ratio(cpu[-1], cpu[0])} of one)"
        )


def _ratio(value: float, of: float) -> str:
    return f"{value / of:.2f}" if of else "-"


if __name__ == "__main__":
    main()
