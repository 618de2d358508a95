"""Retention: remove what is older than a horizon and nothing current points to, in short
transactions of at most `batch` rows each (ingestion waits for one of them at most).

Removed: raw events older than the horizon (but those of a run that stays); runs whose last event
is older than it, with their states, snapshot and partition rows; dataset versions older than it
that no stored run wrote or read; version contents and job versions nothing points to any more.

Kept, whatever their age: the current lineage (job_io, column_lineage, each job's current and
declared version), each job's latest run and the runs its current version is chosen from (its
latest finished run with lineage and its latest run with lineage: the writer's choice among the
job's runs stays the same whatever runs arrive later), the run that wrote each dataset's current
version, latest version and latest version of a completed run (what the dataset answers show), the
parent of every stored run, and what a stored run points to (its job version, the dataset
versions its snapshots name).

On PostgreSQL each transaction first takes the advisory locks a writer takes for the same jobs,
runs and datasets (consumer.store.rows.lock_id), in the same ascending order, and checks again
under them what it is about to delete; version contents are deleted under `CONTENTS_LOCK`, which
every writer holds shared."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, and_, delete, exists, func, select, text

from consumer.store.confirmed_state import settle_confirmed
from consumer.store.rows import CONTENTS_LOCK, lock_id
from consumer.store.schema import (
    dataset_version_contents,
    dataset_versions,
    datasets,
    job_versions,
    jobs,
    latest_run,
    lineage_events,
    namespaces,
    partition_lineage,
    runs,
    snapshot_lineage,
)

BATCH = 1000
# The tables retention deletes from, in the order it reports them.
PRUNED_TABLES = (
    "lineage_events",
    "runs",
    "snapshot_lineage",
    "partition_lineage",
    "dataset_versions",
    "dataset_version_contents",
    "job_versions",
)

Writing = Callable[[], AbstractContextManager[Connection]]


@dataclass
class Pruned:
    """Rows removed per table. `resume_at` is None when everything past the horizon was removed,
    else where the time budget stopped the prune: the next one, given it, goes on from there."""

    rows: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PRUNED_TABLES, 0))
    resume_at: tuple[int, Any] | None = None

    @property
    def complete(self) -> bool:
        return self.resume_at is None

    def add(self, table: str, count: int) -> None:
        self.rows[table] += max(count, 0)

    @property
    def total(self) -> int:
        return sum(self.rows.values())


def prune(
    writing: Writing,
    horizon: datetime,
    *,
    batch: int = BATCH,
    budget_seconds: float | None = None,
    resume_at: tuple[int, Any] | None = None,
) -> Pruned:
    """Remove what is older than `horizon` (see the module), each transaction from `writing()`
    holding at most `batch` runs, versions or events. With `budget_seconds`, no new transaction
    starts once that long has passed (`resume_at` then says where to go on)."""
    deadline = None if budget_seconds is None else time.monotonic() + budget_seconds
    pruned = Pruned()
    steps: tuple[Callable[[Connection, Any], Any], ...] = (
        lambda connection, after: _prune_runs(connection, horizon, after, batch, pruned),
        lambda connection, after: _prune_runless_versions(connection, horizon, after, batch, pruned),
        lambda connection, after: _prune_raw_events(connection, horizon, after, batch, pruned),
        lambda connection, after: _prune_contents(connection, after, batch, pruned),
    )
    first, after = resume_at or (0, None)
    transactions = 0
    for number in range(first, len(steps)):
        after = after if number == first else None
        while True:
            # at least one transaction per call, so a prune on a small budget still gets on
            if transactions and deadline is not None and time.monotonic() > deadline:
                pruned.resume_at = (number, after)
                return pruned
            with writing() as connection:
                after = steps[number](connection, after)
            transactions += 1
            if after is None:
                break
    return pruned


# runs ---------------------------------------------------------------------------------------
def _prune_runs(connection: Connection, horizon: datetime, after: int | None, batch: int, pruned: Pruned) -> int | None:
    """One batch of runs past the horizon (by id, from `after` on); the last id looked at, None at the end."""
    old = and_(runs.c.created_at < horizon, runs.c.updated_at < horizon)
    query = select(runs.c.id, runs.c.uuid, runs.c.job_id).where(old)
    if after is not None:
        query = query.where(runs.c.id > after)
    candidates = connection.execute(query.order_by(runs.c.id).limit(batch)).all()
    if not candidates:
        return None
    ids = [row.id for row in candidates]
    job_ids = sorted({row.job_id for row in candidates})
    locked_datasets = set(_dataset_ids_written(connection, ids))
    _lock(
        connection,
        [("job", key) for key in _job_keys(connection, job_ids)]
        + [("run", row.uuid) for row in candidates]
        + [("dataset", key) for key in _dataset_keys(connection, sorted(locked_datasets))],
    )
    # Under the locks: what a writer changed before they were taken is seen now.
    doomed = set(connection.execute(select(runs.c.id).where(runs.c.id.in_(ids), old)).scalars())
    written = connection.execute(
        select(dataset_versions.c.run_id, dataset_versions.c.dataset_id).where(dataset_versions.c.run_id.in_(sorted(doomed)))
    ).all()
    doomed -= {run_id for run_id, dataset_id in written if dataset_id not in locked_datasets}  # next time
    doomed -= _kept_runs(connection, sorted(doomed), job_ids)
    if doomed:
        _delete_runs(connection, sorted(doomed), job_ids, horizon, pruned)
    return ids[-1]


def _kept_runs(connection: Connection, run_ids: Sequence[int], job_ids: Sequence[int]) -> set[int]:
    """Which of `run_ids` stay whatever their age (see the module)."""
    if not run_ids:
        return set()
    kept: set[int] = set()
    latest = (
        latest_run(jobs.c.id),
        latest_run(jobs.c.id, versioned=True, finished=True),
        latest_run(jobs.c.id, versioned=True),
    )
    for row in connection.execute(select(*latest).where(jobs.c.id.in_(job_ids))):
        kept.update(run_id for run_id in row if run_id is not None)
    uuids = dict(connection.execute(select(runs.c.uuid, runs.c.id).where(runs.c.id.in_(run_ids))).all())
    parents = connection.execute(select(runs.c.parent_run_uuid).distinct().where(runs.c.parent_run_uuid.in_(sorted(uuids))))
    kept.update(uuids[uuid] for uuid in parents.scalars())
    kept |= _writers_of_shown_versions(connection, run_ids)
    return kept & set(run_ids)


def _writers_of_shown_versions(connection: Connection, run_ids: Sequence[int]) -> set[int]:
    """The runs among `run_ids` that wrote a version a dataset's answers show: its current version,
    its latest, and its latest one written by a completed run (Marquez's lastModifiedAt)."""
    v = dataset_versions.c
    written = connection.execute(
        select(v.dataset_id, v.version, v.created_at, v.run_id, runs.c.state, datasets.c.current_version)
        .join(runs, runs.c.id == v.run_id)
        .join(datasets, datasets.c.id == v.dataset_id)
        .where(v.run_id.in_(run_ids))
    ).all()
    if not written:
        return set()
    dataset_ids = sorted({row.dataset_id for row in written})
    latest = dict(
        connection.execute(
            select(v.dataset_id, func.max(v.created_at)).where(v.dataset_id.in_(dataset_ids)).group_by(v.dataset_id)
        ).all()
    )
    latest_completed = dict(
        connection.execute(
            select(v.dataset_id, func.max(v.created_at))
            .join(runs, runs.c.id == v.run_id)
            .where(v.dataset_id.in_(dataset_ids), runs.c.state == "COMPLETED")
            .group_by(v.dataset_id)
        ).all()
    )
    return {
        row.run_id
        for row in written
        if row.version == row.current_version
        or row.created_at == latest.get(row.dataset_id)
        or (row.state == "COMPLETED" and row.created_at == latest_completed.get(row.dataset_id))
    }


def _delete_runs(
    connection: Connection, run_ids: Sequence[int], job_ids: Sequence[int], horizon: datetime, pruned: Pruned
) -> None:
    """Delete the runs and what only they point to; the versions they wrote that a stored run's
    snapshot names stay (without their run)."""
    v = dataset_versions.c
    named_by_other_run = exists().where(
        snapshot_lineage.c.dataset_id == v.dataset_id,
        snapshot_lineage.c.snapshot_id == v.version,
        snapshot_lineage.c.run_id.not_in(run_ids),
    )
    doomed_versions = and_(v.run_id.in_(run_ids), ~named_by_other_run)
    pruned.add("dataset_versions", connection.execute(delete(dataset_versions).where(doomed_versions)).rowcount)
    of_runs = select(snapshot_lineage.c.id).where(snapshot_lineage.c.run_id.in_(run_ids))
    pruned.add(
        "partition_lineage",
        connection.execute(delete(partition_lineage).where(partition_lineage.c.snapshot_lineage_id.in_(of_runs))).rowcount,
    )
    pruned.add(
        "snapshot_lineage", connection.execute(delete(snapshot_lineage).where(snapshot_lineage.c.run_id.in_(run_ids))).rowcount
    )
    settle_confirmed(connection, job_ids)  # what the runs confirmed of their jobs' state stays
    pruned.add("runs", connection.execute(delete(runs).where(runs.c.id.in_(run_ids))).rowcount)
    # The jobs' versions no run ran any more and that are neither current nor declared.
    jv = job_versions.c
    unused = and_(
        jv.job_id.in_(job_ids),
        jv.created_at < horizon,
        ~exists().where(runs.c.job_version_id == jv.id),
        ~exists().where(jobs.c.id == jv.job_id, (jobs.c.current_version_id == jv.id) | (jobs.c.declared_version_id == jv.id)),
    )
    pruned.add("job_versions", connection.execute(delete(job_versions).where(unused)).rowcount)


# dataset versions of no run ------------------------------------------------------------------------
def _prune_runless_versions(
    connection: Connection, horizon: datetime, after: int | None, batch: int, pruned: Pruned
) -> int | None:
    """Versions past the horizon that no run wrote (inputs, dataset events, or their run was pruned)
    and no stored run's snapshot names, but never a dataset's current or latest version."""
    v = dataset_versions.c
    old = and_(v.run_id.is_(None), v.created_at < horizon)
    query = select(v.id, v.dataset_id).where(old)
    if after is not None:
        query = query.where(v.id > after)
    candidates = connection.execute(query.order_by(v.id).limit(batch)).all()
    if not candidates:
        return None
    ids = [row.id for row in candidates]
    dataset_ids = sorted({row.dataset_id for row in candidates})
    _lock(connection, [("dataset", key) for key in _dataset_keys(connection, dataset_ids)])
    newest = dict(
        connection.execute(
            select(v.dataset_id, func.max(v.created_at)).where(v.dataset_id.in_(dataset_ids)).group_by(v.dataset_id)
        ).all()
    )
    rows = connection.execute(
        select(v.id, v.dataset_id, v.created_at)
        .join(datasets, datasets.c.id == v.dataset_id)
        .where(
            v.id.in_(ids),
            old,
            datasets.c.current_version.is_distinct_from(v.version),
            ~exists().where(snapshot_lineage.c.dataset_id == v.dataset_id, snapshot_lineage.c.snapshot_id == v.version),
        )
    ).all()
    doomed = sorted(row.id for row in rows if row.created_at != newest.get(row.dataset_id))
    if doomed:
        pruned.add("dataset_versions", connection.execute(delete(dataset_versions).where(v.id.in_(doomed))).rowcount)
    return ids[-1]


# raw events -----------------------------------------------------------------------------------
def _prune_raw_events(
    connection: Connection, horizon: datetime, after: tuple[datetime, int] | None, batch: int, pruned: Pruned
) -> tuple[datetime, int] | None:
    """Raw events older than the horizon, but those of a stored run (a replay rebuilds it)."""
    e = lineage_events.c
    query = select(e.event_time, e.id).where(e.event_time < horizon)
    if after is not None:
        query = query.where((e.event_time > after[0]) | ((e.event_time == after[0]) & (e.id > after[1])))
    rows = connection.execute(query.order_by(e.event_time, e.id).limit(batch)).all()
    if not rows:
        return None
    of_stored_run = exists().where(runs.c.uuid == e.run_uuid)
    doomed = delete(lineage_events).where(e.id.in_([row.id for row in rows]), e.run_uuid.is_(None) | ~of_stored_run)
    pruned.add("lineage_events", connection.execute(doomed).rowcount)
    return (rows[-1].event_time, rows[-1].id)


# version contents -----------------------------------------------------------------------------
def _prune_contents(connection: Connection, after: int | None, batch: int, pruned: Pruned) -> int | None:
    """Version contents no version points to; under CONTENTS_LOCK (PostgreSQL), which no writer
    then holds, so none is about to point to one."""
    c = dataset_version_contents.c
    query = select(c.id)
    if after is not None:
        query = query.where(c.id > after)
    ids = list(connection.execute(query.order_by(c.id).limit(batch)).scalars())
    if not ids:
        return None
    not_pointed_to = ~exists().where(dataset_versions.c.content_id == c.id)
    unused = list(connection.execute(select(c.id).where(c.id.in_(ids), not_pointed_to)).scalars())
    if unused:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:contents)"), {"contents": CONTENTS_LOCK})
        doomed = delete(dataset_version_contents).where(c.id.in_(unused), not_pointed_to)
        pruned.add("dataset_version_contents", connection.execute(doomed).rowcount)
    return ids[-1]


# locks and keys -------------------------------------------------------------------------------
def _lock(connection: Connection, keys: Iterable[tuple[str, Any]]) -> None:
    """PostgreSQL: the writer's advisory locks on these keys, in its (ascending) order."""
    if connection.dialect.name != "postgresql":
        return
    ids = sorted({lock_id(kind, key) for kind, key in keys})
    if ids:
        connection.execute(
            text(
                "SELECT count(pg_advisory_xact_lock(id)) FROM (SELECT unnest(CAST(:ids AS bigint[])) AS id ORDER BY 1) AS ordered"
            ),
            {"ids": ids},
        )


def _job_keys(connection: Connection, job_ids: Sequence[int]) -> list[tuple[str, str]]:
    query = select(namespaces.c.name, jobs.c.name).join(namespaces, namespaces.c.id == jobs.c.namespace_id)
    return [(row[0], row[1]) for row in connection.execute(query.where(jobs.c.id.in_(job_ids)))]


def _dataset_keys(connection: Connection, dataset_ids: Sequence[int]) -> list[tuple[str, str]]:
    if not dataset_ids:
        return []
    query = select(namespaces.c.name, datasets.c.name).join(namespaces, namespaces.c.id == datasets.c.namespace_id)
    return [(row[0], row[1]) for row in connection.execute(query.where(datasets.c.id.in_(dataset_ids)))]


def _dataset_ids_written(connection: Connection, run_ids: Sequence[int]) -> list[int]:
    query = select(dataset_versions.c.dataset_id).distinct().where(dataset_versions.c.run_id.in_(run_ids))
    return list(connection.execute(query).scalars())
