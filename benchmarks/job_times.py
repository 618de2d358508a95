"""What reading a job's times from its runs costs the answers that hold job rows.

    .venv/bin/python -m benchmarks.job_times [--jobs 20000] [--samples 60] [--postgres URL]

A job's `updatedAt` is its stored time or the latest time of a run that asserted its stored
state, whichever is later (consumer.store.schema.job_seen_at: one index lookup per job row). On the
query benchmark's hub-heavy graph (benchmarks.query.build_hubs; every job's runs made to assert
its stored state, so each lookup finds a run) it times the Marquez functions that hold job rows
two ways, alternating call by call in one process with the same random arguments: `stored` (the
job rows' times as stored, the query before those times were derived) and `derived` (the code as
it is). SQLite, and with `--postgres` a scratch PostgreSQL database too.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import random
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Select, select, update

from benchmarks.query import HUB_GROUP, NS, build_hubs, finish, hub_node, percentiles
from benchmarks.scratch_postgres import scratch_database
from consumer.query import marquez
from consumer.query.marquez import catalog, graphs, loaders
from consumer.store import Store, open_store
from consumer.store import schema as s

WARM_UP = 5
# The module (the package's `search` is the function of the same name).
search_module = importlib.import_module("consumer.query.marquez.search")


def _stored_job_select() -> Select[Any]:
    return _STORED_JOB_SELECT  # built once, as loaders.job_select is


_STORED_JOB_SELECT = select(
    s.jobs, s.namespaces.c.name.label("namespace"), s.latest_run(s.jobs.c.id).label("latest_run_id")
).join(s.namespaces, s.namespaces.c.id == s.jobs.c.namespace_id)


def _stored_updated_at(table: Any) -> Any:
    return table.c.updated_at


_VARIANTS = {
    "stored": (_stored_job_select, _stored_updated_at),
    "derived": (loaders.job_select, search_module._updated_at),
}


def _use(name: str) -> None:
    job_select, updated_at = _VARIANTS[name]
    for module in (loaders, catalog, graphs, search_module):
        if hasattr(module, "job_select"):
            setattr(module, "job_select", job_select)  # noqa: B010 - the modules are typed without it
    setattr(search_module, "_updated_at", updated_at)  # noqa: B010


@contextmanager
def _variant(name: str) -> Iterator[None]:
    _use(name)
    try:
        yield
    finally:
        _use("derived")


def questions(store: Store, groups: int) -> dict[str, Callable[[random.Random], Any]]:
    return {
        "Marquez /lineage depth 20 (hubs)": lambda rng: marquez.lineage_graph(store, hub_node(rng, groups), 20),
        "jobs list (25, offset < 1000)": lambda rng: marquez.list_jobs(store, NS, 25, rng.randrange(1000)),
        "job search, sorted by updated_at": lambda rng: marquez.search(
            store, f"hubs_{rng.randrange(groups)}.step_1", "JOB", "updated_at", 25, None
        ),
    }


def compare(store: Store, groups: int, samples: int) -> list[tuple[str, dict[str, tuple[float, float]]]]:
    """Per question, (p50, p95) in ms of each variant; the first WARM_UP calls of each left out."""
    results = []
    for name, call in questions(store, groups).items():
        timings: dict[str, list[float]] = {"stored": [], "derived": []}
        rng = random.Random(7)
        for sample in range(samples + WARM_UP):
            seed = rng.random()
            for variant in ("stored", "derived") if sample % 2 == 0 else ("derived", "stored"):
                with _variant(variant):
                    gc.collect()  # a collection falls on neither variant by its turn in the alternation
                    started = time.perf_counter()
                    call(random.Random(seed))
                    timings[variant].append((time.perf_counter() - started) * 1000)
        results.append((name, {variant: percentiles(found[WARM_UP:]) for variant, found in timings.items()}))
    return results


def run(url: str, jobs: int, samples: int) -> None:
    store = open_store(url)
    try:
        build_hubs(store, jobs)
        finish(store)
        with store.engine.begin() as connection:
            connection.execute(update(s.jobs).values(state_hash=1))
            connection.execute(update(s.runs).values(job_state=1))
        print(f"{store.engine.dialect.name}: {jobs:,} jobs; p50 / p95 ms, stored -> derived")
        for name, found in compare(store, jobs // HUB_GROUP, samples):
            (stored_p50, stored_p95), (derived_p50, derived_p95) = found["stored"], found["derived"]
            print(f"  {name:36} {stored_p50:7.1f} / {stored_p95:7.1f}  ->  {derived_p50:7.1f} / {derived_p95:7.1f}")
    finally:
        store.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--samples", type=int, default=60)
    parser.add_argument("--postgres", metavar="URL", help="also on a scratch database of this server")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        run(f"sqlite:///{directory}/hubs.db", args.jobs, args.samples)
    if args.postgres:
        url, drop = scratch_database(args.postgres, "job_times")
        try:
            run(url, args.jobs, args.samples)
        finally:
            drop()


if __name__ == "__main__":
    main()
