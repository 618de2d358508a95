"""Query-service benchmark: p50/p95 of the lineage questions on a synthetic graph, SQLite and PostgreSQL.

    .venv/bin/python -m benchmarks.query [--jobs 100000] [--db sqlite|postgres|both] [--samples 100]

The graph (at --jobs J): J/30 chains of 30 jobs; job i of a chain reads the chain's dataset i and two side
datasets of its own and writes dataset i+1 (so ~3 datasets per job: 100,000 jobs -> ~303,000 datasets);
20 columns per dataset; each output column <- the same column of the chain input (DIRECT/IDENTITY) and one
side column (INDIRECT/FILTER); 3 runs per job, run k reading snapshot k of every input and writing snapshot k.

Rows go in bulk through the store's own tables (consumer.store.schema, migrated by open_store): per-event
ingestion of ~300,000 runs would take far longer than the queries under test. Queries are the exact
functions the API serves (consumer.query.*), each in its own connection, timed wall-clock after warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import create_engine, insert, text

from consumer.query import lineage_store as ls
from consumer.query import marquez as mq
from consumer.store import open_store
from consumer.store import schema as s

CHAIN = 30
COLUMNS = 20
SIDES = 2
RUNS = 3
CHUNK = 20_000
NS = "bench"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
POSTGRES_ADMIN = os.environ.get("LINEAGE_BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


def chain_dataset(chain: int, step: int) -> int:
    """Row id of chain dataset `step` (0..CHAIN) of `chain`; side datasets follow the chain's."""
    return chain * (CHAIN + 1 + CHAIN * SIDES) + step + 1


def side_dataset(chain: int, step: int, side: int) -> int:
    return chain * (CHAIN + 1 + CHAIN * SIDES) + CHAIN + 1 + step * SIDES + side + 1


def field_id(dataset: int, column: int) -> int:
    return (dataset - 1) * COLUMNS + column + 1


def dataset_name(dataset: int) -> str:
    per_chain = CHAIN + 1 + CHAIN * SIDES
    chain, offset = divmod(dataset - 1, per_chain)
    return f"warehouse.chain_{chain}.table_{offset}"


def _chunks(rows: Iterator[dict]) -> Iterator[list[dict]]:
    chunk: list[dict] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def build(store: Any, jobs: int) -> dict[str, int]:
    chains = max(1, jobs // CHAIN)
    datasets = chains * (CHAIN + 1 + CHAIN * SIDES)
    when = {"created_at": T0, "updated_at": T0}

    def dataset_rows() -> Iterator[dict]:
        for d in range(1, datasets + 1):
            name = dataset_name(d)
            yield {"id": d, "namespace_id": 1, "name": name, "type": "DB_TABLE", "database_name": name.rsplit(".", 1)[0],
                   "table_name": name.rsplit(".", 1)[1], "facets": {}, "is_deleted": False, **when}

    def field_rows() -> Iterator[dict]:
        for d in range(1, datasets + 1):
            for c in range(COLUMNS):
                yield {"id": field_id(d, c), "dataset_id": d, "name": f"c{c}", "type": "string", "from_schema": True, **when}

    def job_rows() -> Iterator[dict]:
        for chain in range(chains):
            for step in range(CHAIN):
                yield {"id": chain * CHAIN + step + 1, "namespace_id": 1, "name": f"chain_{chain}.step_{step}", "type": "BATCH",
                       "facets": {}, "last_seen": T0, **when}

    def job_inputs(chain: int, step: int) -> list[int]:
        return [chain_dataset(chain, step)] + [side_dataset(chain, step, k) for k in range(SIDES)]

    def io_rows() -> Iterator[dict]:
        for chain in range(chains):
            for step in range(CHAIN):
                job = chain * CHAIN + step + 1
                for d in job_inputs(chain, step):
                    yield {"job_id": job, "dataset_id": d, "direction": "input", "first_seen": T0, "last_seen": T0}
                yield {"job_id": job, "dataset_id": chain_dataset(chain, step + 1), "direction": "output", "first_seen": T0, "last_seen": T0}

    def lineage_rows() -> Iterator[dict]:
        for chain in range(chains):
            for step in range(CHAIN):
                job, source, target = chain * CHAIN + step + 1, chain_dataset(chain, step), chain_dataset(chain, step + 1)
                side = side_dataset(chain, step, 0)
                for c in range(COLUMNS):
                    common = {"output_dataset_id": target, "output_field_id": field_id(target, c), "masking": False,
                              "job_id": job, "first_seen": T0, "last_seen": T0}
                    yield {**common, "input_dataset_id": source, "input_field_id": field_id(source, c),
                           "transformation_type": "DIRECT", "transformation_subtype": "IDENTITY", "transformation_description": None}
                    yield {**common, "input_dataset_id": side, "input_field_id": field_id(side, c),
                           "transformation_type": "INDIRECT", "transformation_subtype": "FILTER", "transformation_description": "c > 0"}

    def run_rows() -> Iterator[dict]:
        for job in range(1, chains * CHAIN + 1):
            for k in range(RUNS):
                moment = T0 + timedelta(hours=k, seconds=job % CHAIN)
                yield {"id": (job - 1) * RUNS + k + 1, "uuid": str(uuid.UUID(int=(job << 8) + k)), "job_id": job, "run_seq": k + 1,
                       "state": "COMPLETED", "started_at": moment, "ended_at": moment, "facets": {}, "created_at": moment, "updated_at": moment}

    def snapshot_rows() -> Iterator[dict]:
        for chain in range(chains):
            for step in range(CHAIN):
                job = chain * CHAIN + step + 1
                for k in range(RUNS):
                    run, moment = (job - 1) * RUNS + k + 1, T0 + timedelta(hours=k, seconds=step)
                    common = {"run_id": run, "job_id": job, "barrier_id": k + 1, "kind": "content", "created_at": moment}
                    for d in job_inputs(chain, step):
                        yield {**common, "dataset_id": d, "direction": "input", "snapshot_id": f"{d}-s{k + 1}"}
                    target = chain_dataset(chain, step + 1)
                    yield {**common, "dataset_id": target, "direction": "output", "snapshot_id": f"{target}-s{k + 1}"}

    counts: dict[str, int] = {}
    with store.engine.begin() as conn:
        conn.execute(insert(s.namespaces), [{"id": 1, "name": NS, **when}])
    for table, rows in ((s.datasets, dataset_rows()), (s.dataset_fields, field_rows()), (s.jobs, job_rows()),
                        (s.job_io, io_rows()), (s.column_lineage, lineage_rows()), (s.runs, run_rows()),
                        (s.snapshot_lineage, snapshot_rows())):
        counts[table.name] = _load(store, table, rows)
    finish(store)
    counts["chains"] = chains
    return counts


def finish(store: Any) -> None:
    """Latest runs, sequences and planner statistics after the bulk load."""
    with store.engine.begin() as conn:
        # one grouped pass; a correlated subquery per job was planned as a scan per job on unanalyzed PostgreSQL
        conn.execute(text(
            "UPDATE jobs SET latest_run_id = latest.id FROM (SELECT job_id, MAX(id) AS id FROM runs GROUP BY job_id) latest "
            "WHERE latest.job_id = jobs.id"
        ))
        if store.engine.dialect.name == "postgresql":
            for table in ("datasets", "dataset_fields", "jobs", "runs", "namespaces"):
                conn.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT MAX(id) FROM {table}))"))
            conn.execute(text("ANALYZE"))
        # SQLite is left without ANALYZE, as the store leaves it: with sqlite_stat1 present, SQLite adds Bloom
        # filters to the recursive steps and rebuilds them every step (see consumer/query/graph.py).


def _load(store: Any, table: Any, rows: Iterator[dict]) -> int:
    """Bulk-insert rows: COPY on PostgreSQL (insertmanyvalues is ~10x slower there), executemany on SQLite."""
    count = 0
    if store.engine.dialect.name != "postgresql":
        for chunk in _chunks(rows):
            with store.engine.begin() as conn:
                conn.execute(insert(table), chunk)
            count += len(chunk)
        return count
    raw = store.engine.raw_connection()
    try:
        with raw.cursor() as cursor:
            columns: list[str] | None = None
            copy_context = None
            for row in rows:
                if columns is None:
                    columns = list(row)
                    copy_context = cursor.copy(f"COPY {table.name} ({', '.join(columns)}) FROM STDIN")
                    copy = copy_context.__enter__()
                copy.write_row([json.dumps(row[c]) if isinstance(row[c], (dict, list)) else row[c] for c in columns])
                count += 1
            if copy_context is not None:
                copy_context.__exit__(None, None, None)
        raw.commit()
    finally:
        raw.close()
    return count


def percentiles(samples: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return cuts[49], cuts[94]


def measure(name: str, call: Callable[[random.Random], Any], samples: int, seed: int = 7) -> tuple[str, float, float]:
    rng = random.Random(seed)
    for _ in range(3):
        call(rng)
    timings = []
    for _ in range(samples):
        started = time.perf_counter()
        call(rng)
        timings.append((time.perf_counter() - started) * 1000)
    p50, p95 = percentiles(timings)
    return name, p50, p95


def questions(store: Any, chains: int) -> list[tuple[str, Callable[[random.Random], Any]]]:
    def chain_end(rng: random.Random) -> str:
        return f"{NS}:{dataset_name(chain_dataset(rng.randrange(chains), CHAIN))}"

    def table_lineage(rng: random.Random) -> Any:
        answer = ls.table_lineage(store, chain_end(rng), "upstream", 20)
        assert len(answer["tables"]) == 20 * (1 + SIDES)
        return answer

    def column_lineage(rng: random.Random) -> Any:
        answer = ls.column_lineage(store, chain_end(rng), f"c{rng.randrange(COLUMNS)}", "upstream", 10, False)
        assert len(answer["edges"]) == 20  # 10 steps x (DIRECT + INDIRECT)
        return answer

    def snapshot_lineage(rng: random.Random) -> Any:
        table = chain_end(rng)
        answer = ls.snapshot_lineage(store, table, f"{chain_dataset(int(table.split('_')[1].split('.')[0]), CHAIN)}-s{rng.randrange(1, RUNS + 1)}", "upstream", 10)
        assert len(answer["steps"]) == 10 * (1 + SIDES)
        return answer

    def marquez_lineage(rng: random.Random) -> Any:
        return mq.lineage_graph(store, f"dataset:{chain_end(rng)}", 20)

    def search(rng: random.Random) -> Any:
        return mq.search(store, f"chain_{rng.randrange(chains)}.table_1", None, "name", 10, None)

    def jobs_list(rng: random.Random) -> Any:
        answer = mq.list_jobs(store, NS, 25, rng.randrange(0, min(1000, chains * CHAIN - 25)), ())
        assert len(answer["jobs"]) == 25
        return answer

    return [("table lineage depth 20 (upstream)", table_lineage), ("column lineage depth 10", column_lineage),
            ("snapshot lineage depth 10", snapshot_lineage), ("Marquez /lineage depth 20", marquez_lineage),
            ("search", search), ("jobs list (25, offset<1000)", jobs_list)]


def report(store: Any, chains: int, samples: int) -> None:
    print(f"{'question':38} {'p50 ms':>8} {'p95 ms':>8}")
    for name, call in questions(store, chains):
        _, p50, p95 = measure(name, call, samples)
        print(f"{name:38} {p50:8.1f} {p95:8.1f}", flush=True)


def run(db: str, jobs: int, samples: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url, cleanup = _database(db, tmp)
        try:
            store = open_store(url)
            started = time.perf_counter()
            counts = build(store, jobs)
            built = time.perf_counter() - started
            print(f"\n{db}: built in {built:.0f} s: " + ", ".join(f"{k}={v:,}" for k, v in counts.items()))
            report(store, counts["chains"], samples)
            store.dispose()
        finally:
            cleanup()


def _database(db: str, tmp: str) -> tuple[str, Callable[[], None]]:
    if db == "sqlite":
        return f"sqlite:///{tmp}/bench.db", lambda: None
    admin = create_engine(POSTGRES_ADMIN, isolation_level="AUTOCOMMIT")
    name = f"bench_query_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    return admin.url.set(database=name).render_as_string(hide_password=False), drop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--db", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--existing", metavar="URL", help="measure a store this script built and kept (finishes it first)")
    args = parser.parse_args()
    if args.existing:
        store = open_store(args.existing)
        finish(store)
        with store.engine.connect() as conn:
            chains = conn.execute(text("SELECT COUNT(*) FROM jobs")).scalar_one() // CHAIN
        report(store, chains, args.samples)
        store.dispose()
        return
    for db in ("sqlite", "postgres") if args.db == "both" else (args.db,):
        run(db, args.jobs, args.samples)


if __name__ == "__main__":
    main()
