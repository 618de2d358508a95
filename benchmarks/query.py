"""Query-service benchmark: p50/p95 of the lineage questions on a synthetic graph, SQLite and PostgreSQL.

    .venv/bin/python -m benchmarks.query [--jobs 100000] [--db sqlite|postgres|both] [--samples 100]
                                         [--graph chains|hubs|both] [--clients 8]

The graph (at --jobs J): J/30 chains of 30 jobs; job i of a chain reads the chain's dataset i and two side
datasets of its own and writes dataset i+1 (so ~3 datasets per job: 100,000 jobs -> ~303,000 datasets);
20 columns per dataset; each output column <- the same column of the chain input (DIRECT/IDENTITY) and one
side column (INDIRECT/FILTER); 3 runs per job, run k reading snapshot k of every input and writing snapshot k.
The jobs of one chain in CHANGED_EVERY have job versions: their first run ran an older version that read
only the second side dataset (the FILTER edges from it), their later runs today's; the as-of questions ask
those chains at an instant between the first and the second run.

The hub-heavy graph (--graph hubs, at --jobs J): J/200 groups of 200 jobs; job k of a group reads the
output of job k-1 (job 0: the group's fact table) and all three of the group's dimension tables, and writes
its own output; 5 columns per dataset, one run per job. Every job of a group is one hop from every other
through the dimension tables, so Marquez `/lineage` from any node of a group answers the whole group (200
jobs, 204 datasets). It is timed as a function call, then over HTTP against `--serve` in a second process:
one client, then --clients clients at once while one more client posts Spark events to POST /api/v1/lineage.

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
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
from sqlalchemy import TypeDecorator, bindparam, insert, text

from benchmarks.ingest import spark_events
from benchmarks.scratch_postgres import scratch_database
from consumer.query import graph
from consumer.query import lineage_store as ls
from consumer.query import marquez as mq
from consumer.query.db import reading
from consumer.store import open_store
from consumer.store import schema as s
from demo.broker import free_port

CHAIN = 30
COLUMNS = 20
SIDES = 2
RUNS = 3
CHUNK = 20_000
NS = "bench"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
CHANGED_EVERY = 100  # one chain in this many changed its lineage after its first run
AS_OF = T0 + timedelta(minutes=30)  # after every job's first run, before its second
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
            yield {
                "id": d,
                "namespace_id": 1,
                "name": name,
                "type": "DB_TABLE",
                "database_name": name.rsplit(".", 1)[0],
                "table_name": name.rsplit(".", 1)[1],
                "facets": {},
                "is_deleted": False,
                **when,
            }

    def field_rows() -> Iterator[dict]:
        for d in range(1, datasets + 1):
            for c in range(COLUMNS):
                yield {
                    "id": field_id(d, c),
                    "dataset_id": d,
                    "name": f"c{c}",
                    "type": "string",
                    "from_schema": True,
                    "created_at": T0,
                }

    def job_rows() -> Iterator[dict]:
        for chain in range(chains):
            for step in range(CHAIN):
                yield {
                    "id": chain * CHAIN + step + 1,
                    "namespace_id": 1,
                    "name": f"chain_{chain}.step_{step}",
                    "type": "BATCH",
                    "facets": {},
                    "last_seen": T0,
                    **when,
                }

    def job_inputs(chain: int, step: int) -> list[int]:
        return [chain_dataset(chain, step)] + [side_dataset(chain, step, k) for k in range(SIDES)]

    def io_rows() -> Iterator[dict]:
        for chain in range(chains):
            for step in range(CHAIN):
                job = chain * CHAIN + step + 1
                for d in job_inputs(chain, step):
                    yield {"job_id": job, "dataset_id": d, "direction": "input", "first_seen": T0}
                yield {"job_id": job, "dataset_id": chain_dataset(chain, step + 1), "direction": "output", "first_seen": T0}

    def lineage_rows() -> Iterator[dict]:
        for chain in range(chains):
            for step in range(CHAIN):
                job, source, target = chain * CHAIN + step + 1, chain_dataset(chain, step), chain_dataset(chain, step + 1)
                side = side_dataset(chain, step, 0)
                for c in range(COLUMNS):
                    common = {
                        "output_dataset_id": target,
                        "output_field_id": field_id(target, c),
                        "masking": False,
                        "job_id": job,
                    }
                    yield {
                        **common,
                        "input_dataset_id": source,
                        "input_field_id": field_id(source, c),
                        "transformation_type": "DIRECT",
                        "transformation_subtype": "IDENTITY",
                        "transformation_description": None,
                    }
                    yield {
                        **common,
                        "input_dataset_id": side,
                        "input_field_id": field_id(side, c),
                        "transformation_type": "INDIRECT",
                        "transformation_subtype": "FILTER",
                        "transformation_description": "c > 0",
                    }

    def run_rows() -> Iterator[dict]:
        for job in range(1, chains * CHAIN + 1):
            for k in range(RUNS):
                moment = T0 + timedelta(hours=k, seconds=job % CHAIN)
                yield {
                    "id": (job - 1) * RUNS + k + 1,
                    "uuid": str(uuid.UUID(int=(job << 8) + k)),
                    "job_id": job,
                    "run_seq": k + 1,
                    "state": "COMPLETED",
                    "started_at": moment,
                    "ended_at": moment,
                    "facets": {},
                    "created_at": moment,
                    "updated_at": moment,
                }

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

    graph_rows = (dataset_rows(), field_rows(), job_rows(), io_rows(), run_rows())
    counts = _load_all(store, when, graph_rows, ((s.column_lineage, lineage_rows()), (s.snapshot_lineage, snapshot_rows())))
    counts["job_versions"] = add_versions(store, chains)
    counts["chains"] = chains
    return counts


def _version_content(chain: int, step: int, sides: list[int]) -> dict[str, Any]:
    """A chain job's version content: it reads the chain dataset and the side datasets `sides`, writes the next
    chain dataset; each column DIRECT/IDENTITY from the chain input, INDIRECT/FILTER from the first side read."""
    source, target = chain_dataset(chain, step), chain_dataset(chain, step + 1)
    side = side_dataset(chain, step, sides[0])
    inputs = sorted([NS, dataset_name(d)] for d in [source] + [side_dataset(chain, step, k) for k in sides])
    edges = [
        [NS, dataset_name(target), f"c{c}", NS, dataset_name(d), f"c{c}", kind, subtype, description, False]
        for c in range(COLUMNS)
        for d, kind, subtype, description in ((source, "DIRECT", "IDENTITY", None), (side, "INDIRECT", "FILTER", "c > 0"))
    ]
    return {"inputs": inputs, "outputs": [[NS, dataset_name(target)]], "schemas": [], "edges": sorted(edges, key=repr)}


def changed_chains(chains: int) -> list[int]:
    return list(range(0, chains, CHANGED_EVERY))


def add_versions(store: Any, chains: int) -> int:
    """Job versions for the jobs of `changed_chains`: the first run ran an older version (only the second
    side dataset read), the later runs today's (what job_io and column_lineage hold)."""
    rows, runs, current = [], [], []
    for chain in changed_chains(chains):
        for step in range(CHAIN):
            job = chain * CHAIN + step + 1
            old, now = 2 * job - 1, 2 * job
            for version, sides in ((old, [1]), (now, list(range(SIDES)))):
                content = _version_content(chain, step, sides)
                rows.append(
                    {"id": version, "job_id": job, "lineage_hash": f"{version:064d}", "content": content, "created_at": T0}
                )
            runs += [{"run": (job - 1) * RUNS + k + 1, "version": old if k == 0 else now} for k in range(RUNS)]
            current.append({"job": job, "version": now})
    with store.engine.begin() as conn:
        conn.execute(insert(s.job_versions), rows)
        conn.execute(text("UPDATE runs SET job_version_id = :version WHERE id = :run"), runs)
        conn.execute(text("UPDATE jobs SET current_version_id = :version WHERE id = :job"), current)
        if store.engine.dialect.name == "postgresql":
            conn.execute(text("SELECT setval(pg_get_serial_sequence('job_versions', 'id'), (SELECT MAX(id) FROM job_versions))"))
            conn.execute(text("ANALYZE job_versions, runs, jobs"))
    return len(rows)


# How the store walked /lineage before it went breadth-first: a recursive query over (job, depth) rows,
# which re-expands a job at every depth it is reached at, through every dataset it shares. Kept to time the
# two side by side, and as the reference answer in tests/query/test_lineage_graph.py.
RECURSIVE_WALK = text("""
WITH RECURSIVE reach(job_id, depth) AS (
    SELECT id, 0 FROM jobs WHERE id IN :start
    UNION
    SELECT b.job_id, r.depth + 1
    FROM reach r
    JOIN job_io a ON a.job_id = r.job_id
    JOIN job_io b ON b.dataset_id = a.dataset_id AND b.job_id <> r.job_id
    WHERE r.depth < :depth
)
SELECT DISTINCT job_id FROM reach ORDER BY job_id
""").bindparams(bindparam("start", expanding=True))

HUB_GROUP = 200
HUBS = 3
HUB_COLUMNS = 5
HUB_DATASETS_PER_GROUP = HUBS + 1 + HUB_GROUP


def hub_dataset(group: int, index: int) -> int:
    """Row id of dataset `index` of `group`: 0..HUBS-1 the dimension tables, HUBS the fact table, then the outputs."""
    return group * HUB_DATASETS_PER_GROUP + index + 1


def build_hubs(store: Any, jobs: int) -> dict[str, int]:
    groups = max(1, jobs // HUB_GROUP)
    when = {"created_at": T0, "updated_at": T0}
    kinds = ["dim"] * HUBS + ["fact"] + ["out"] * HUB_GROUP

    def dataset_rows() -> Iterator[dict]:
        for group in range(groups):
            for index, kind in enumerate(kinds):
                name = f"hubs_{group}.{kind}_{index}"
                yield {
                    "id": hub_dataset(group, index),
                    "namespace_id": 1,
                    "name": name,
                    "type": "DB_TABLE",
                    "database_name": f"hubs_{group}",
                    "table_name": f"{kind}_{index}",
                    "facets": {},
                    "is_deleted": False,
                    **when,
                }

    def field_rows() -> Iterator[dict]:
        for dataset in range(1, groups * HUB_DATASETS_PER_GROUP + 1):
            for c in range(HUB_COLUMNS):
                yield {
                    "id": (dataset - 1) * HUB_COLUMNS + c + 1,
                    "dataset_id": dataset,
                    "name": f"c{c}",
                    "type": "string",
                    "from_schema": True,
                    "created_at": T0,
                }

    def job_rows() -> Iterator[dict]:
        for group in range(groups):
            for step in range(HUB_GROUP):
                yield {
                    "id": group * HUB_GROUP + step + 1,
                    "namespace_id": 1,
                    "name": f"hubs_{group}.step_{step}",
                    "type": "BATCH",
                    "facets": {},
                    "last_seen": T0,
                    **when,
                }

    def io_rows() -> Iterator[dict]:
        seen = {"first_seen": T0}
        for group in range(groups):
            for step in range(HUB_GROUP):
                job = group * HUB_GROUP + step + 1
                upstream = HUBS if step == 0 else HUBS + step  # the fact table, or the previous job's output
                for index in [*range(HUBS), upstream]:
                    yield {"job_id": job, "dataset_id": hub_dataset(group, index), "direction": "input", **seen}
                yield {"job_id": job, "dataset_id": hub_dataset(group, HUBS + 1 + step), "direction": "output", **seen}

    def run_rows() -> Iterator[dict]:
        for job in range(1, groups * HUB_GROUP + 1):
            moment = T0 + timedelta(seconds=job)
            yield {
                "id": job,
                "uuid": str(uuid.UUID(int=(job << 8) + 1)),
                "job_id": job,
                "run_seq": 1,
                "state": "COMPLETED",
                "started_at": moment,
                "ended_at": moment,
                "facets": {},
                "created_at": moment,
                "updated_at": moment,
            }

    counts = _load_all(store, when, (dataset_rows(), field_rows(), job_rows(), io_rows(), run_rows()))
    counts["groups"] = groups
    return counts


GRAPH_TABLES = (s.datasets, s.dataset_fields, s.jobs, s.job_io, s.runs)


def _load_all(
    store: Any,
    when: dict[str, Any],
    graph_rows: tuple[Iterator[dict], ...],
    more: Iterable[tuple[Any, Iterator[dict]]] = (),
) -> dict[str, int]:
    """The namespace, the rows of `GRAPH_TABLES` in order, then `more` tables; the row count per table."""
    with store.engine.begin() as conn:
        conn.execute(insert(s.namespaces), [{"id": 1, "name": NS, **when}])
    tables = [*zip(GRAPH_TABLES, graph_rows, strict=True), *more]
    counts = {table.name: _load(store, table, rows) for table, rows in tables}
    finish(store)
    return counts


def finish(store: Any) -> None:
    """Sequences and planner statistics after the bulk load."""
    with store.engine.begin() as conn:
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
                copy.write_row([_copy_value(table.c[c].type, row[c], store.engine.dialect) for c in columns])
                count += 1
            if copy_context is not None:
                copy_context.__exit__(None, None, None)
        raw.commit()
    finally:
        raw.close()
    return count


def _copy_value(column_type: Any, value: Any, dialect: Any) -> Any:
    """A value as COPY takes it: through the column type's own conversion (compressed JSON, UTC
    times), else JSON text for a dict or list."""
    if isinstance(column_type, TypeDecorator):
        value = column_type.process_bind_param(value, dialect)
    return json.dumps(value) if isinstance(value, (dict, list)) else value


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
        answer = ls.snapshot_lineage(
            store,
            table,
            f"{chain_dataset(int(table.split('_')[1].split('.')[0]), CHAIN)}-s{rng.randrange(1, RUNS + 1)}",
            "upstream",
            10,
        )
        assert len(answer["steps"]) == 10 * (1 + SIDES)
        return answer

    def marquez_lineage(rng: random.Random) -> Any:
        return mq.lineage_graph(store, f"dataset:{chain_end(rng)}", 20)

    as_of = AS_OF.isoformat()
    changed = changed_chains(chains)

    def changed_end(rng: random.Random) -> str:
        return f"{NS}:{dataset_name(chain_dataset(rng.choice(changed), CHAIN))}"

    def table_lineage_as_of(rng: random.Random) -> Any:
        answer = ls.table_lineage(store, changed_end(rng), "upstream", 20, as_of)
        assert len(answer["tables"]) == 20 * 2  # the older version read one side dataset
        return answer

    def column_lineage_as_of(rng: random.Random) -> Any:
        answer = ls.column_lineage(store, changed_end(rng), f"c{rng.randrange(COLUMNS)}", "upstream", 10, False, as_of)
        assert len(answer["edges"]) == 20
        return answer

    def marquez_lineage_as_of(rng: random.Random) -> Any:
        return mq.lineage_graph(store, f"dataset:{changed_end(rng)}", 20, as_of)

    def search(rng: random.Random) -> Any:
        return mq.search(store, f"chain_{rng.randrange(chains)}.table_1", None, "name", 10, None)

    def jobs_list(rng: random.Random) -> Any:
        answer = mq.list_jobs(store, NS, 25, rng.randrange(0, min(1000, chains * CHAIN - 25)), ())
        assert len(answer["jobs"]) == 25
        return answer

    return [
        ("table lineage depth 20 (upstream)", table_lineage),
        ("column lineage depth 10", column_lineage),
        ("snapshot lineage depth 10", snapshot_lineage),
        ("Marquez /lineage depth 20", marquez_lineage),
        ("table lineage depth 20, as of", table_lineage_as_of),
        ("column lineage depth 10, as of", column_lineage_as_of),
        ("Marquez /lineage depth 20, as of", marquez_lineage_as_of),
        ("search", search),
        ("jobs list (25, offset<1000)", jobs_list),
    ]


def hub_node(rng: random.Random, groups: int) -> str:
    group = rng.randrange(groups)
    if rng.random() < 0.5:
        return f"job:{NS}:hubs_{group}.step_{rng.randrange(HUB_GROUP)}"
    return f"dataset:{NS}:hubs_{group}.dim_{rng.randrange(HUBS)}"


def check_hub_answer(answer: dict) -> None:
    jobs = sum(1 for node in answer["graph"] if node["type"] == "JOB")
    assert jobs == HUB_GROUP and len(answer["graph"]) == HUB_GROUP + HUB_DATASETS_PER_GROUP, (jobs, len(answer["graph"]))


def report_hubs(store: Any, url: str, groups: int, samples: int, clients: int) -> None:
    def marquez_lineage(rng: random.Random) -> Any:
        answer = mq.lineage_graph(store, hub_node(rng, groups), 20)
        check_hub_answer(answer)
        return answer

    def start_job(rng: random.Random) -> list[int]:
        return [rng.randrange(groups) * HUB_GROUP + rng.randrange(HUB_GROUP) + 1]

    def walk_breadth_first(rng: random.Random) -> Any:
        with reading(store) as conn:
            assert len(graph.connected_jobs(conn, start_job(rng), 20)) == HUB_GROUP

    def walk_recursive(rng: random.Random) -> Any:
        with reading(store) as conn:
            assert len(conn.execute(RECURSIVE_WALK, {"start": start_job(rng), "depth": 20}).all()) == HUB_GROUP

    print(f"{'question (hub-heavy graph)':46} {'p50 ms':>8} {'p95 ms':>8}")
    for name, call, count in (
        ("connected jobs, depth 20, breadth-first", walk_breadth_first, samples),
        ("connected jobs, depth 20, recursive (before)", walk_recursive, max(5, samples // 10)),  # seconds each
        ("Marquez /lineage depth 20, function call", marquez_lineage, samples),
    ):
        _, p50, p95 = measure(name, call, count)
        print(f"{name:46} {p50:8.1f} {p95:8.1f}", flush=True)
    with serving(url) as base:
        timings, _ = http_load(base, groups, samples, clients=1, post=False)
        p50, p95 = percentiles(timings)
        print(f"{'GET /api/v1/lineage depth 20, 1 client':46} {p50:8.1f} {p95:8.1f}", flush=True)
        timings, posts = http_load(base, groups, samples, clients=clients, post=True)
        p50, p95 = percentiles(timings)
        print(f"{f'GET /api/v1/lineage, {clients} clients + posting':46} {p50:8.1f} {p95:8.1f}", flush=True)
        p50, p95 = percentiles(posts)
        print(f"{f'POST /api/v1/lineage meanwhile ({len(posts)} events)':46} {p50:8.1f} {p95:8.1f}", flush=True)


@contextmanager
def serving(url: str) -> Iterator[str]:
    """The API (consumer.api.create_app, uvicorn) over the store at `url` in a second process."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.query", "--serve", url, "--port", str(port)],
        env={**os.environ, "LINEAGE_API_TOKEN": ""},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base}/api/v1/namespaces", timeout=2).raise_for_status()
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=30)


def http_load(base: str, groups: int, samples: int, clients: int, post: bool) -> tuple[list[float], list[float]]:
    """`clients` threads each GET /api/v1/lineage `samples` times (after 3 untimed calls); with `post`, one
    more thread posts Spark events until they are done. Returns GET and POST timings in ms."""
    gets: list[float] = []
    posts: list[float] = []
    done = threading.Event()

    def reader(seed: int) -> None:
        rng = random.Random(seed)
        with httpx.Client(base_url=base, timeout=120) as client:
            for call in range(samples + 3):
                started = time.perf_counter()
                response = client.get("/api/v1/lineage", params={"nodeId": hub_node(rng, groups), "depth": 20})
                elapsed = (time.perf_counter() - started) * 1000
                response.raise_for_status()
                check_hub_answer(response.json())
                if call >= 3:
                    gets.append(elapsed)

    def poster() -> None:
        with httpx.Client(base_url=base, timeout=120) as client:
            for event in spark_events(100_000, seed=11):
                if done.is_set():
                    return
                started = time.perf_counter()
                client.post("/api/v1/lineage", json=event).raise_for_status()
                posts.append((time.perf_counter() - started) * 1000)

    threads = [threading.Thread(target=reader, args=(seed,)) for seed in range(clients)]
    posting = threading.Thread(target=poster) if post else None
    for thread in [*threads, *([posting] if posting else [])]:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    if posting:
        posting.join()
    return gets, posts


def serve(url: str, port: int) -> None:
    import uvicorn

    from consumer.api import create_app
    from consumer.ingest.prepare import tune_garbage_collector

    tune_garbage_collector()  # as `python -m consumer serve` does
    uvicorn.run(create_app(open_store(url)), host="127.0.0.1", port=port, log_level="warning")


def report(store: Any, chains: int, samples: int) -> None:
    print(f"{'question':38} {'p50 ms':>8} {'p95 ms':>8}")
    for name, call in questions(store, chains):
        _, p50, p95 = measure(name, call, samples)
        print(f"{name:38} {p50:8.1f} {p95:8.1f}", flush=True)


def run(db: str, graph: str, jobs: int, samples: int, clients: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url, cleanup = empty_store(db, tmp)
        try:
            store = open_store(url)
            started = time.perf_counter()
            counts = build(store, jobs) if graph == "chains" else build_hubs(store, jobs)
            built = time.perf_counter() - started
            print(f"\n{db}, {graph}: built in {built:.0f} s: " + ", ".join(f"{k}={v:,}" for k, v in counts.items()))
            if graph == "chains":
                report(store, counts["chains"], samples)
            else:
                report_hubs(store, url, counts["groups"], samples, clients)
            store.dispose()
        finally:
            cleanup()


def empty_store(db: str, tmp: str) -> tuple[str, Callable[[], None]]:
    """The URL of an empty store (a SQLite file in `tmp`, or a scratch PostgreSQL database) and
    the function that drops it."""
    if db == "sqlite":
        return f"sqlite:///{tmp}/bench.db", lambda: None
    return scratch_database(POSTGRES_ADMIN, "bench_query")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--db", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--graph", choices=("chains", "hubs", "both"), default="both")
    parser.add_argument("--clients", type=int, default=8, help="concurrent readers of the hub-heavy HTTP run")
    parser.add_argument("--existing", metavar="URL", help="measure a store this script built and kept (finishes it first)")
    parser.add_argument("--serve", metavar="URL", help=argparse.SUPPRESS)  # the HTTP runs' server process
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return
    if args.existing:
        store = open_store(args.existing)
        finish(store)
        with store.engine.connect() as conn:
            chains = conn.execute(text("SELECT COUNT(*) FROM jobs")).scalar_one() // CHAIN
        report(store, chains, args.samples)
        store.dispose()
        return
    for shape in ("chains", "hubs") if args.graph == "both" else (args.graph,):
        for db in ("sqlite", "postgres") if args.db == "both" else (args.db,):
            run(db, shape, args.jobs, args.samples, args.clients)


if __name__ == "__main__":
    main()
