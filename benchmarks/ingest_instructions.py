"""Instructions per ingested event, this code beside a baseline checkout, counted by valgrind.

    .venv/bin/python -m benchmarks.ingest_instructions --baseline DIR [--workload new|repeat]
        [--spark-events EVENTS_JSONL] [--events 1000] [--postgres ADMIN_URL]

Rates on a shared two-core machine move by ±10 % between runs of the same code, more than the
differences this benchmark is asked about. Instructions do not: valgrind's callgrind (Debian's
`valgrind` package) counts every instruction a process executes (Python, SQLite, the PostgreSQL
client), the same count for the same code, data and environment whatever else the machine does.

Per tree (this checkout, and `--baseline`, a checkout of other code), one process prepares and
stores the first N and then the first 2N events of one workload file into a fresh store, in
batches of 500 as the consumer's ingest loop does per poll: prepare (decode, validate,
materialize, fold) in the process itself rather than in the loop's worker process, then one store
transaction of that fold; the raw-event dictionary is trained after the first batch where the tree has one.
The difference of the two counts over N is what one more event costs once the store is set up
(migrations, imports and the first batches are in both counts). With `--postgres` the same runs
go to scratch databases on that server; the server's work is not in the count, its CPU time
(every `postgres` process and the backends it reaped, from /proc) is printed beside it and is as
noisy as any timing.

The workload file is made once by this checkout's `benchmarks.ingest` generators (or, with
`--spark-events`, from real Spark events: benchmarks/spark_workload.py, every run a first-seen job),
so both trees read the same bytes. Memory stalls are not counted: this says which code does less work, not
how much faster it runs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

BATCH = 500
DRIVER = Path(__file__).resolve()
THIS_TREE = DRIVER.parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="a checkout of the code to compare with")
    parser.add_argument("--workload", choices=("new", "repeat"), default="new")
    parser.add_argument(
        "--spark-events",
        type=Path,
        help="events the emitter wrote (e.g. benchmarks.tpcds run's events.jsonl): every run a new job",
    )
    parser.add_argument("--events", type=int, default=1000, help="N (at least 1000): the counts are of N and of 2N events")
    parser.add_argument("--postgres", help="admin URL of a PostgreSQL: also count the runs into scratch databases there")
    args = parser.parse_args()
    if args.events < 2 * BATCH:
        parser.error(f"--events must be at least {2 * BATCH}: with fewer, the first batch's costs are in the difference")
    with tempfile.TemporaryDirectory(prefix="bench-instructions-") as scratch:
        events = Path(scratch) / "events.jsonl"
        write_workload(events, args.workload, args.events, args.spark_events)
        label = "real Spark events, first-seen jobs" if args.spark_events else args.workload
        stores = ["sqlite"] + (["postgresql"] if args.postgres else [])
        for store in stores:
            counted = {
                tree: marginal(tree, events, args.events, store, args.postgres, Path(scratch))
                for tree in (args.baseline, THIS_TREE)
            }
            base, this = counted[args.baseline], counted[THIS_TREE]
            print(
                f"{label}, {store}: instructions per event {base.instructions / 1e6:.2f} M (baseline) -> "
                f"{this.instructions / 1e6:.2f} M (this code), x{this.instructions / base.instructions:.3f}"
                + (f"; server CPU {base.server_ms:.2f} -> {this.server_ms:.2f} ms per event" if store == "postgresql" else "")
            )


def write_workload(path: Path, workload: str, count: int, spark_events: Path | None = None) -> None:
    from benchmarks.ingest import WORKLOADS
    from benchmarks.spark_workload import first_seen_jobs

    # two events per run: the 2N events of the larger count
    events = first_seen_jobs(spark_events, 2 * count) if spark_events else WORKLOADS[workload](count)
    with path.open("w") as out:
        for event in events:
            out.write(json.dumps(event) + "\n")


class Marginal(NamedTuple):
    instructions: float  # per event
    server_ms: float  # PostgreSQL server CPU-ms per event (0 on SQLite)


def marginal(tree: Path, events: Path, count: int, store: str, admin_url: str | None, scratch: Path) -> Marginal:
    """Instructions (and PostgreSQL server CPU-ms) per event from event count+1 to 2*count."""
    first, first_server = counted_run(tree, events, count, store, admin_url, scratch)
    second, second_server = counted_run(tree, events, 2 * count, store, admin_url, scratch)
    return Marginal((second - first) / count, (second_server - first_server) * 1000 / count)


def counted_run(tree: Path, events: Path, count: int, store: str, admin_url: str | None, scratch: Path) -> tuple[int, float]:
    """(instructions, server CPU seconds) of one driver process storing `count` events."""
    drop = None
    if store == "sqlite":
        url = f"sqlite:///{tempfile.mkdtemp(dir=scratch)}/store.db"
    else:
        from benchmarks.scratch_postgres import scratch_database

        assert admin_url is not None  # main passes it for postgresql
        url, drop = scratch_database(admin_url, "lineage_instructions")
    environment = {**os.environ, "PYTHONPATH": str(tree), "LINEAGE_DRIVER_STORE_URL": url}  # the URL stays off the command line
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *driver_command(tree, events, count)]
    server_before = postgres_cpu_seconds()
    try:
        result = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
    finally:
        if drop is not None:
            drop()
            time.sleep(0.5)  # the ended backends reaped by the postmaster: their CPU is in its children's
        server = postgres_cpu_seconds() - server_before
    found = re.search(r"Collected : (\d+)", result.stderr)
    if result.returncode != 0 or found is None:
        raise SystemExit(f"the driver of {tree} failed or was not counted: {result.stderr[-2000:]}")
    return int(found.group(1)), server


def driver_command(tree: Path, events: Path, count: int) -> list[str]:
    return [sys.executable, str(DRIVER), "--drive", str(tree), str(events), str(count)]


def postgres_cpu_seconds() -> float:
    """User + system CPU of every live `postgres` process on this machine and of the children
    they reaped (a connection's backend ends with its connection; the postmaster reaps it)."""
    from benchmarks.proc_stat import live_processes  # not at the top: the driver runs against trees without it

    return sum(
        process.cpu_seconds + process.reaped_cpu_seconds for process in live_processes() if process.name.startswith("postgres")
    )


def drive(tree: Path, events: Path, count: int) -> int:
    """What one tree runs under callgrind: `count` events prepared and stored, as the ingest loop
    does per poll; the events stored. Imports only the tree's `consumer` (the baseline has no copy
    of this module), and refuses to count another checkout's."""
    import consumer

    if not Path(consumer.__file__).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"the consumer imported is {consumer.__file__}, not {tree}'s: put the tree on PYTHONPATH")
    from consumer.store import open_store

    try:
        from consumer.ingest.prepare import Preparer, tune_garbage_collector
        from consumer.ingest.store_writes import StoreWrites
    except ImportError:  # a tree from before the write side was one package (2026-11-27): the store writes itself
        from consumer.prepare import Preparer, tune_garbage_collector  # type: ignore[no-redef]

        StoreWrites = None  # type: ignore[assignment,misc]  # noqa: N806

    tune_garbage_collector()  # as `python -m consumer` does
    values = events.read_bytes().splitlines()[:count]
    store = open_store(os.environ["LINEAGE_DRIVER_STORE_URL"])
    writes: Any = store if StoreWrites is None else StoreWrites(store)
    preparer = Preparer(None, in_worker=False)
    has_dictionary = hasattr(writes, "raw_dictionary")
    stored = 0
    for start in range(0, len(values), BATCH):
        batch = values[start : start + BATCH]
        if has_dictionary:
            dictionary = writes.raw_dictionary()
            prepared = preparer.submit(batch, dictionary)()
        else:
            prepared = preparer.submit(batch)()
        stored += store_prepared(writes, batch, prepared)
        if has_dictionary and dictionary is None:
            writes.train_raw_dictionary()
    preparer.close()
    store.dispose()
    return stored


def store_prepared(writes: Any, batch: list[bytes], prepared: Any) -> int:
    """Store a prepared batch as the ingest loop does (consumer.ingest.kafka_loop.store_polled):
    the fold the preparing step made, folded once; each event on its own only when folding failed."""
    try:
        from consumer.ingest.prepare import good_events
    except ImportError:
        from consumer.prepare import good_events  # type: ignore[no-redef]

    if prepared.folded is None:
        return int(writes.write(good_events(batch, prepared)))
    return int(writes.write_folded(prepared.folded, lambda: good_events(batch, prepared)))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--drive"]:
        sys.path.remove(str(DRIVER.parent))  # run as a script: the tree on PYTHONPATH, not this folder, is imported
        print(drive(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])), "events stored")
    else:
        main()
