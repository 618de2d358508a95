"""Ingest and replay rates vs raw rate, for SQLite and PostgreSQL; PostgreSQL with 1, 2 and 3 processes.

    .venv/bin/python -m benchmarks.ingest [--events 4000] [--batch-size 500] [--postgres URL] [--processes 3]

Produces realistic Spark write events (START + COMPLETE per run, 10-40 column-lineage edges,
two indirect JOIN inputs, schema, symlinks and snapshot facets) to a fresh topic, then in the
same run measures:
  raw     reading the topic with kafka-python and json-parsing every record;
  ingest  the consumer's real path (EventSource -> validate -> materialize -> one store
          transaction per poll -> commit offsets) into a fresh SQLite file / PostgreSQL database.
  replay  `python -m consumer replay` of the store ingest built (its own events/s figure);
  scale   PostgreSQL only: 1, 2, 3 `python -m consumer ingest` processes in one group on a
          6-partition copy of the topic, each count into a fresh database; the clock runs from
          the first event stored to the last (group joins not counted).
Both raw and ingest clocks start at the first record received, so Tansu's group-join delay is not counted.
Beside raw and ingest, how many of the machine's cores were busy meanwhile (every process: the
consumer and its worker, the database server, the broker; from /proc/stat).
Uses $KAFKA_BOOTSTRAP_SERVERS, else starts a Tansu broker (demo.broker) on a free port.
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

from consumer.ingest.kafka_io import DeadLetters, EventSource
from consumer.ingest.kafka_loop import Ingestor, SourceState
from consumer.ingest.prepare import tune_garbage_collector
from consumer.store import open_store
from demo.broker import start_tansu
from tests.support.events import BASE_TIME, batch_write, table, with_column_lineage


def spark_events(runs: int, seed: int = 7) -> Iterator[dict[str, Any]]:
    """START and COMPLETE of `runs` write actions over 300 tables; 10-40 column edges each."""
    rng = random.Random(seed)
    for index in range(runs):
        width = rng.randint(10, 40)
        columns = [f"col_{i}" for i in range(width)]
        source = _table(f"src_{rng.randrange(300)}", columns, snapshot=f"in-{index}")
        dim = _table(f"dim_{rng.randrange(20)}", ["key", "label"], snapshot=f"dim-{index // 50}")
        target_name = f"tgt_{rng.randrange(300)}"
        output = with_column_lineage(
            _table(target_name, columns, snapshot=f"out-{index}"),
            {c: [(source, c)] for c in columns},
            indirect=[(source, "col_0", "JOIN"), (dim, "key", "JOIN")],
        )
        run_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        yield from batch_write(
            f"bench.insert_into.{target_name}",
            [source, dim],
            output,
            run_id=run_id,
            start=BASE_TIME + timedelta(seconds=index * 10),
            duration=timedelta(seconds=7),
        )


def _table(name: str, columns: list[str], snapshot: str) -> dict[str, Any]:
    return table("bench", name, columns, snapshot=snapshot, location=f"/warehouse/bench.db/{name}")


def produce(bootstrap: str, topic: str, runs: int, partitions: int = 1) -> int:
    if partitions > 1:
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=256 * 1024)
    count = 0
    for event in spark_events(runs):
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
    store_url: str, bootstrap: str, topic: str, expected: int, batch_size: int, cores: BusyCores | None = None
) -> float:
    store = open_store(store_url)
    source = EventSource(
        bootstrap,
        topic,
        f"bench-{uuid.uuid4().hex[:8]}",
        max_records=batch_size,
        session_timeout_ms=10000,
        max_poll_interval_ms=30000,
    )
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


def replay_rate(store_url: str) -> float:
    """The events/s `consumer replay` reports for the whole store."""
    result = subprocess.run(
        [sys.executable, "-m", "consumer", "replay", "--store", store_url], capture_output=True, text=True, check=True
    )
    found = re.search(r"\((\d+) events/s\)", result.stdout)
    if not found:
        raise SystemExit(f"replay printed no rate: {result.stdout} {result.stderr}")
    return float(found.group(1))


def processes_rate(
    store_url: str, bootstrap: str, topic: str, expected: int, processes: int, batch_size: int, cores: BusyCores
) -> float:
    """`processes` ingest processes in one group; events/s from the first event stored to the last."""
    env = {
        **os.environ,
        "LINEAGE_STORE_URL": store_url,
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "LINEAGE_TOPIC": topic,
        "LINEAGE_GROUP": f"bench-{uuid.uuid4().hex[:8]}",
        "LINEAGE_DEAD_LETTER_TOPIC": f"{topic}.dlq",
        "LINEAGE_BATCH_SIZE": str(batch_size),
        "LINEAGE_SESSION_TIMEOUT_MS": "6000",
        "LINEAGE_MAX_POLL_INTERVAL_MS": "30000",
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
                cores.start()
            if stored >= expected:
                assert first is not None
                cores.stop()
                return (stored - first[1]) / max(now - first[0], 1e-9)
            time.sleep(0.2)
        raise SystemExit(f"{processes} ingest processes did not store {expected} events in time")
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(timeout=60)
        engine.dispose()


def _fresh_postgres(admin_url: str) -> tuple[str, str]:
    name = f"lineage_bench_{uuid.uuid4().hex[:8]}"
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return admin_url.rsplit("/", 1)[0] + f"/{name}", name


def _drop_postgres(admin_url: str, name: str) -> None:
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=4000, help="events to produce (two per run)")
    parser.add_argument("--batch-size", type=int, default=500, help="records per poll / store transaction")
    parser.add_argument("--processes", type=int, default=3, help="PostgreSQL: up to this many ingest processes")
    parser.add_argument(
        "--postgres",
        default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres",
        help="admin URL of a PostgreSQL where a scratch database is created and dropped",
    )
    args = parser.parse_args()
    tune_garbage_collector()  # as `python -m consumer` does

    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    broker = None
    if not bootstrap:
        broker = start_tansu(Path(tempfile.mkdtemp(prefix="bench-tansu-")))
        bootstrap = broker.bootstrap
    try:
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        count = produce(bootstrap, topic, args.events // 2)
        print(f"{count} events on {topic}")
        with tempfile.TemporaryDirectory() as scratch:
            targets: list[tuple[str, str, str | None]] = [("sqlite", f"sqlite:///{Path(scratch) / 'bench.db'}", None)]
            pg_url, pg_name = _fresh_postgres(args.postgres)
            targets.append(("postgresql", pg_url, pg_name))
            try:
                for label, url, _ in targets:
                    raw_cores, ingest_cores = BusyCores(), BusyCores()
                    raw = raw_rate(bootstrap, topic, count, raw_cores)
                    ingest = ingest_rate(url, bootstrap, topic, count, args.batch_size, ingest_cores)
                    replay = replay_rate(url)
                    print(
                        f"{label:<11} raw {raw:9.0f} events/s{raw_cores}   ingest {ingest:8.0f} events/s{ingest_cores}"
                        f"   ratio {ingest / raw:.3f}   replay {replay:8.0f} events/s"
                    )
            finally:
                _drop_postgres(args.postgres, pg_name)
        scaled_topic = f"bench-{uuid.uuid4().hex[:8]}"
        produce(bootstrap, scaled_topic, args.events // 2, partitions=6)
        rates: list[float] = []
        for processes in range(1, args.processes + 1):
            pg_url, pg_name = _fresh_postgres(args.postgres)
            cores = BusyCores()
            try:
                rates.append(processes_rate(pg_url, bootstrap, scaled_topic, count, processes, args.batch_size, cores))
            finally:
                _drop_postgres(args.postgres, pg_name)
            print(
                f"postgresql  {processes} ingest process{'es' if processes > 1 else '  '} on 6 partitions "
                f"{rates[-1]:8.0f} events/s{cores}   x{rates[-1] / rates[0]:.2f} of one"
            )
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
