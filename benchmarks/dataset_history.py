"""What the answers about one dataset cost as the runs that wrote it accumulate.

    .venv/bin/python -m benchmarks.dataset_history [--versions 1,1000,20000] [--jobs 2000] [--samples 20]
                                                   [--postgres URL]

On the query benchmark's hub-heavy graph (benchmarks.query.build_hubs: groups of 200 jobs that all
read their group's three dimension tables), one dimension table is given more and more versions,
each written by a completed run of one job, as a table a scheduled job rewrites every hour would
get. At each count of versions it times, `--samples` calls each after three untimed ones: the
dataset (Marquez `GET .../datasets/{name}`, with its `lastModifiedAt`), the first page of its
versions (25, newest first), a dataset search whose hit is that table (v2beta search: the hit
shows its latest version's run), and Marquez `/lineage` at depth 20 from a job of its group (every
dataset node with its `lastModifiedAt`). SQLite, and with `--postgres` a scratch PostgreSQL database
too. Run it from two checkouts one after the other to compare them: each builds its own store.
"""

from __future__ import annotations

import argparse
import tempfile
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import func, insert, select, text

from benchmarks.query import NS, T0, build_hubs, finish, measure
from benchmarks.scratch_postgres import scratch_database
from consumer.query import marquez
from consumer.store import Store, open_store
from consumer.store import schema as s

TABLE = "hubs_0.dim_0"
WRITER = "hubs_0.step_0"
CHUNK = 5_000


def add_versions(store: Store, count: int) -> None:
    """Give TABLE versions up to `count`, one per completed run of WRITER, an hour apart."""
    with store.engine.begin() as conn:
        dataset = conn.execute(select(s.datasets.c.id).where(s.datasets.c.name == TABLE)).scalar_one()
        job = conn.execute(select(s.jobs.c.id).where(s.jobs.c.name == WRITER)).scalar_one()
        have = conn.execute(select(func.count()).where(s.dataset_versions.c.dataset_id == dataset)).scalar_one()
        content = conn.execute(select(s.dataset_version_contents.c.id).limit(1)).scalar()
        if content is None:
            content = conn.execute(
                insert(s.dataset_version_contents)
                .values(content_hash="0" * 64, fields=[], facets={})
                .returning(s.dataset_version_contents.c.id)
            ).scalar_one()
        top = conn.execute(select(func.coalesce(func.max(s.runs.c.run_seq), 0)).where(s.runs.c.job_id == job)).scalar_one()
        for start in range(have, count, CHUNK):
            numbers = range(start, min(count, start + CHUNK))
            moments = {n: T0 + timedelta(hours=n + 1) for n in numbers}
            conn.execute(
                insert(s.runs),
                [
                    {
                        "uuid": str(uuid.uuid4()),
                        "job_id": job,
                        "run_seq": top + 1 + n,
                        "state": "COMPLETED",
                        "facets": {},
                        "started_at": moments[n],
                        "ended_at": moments[n],
                        "created_at": moments[n],
                        "updated_at": moments[n],
                    }
                    for n in numbers
                ],
            )
            run_ids = conn.execute(
                select(s.runs.c.run_seq, s.runs.c.id).where(s.runs.c.job_id == job, s.runs.c.run_seq > top + start)
            ).all()
            by_number = {seq - top - 1: run_id for seq, run_id in run_ids}
            conn.execute(
                insert(s.dataset_versions),
                [
                    {
                        "dataset_id": dataset,
                        "version": f"v{n}",
                        "run_id": by_number[n],
                        "content_id": content,
                        "facets": {},
                        "created_at": moments[n],
                    }
                    for n in numbers
                ],
            )
        if conn.dialect.name == "postgresql":
            conn.execute(text("ANALYZE"))


def questions(store: Store) -> dict[str, Callable[[Any], Any]]:
    return {
        "the dataset (lastModifiedAt)": lambda rng: marquez.get_dataset(store, NS, TABLE),
        "its versions, first page of 25": lambda rng: marquez.list_dataset_versions(store, NS, TABLE, 25, 0),
        "dataset search hit (latest run)": lambda rng: marquez.search_hits(store, TABLE, "DATASET", 10),
        "/lineage depth 20 from its group": lambda rng: marquez.lineage_graph(store, f"job:{NS}:{WRITER}", 20),
    }


def run(url: str, jobs: int, counts: list[int], samples: int) -> None:
    store = open_store(url)
    try:
        build_hubs(store, jobs)
        finish(store)
        print(f"\n{store.engine.dialect.name}: {jobs:,} jobs; p50 / p95 ms by versions of {TABLE}")
        print(f"{'question':34}" + "".join(f"{count:>18,}" for count in counts))
        rows: dict[str, list[str]] = {name: [] for name in questions(store)}
        for count in counts:
            add_versions(store, count)
            for name, call in questions(store).items():
                _, p50, p95 = measure(name, call, samples)
                rows[name].append(f"{p50:8.1f} / {p95:6.1f}")
        for name, cells in rows.items():
            print(f"{name:34}" + "".join(f"{cell:>18}" for cell in cells), flush=True)
    finally:
        store.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", default="1,1000,20000", help="counts of the table's versions, ascending")
    parser.add_argument("--jobs", type=int, default=2_000)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--postgres", metavar="URL", help="also on a scratch database of this server")
    args = parser.parse_args()
    counts = sorted(int(count) for count in args.versions.split(","))
    with tempfile.TemporaryDirectory() as directory:
        run(f"sqlite:///{directory}/history.db", args.jobs, counts, args.samples)
    if args.postgres:
        url, drop = scratch_database(args.postgres, "dataset_history")
        try:
            run(url, args.jobs, counts, args.samples)
        finally:
            drop()


if __name__ == "__main__":
    main()
