"""Runs (`runs`) and their numbering: the batch's runs merged into the stored ones, each pointing to
the job version it ran; a job's runs numbered 1, 2, ... (`run_seq`) by first event time (ties by
run id), renumbered when an earlier run arrives late, and a batch run's snapshots following its
number (their barrier id)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, select, update

from consumer import json_codec
from consumer.store.rows import RUN_VALUES, STATE_RANK, TERMINAL_STATES, Folded, RunFold, next_state
from consumer.store.schema import chunks, jobs, runs, snapshot_lineage
from consumer.store.writer.batch import Batch, merged_with_stored
from consumer.store.writer.job_versions import run_versions, version_times

# Below any number _number_runs uses while it renumbers (it passes through -1, -2, ...).
_PROVISIONAL_SEQ = -1_000_000_000


def write_runs(
    batch: Batch, folded: Folded, job_ids: dict[tuple[str, str], int]
) -> tuple[dict[str, int], dict[str, int], set[int]]:
    """Upsert the batch's runs, each pointing to the job version it ran; their ids, numbers, and
    the ids of their jobs."""
    if not folded.runs:
        return {}, {}, set()
    existing = batch.stored_for_merge(runs, [runs.c.uuid], {uuid: fold.merged for uuid, fold in folded.runs.items()})
    run_job_ids = {
        uuid: existing[uuid]["job_id"] if uuid in existing else job_ids[fold.job] for uuid, fold in folded.runs.items()
    }
    stored_versions = {uuid: row["job_version_id"] for uuid, row in existing.items()}
    version_ids = run_versions(batch, folded, run_job_ids, stored_versions)
    values: list[dict[str, Any]] = []
    for run_uuid, fold in folded.runs.items():
        current = existing.get(run_uuid)
        # A new run takes a free, provisional number; _number_runs puts every run in its place.
        run_seq = current["run_seq"] if current else _PROVISIONAL_SEQ - len(values)
        # The job state its events asserted is kept while every event asserts the same one, of its job.
        job_state = fold.job_state if run_job_ids[run_uuid] == job_ids[fold.job] else None
        if current is not None and current["job_state"] != job_state:
            job_state = None
        values.append(
            {
                "uuid": run_uuid,
                "job_id": run_job_ids[run_uuid],
                "run_seq": run_seq,
                "job_version_id": version_ids.get(run_uuid, stored_versions.get(run_uuid)),
                **_run_values(current, fold),
                "job_state": job_state,
            }
        )
    placed = _appended_numbers(batch, values, existing)
    batch.upsert(runs, ["uuid"], values)
    _number_runs(batch, [value for value in values if value["uuid"] not in placed], existing)
    touched_versions = {v for v in (*version_ids.values(), *stored_versions.values()) if v is not None}
    version_times(batch, sorted(touched_versions))
    numbered = batch.connection.execute(
        select(runs.c.uuid, runs.c.id, runs.c.run_seq).where(runs.c.uuid.in_(sorted(folded.runs)))
    ).all()
    run_ids = {row.uuid: row.id for row in numbered}
    return run_ids, {row.uuid: row.run_seq for row in numbered}, set(run_job_ids.values())


def _run_values(current: Mapping[str, Any] | None, fold: RunFold) -> dict[str, Any]:
    """A run's columns: the batch's fold merged into the stored row as if its events had been
    applied one by one after the stored ones (consumer.ingest.fold.next_state)."""
    merged = merged_with_stored(current, RUN_VALUES, fold.merged)
    state, started_at, ended_at = fold.state, fold.started_at, fold.ended_at
    created_at, updated_at = fold.created_at, fold.updated_at
    if current is not None:
        if state in TERMINAL_STATES:
            assert ended_at is not None  # noqa: S101 - a terminal state has an end time (narrows the type)
            state, ended_at = next_state(current["state"], current["ended_at"], state, ended_at)
        elif current["state"] in TERMINAL_STATES or STATE_RANK[current["state"]] >= STATE_RANK[state]:
            state, ended_at = current["state"], current["ended_at"]
        started_at = min(filter(None, (current["started_at"], started_at)), default=None)
        ended_at = max(filter(None, (current["ended_at"], ended_at)), default=None)
        created_at, updated_at = min(current["created_at"], created_at), max(current["updated_at"], updated_at)
    return {
        "state": state,
        "started_at": started_at,
        "ended_at": ended_at,
        **{column: merged.values.get(column) for column in RUN_VALUES},
        "facets": json_codec.object_of(merged.facets),
        "merged_at": merged.times,
        "created_at": created_at,
        "updated_at": updated_at,
    }


# numbering ------------------------------------------------------------------------------
def _top_of_other_runs(column: str, leaving_out: Sequence[str]) -> Any:
    """The largest `column` among a job's runs but `leaving_out`, correlated to `jobs`. On created_at
    and run_seq it is read from the top of ix_runs_job_created and uq_runs_job_seq, so it costs the
    same however many runs the job has (a grouped max over the job's runs read them all, every batch)."""
    others = runs.alias()
    conditions = [others.c.job_id == jobs.c.id]
    if leaving_out:
        conditions.append(others.c.uuid.not_in(leaving_out))
    return select(func.max(others.c[column])).where(*conditions).correlate_except(others).scalar_subquery()


def _appended_numbers(batch: Batch, values: list[dict[str, Any]], stored: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """Number the new runs that come after all of their job's stored runs (a scheduled job's
    usual case) before they are written, so they are written once: their `run_seq` set in
    `values`; the uuids numbered. Jobs with a stored run of the batch are left to _number_runs."""
    new_by_job: dict[int, list[dict[str, Any]]] = defaultdict(list)
    with_stored = {value["job_id"] for value in values if value["uuid"] in stored}
    for value in values:
        if value["uuid"] not in stored and value["job_id"] not in with_stored:
            new_by_job[value["job_id"]].append(value)
    if not new_by_job:
        return set()
    others = _stored_runs_ends(batch, sorted(new_by_job), ())
    placed: set[str] = set()
    for job_id, new in new_by_job.items():
        latest, count = others.get(job_id, (None, 0))
        new.sort(key=lambda value: (value["created_at"], value["uuid"]))
        if latest is None or new[0]["created_at"] > latest:
            for rank, value in enumerate(new, 1):
                value["run_seq"] = count + rank
                placed.add(value["uuid"])
    return placed


def _stored_runs_ends(batch: Batch, job_id_list: Sequence[int], leaving_out: Sequence[str]) -> dict[int, tuple[datetime, int]]:
    """(first event time of the latest run, highest number) of each job's stored runs but
    `leaving_out`, for the jobs that have any. The highest number is the runs' count, unless
    retention pruned the earliest."""
    latest, highest = _top_of_other_runs("created_at", leaving_out), _top_of_other_runs("run_seq", leaving_out)
    found: dict[int, tuple[datetime, int]] = {}
    for chunk in chunks(job_id_list):
        query = select(jobs.c.id, latest, highest).where(jobs.c.id.in_(chunk))
        for job_id, latest, highest in batch.connection.execute(query):
            if latest is not None:
                found[job_id] = (latest, highest)
    return found


def _number_runs(batch: Batch, values: list[dict[str, Any]], stored: dict[str, dict[str, Any]]) -> None:
    """Number each touched job's runs 1, 2, ... by (first event time, run id). Usually the
    runs that are new (or now start earlier) all come after the job's other runs: they take the
    next numbers (one grouped query for all jobs). Otherwise every run of the job from the
    earliest moved one on is renumbered. Batch runs' barrier ids follow their number."""
    moved_by_job: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for value in values:
        current = stored.get(value["uuid"])
        if current is None or value["created_at"] < current["created_at"]:
            moved_by_job[value["job_id"]].append(value)
    if not moved_by_job:
        return
    moved_uuids = sorted(value["uuid"] for moved in moved_by_job.values() for value in moved)
    others = _stored_runs_ends(batch, sorted(moved_by_job), moved_uuids)
    moves: list[tuple[int, int, int]] = []  # (run id, old number, new number)
    appended: list[dict[str, Any]] = []
    for job_id, moved in sorted(moved_by_job.items()):
        latest, count = others.get(job_id, (None, 0))
        moved.sort(key=lambda value: (value["created_at"], value["uuid"]))
        if latest is None or moved[0]["created_at"] > latest:
            appended += [{"moved_uuid": value["uuid"], "seq": count + rank} for rank, value in enumerate(moved, 1)]
        else:
            moves += _renumbering(batch, job_id, moved[0]["created_at"], moved[0]["uuid"])
    if appended:
        statement = update(runs).where(runs.c.uuid == bindparam("moved_uuid")).values(run_seq=bindparam("seq"))
        if any(value["moved_uuid"] in stored for value in appended):
            # a stored run that now starts earlier but still after all the others may take the
            # number of another appended run: through negative numbers, as below
            batch.many(statement, [{**value, "seq": -value["seq"]} for value in appended])
        batch.many(statement, appended)
        # a stored run among them may have changed its number (a new run now starts before it)
        _renumber_snapshots(
            batch,
            [(run["id"], run["run_seq"], value["seq"]) for value in appended if (run := stored.get(value["moved_uuid"]))],
        )
    if not moves:
        return
    statement = update(runs).where(runs.c.id == bindparam("moved")).values(run_seq=bindparam("seq"))
    # Through negative numbers: no two runs of a job ever share one (uq_runs_job_seq).
    batch.many(statement, [{"moved": run_id, "seq": -new} for run_id, _, new in moves])
    batch.many(statement, [{"moved": run_id, "seq": new} for run_id, _, new in moves])
    _renumber_snapshots(batch, moves)


def _renumber_snapshots(batch: Batch, moves: list[tuple[int, int, int]]) -> None:
    """A batch run's snapshots carry its number as barrier id (a streaming run's carry micro-batch
    ids): follow each (run id, old number, new number) that changed from a number a run kept
    (not a provisional negative one)."""
    moves = [(run_id, old, new) for run_id, old, new in moves if 0 < old != new]
    if not moves:
        return
    moved_facets = dict(
        batch.connection.execute(select(runs.c.id, runs.c.facets).where(runs.c.id.in_([run_id for run_id, _, _ in moves]))).all()
    )
    renumbered = [
        {"moved": run_id, "old": old, "new": new}
        for run_id, old, new in moves
        if "microBatch" not in (moved_facets.get(run_id) or {})
    ]
    if renumbered:
        batch.many(
            update(snapshot_lineage)
            .where(snapshot_lineage.c.run_id == bindparam("moved"), snapshot_lineage.c.barrier_id == bindparam("old"))
            .values(barrier_id=bindparam("new")),
            renumbered,
        )


def _renumbering(batch: Batch, job_id: int, since: datetime, since_uuid: str) -> list[tuple[int, int, int]]:
    """(run id, old number, new number) of the job's runs from (since, since_uuid) on that move."""
    before = (runs.c.created_at < since) | ((runs.c.created_at == since) & (runs.c.uuid < since_uuid))
    # The runs before keep their numbers 1..placed: `placed` is their count, or where retention
    # pruned runs, the highest number among them (or just below the first number after them).
    placed = batch.connection.execute(select(func.max(runs.c.run_seq)).where(runs.c.job_id == job_id, before)).scalar_one()
    later = batch.connection.execute(
        select(runs.c.id, runs.c.run_seq).where(runs.c.job_id == job_id, ~before).order_by(runs.c.created_at, runs.c.uuid)
    ).all()
    if placed is None:
        placed = min((row.run_seq for row in later if row.run_seq > 0), default=1) - 1
    return [(row.id, row.run_seq, placed + rank) for rank, row in enumerate(later, 1) if row.run_seq != placed + rank]
