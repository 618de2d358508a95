"""Ingest of real Spark events of first-seen jobs, this checkout beside another, as a new user runs it.

    .venv/bin/python -m benchmarks.first_seen_pairs --baseline DIR --spark-events EVENTS_JSONL
        [--events 3000] [--pairs 2] [--postgres ADMIN_URL]

The events are those the emitter wrote (e.g. `python -m benchmarks.tpcds run`'s `events.jsonl`),
every run copied as a job the store has never seen (benchmarks/spark_workload.py), produced once
to a 6-partition topic of a local Apache Kafka. Per pair, each tree (the baseline first, then this
checkout) runs `python -m consumer ingest` from its own code into a fresh store (SQLite, and a
scratch PostgreSQL database with `--postgres`) until every event is stored; the rate counts from
the first event stored to the last, so the raw-event dictionary's training is inside it. Printed
per tree and store: events/s, the CPU milliseconds per event of the storing process and of its
preparing worker over the same span (on two cores the slower of the two sets the rate), and the
store's bytes per event.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import NamedTuple

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from benchmarks.ingest import store_bytes
from benchmarks.proc_stat import live_processes, process_stat
from benchmarks.scratch_postgres import scratch_database
from benchmarks.spark_workload import first_seen_jobs
from demo.broker import start_kafka

THIS_TREE = Path(__file__).resolve().parent.parent
PARTITIONS = 6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="a checkout of the code to compare with")
    parser.add_argument("--spark-events", type=Path, required=True, help="events the emitter wrote")
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--postgres", help="admin URL of a PostgreSQL: also ingest into scratch databases there")
    args = parser.parse_args()
    broker = start_kafka(Path(tempfile.mkdtemp(prefix="bench-kafka-")))
    try:
        topic = f"first-seen-{uuid.uuid4().hex[:8]}"
        produce(broker.bootstrap, topic, first_seen_jobs(args.spark_events, args.events))
        stores = ["sqlite"] + (["postgresql"] if args.postgres else [])
        for pair in range(1, args.pairs + 1):
            for store in stores:
                for label, tree in (("baseline", args.baseline), ("this code", THIS_TREE)):
                    measured = ingest_once(tree, store, args.postgres, broker.bootstrap, topic, args.events)
                    print(
                        f"pair {pair}  {store:<10}  {label:<9}  {measured.rate:6.0f} events/s   "
                        f"CPU ms/event: storing {measured.storing_ms:5.2f}, worker {measured.worker_ms:5.2f}   "
                        f"store {measured.size / args.events:7.0f} B/event"
                    )
    finally:
        broker.stop()


def produce(bootstrap: str, topic: str, events: object) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=256 * 1024, max_request_size=8 * 1024 * 1024)
    for event in events:  # type: ignore[attr-defined]
        producer.send(topic, key=event["run"]["runId"].encode(), value=json.dumps(event).encode())
    producer.flush()
    producer.close()


class Measured(NamedTuple):
    rate: float  # events/s from the first event stored to the last
    storing_ms: float  # CPU ms per event of the `ingest` process over that span
    worker_ms: float  # and of its preparing worker process
    size: int  # the store's bytes


def ingest_once(tree: Path, store: str, admin_url: str | None, bootstrap: str, topic: str, expected: int) -> Measured:
    """What one `ingest` into a fresh store measured."""
    with tempfile.TemporaryDirectory(prefix="first-seen-") as scratch:
        drop = None
        if store == "sqlite":
            url = f"sqlite:///{scratch}/store.db"
        else:
            assert admin_url is not None
            url, drop = scratch_database(admin_url, "lineage_first_seen")
        try:
            environment = {
                **os.environ,
                "PYTHONPATH": str(tree),
                "LINEAGE_STORE_URL": url,
                "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
                "LINEAGE_TOPIC": topic,
                "LINEAGE_GROUP": f"first-seen-{uuid.uuid4().hex[:8]}",
                "LINEAGE_DEAD_LETTER_TOPIC": f"{topic}.dlq",
            }
            log_file = (Path(scratch) / "ingest.log").open("wb")
            process = subprocess.Popen(
                [sys.executable, "-m", "consumer", "ingest"], env=environment, cwd=scratch, stderr=log_file
            )
            try:
                rate, storing, worker = _rate_until_stored(url, expected, process, Path(scratch) / "ingest.log")
            finally:
                process.terminate()
                process.wait(60)
                log_file.close()
            return Measured(rate, storing, worker, store_bytes(url))
        finally:
            if drop is not None:
                drop()


def _rate_until_stored(url: str, expected: int, process: subprocess.Popen[bytes], log: Path) -> tuple[float, float, float]:
    """(events/s, storing CPU ms/event, worker CPU ms/event) from the first event stored to the last."""
    engine = create_engine(url)
    first: tuple[float, int, tuple[float, float]] | None = None
    try:
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            try:
                with engine.connect() as connection:
                    stored = connection.execute(text("SELECT count(*) FROM lineage_events")).scalar_one()
            except DBAPIError:  # the ingest process is still creating the store
                stored = 0
            now, cpu = time.perf_counter(), _cpu_seconds(process.pid)
            if stored and first is None:
                first = (now, stored, cpu)
            if stored >= expected and first is not None:
                events = stored - first[1]
                return (
                    events / max(now - first[0], 1e-9),
                    (cpu[0] - first[2][0]) * 1000 / max(events, 1),
                    (cpu[1] - first[2][1]) * 1000 / max(events, 1),
                )
            if process.poll() is not None:
                raise SystemExit(f"the ingest process ended:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.1)
    finally:
        engine.dispose()
    raise SystemExit(f"not every event was stored within 900 s ({url})")


def _cpu_seconds(pid: int) -> tuple[float, float]:
    """CPU seconds of process `pid` and of its live children (the preparing worker)."""
    try:
        own = process_stat(pid).cpu_seconds
    except OSError:
        return 0.0, 0.0
    return own, sum(stat.cpu_seconds for stat in live_processes() if stat.parent == pid)


if __name__ == "__main__":
    main()
