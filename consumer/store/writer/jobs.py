"""Job rows (`jobs`): the batch's values and facets merged into the stored rows, and the jobs a
batch leaves as they are, because every event of theirs belongs to a run that asserted exactly
the stored state; before any other write of a job, what such runs confirmed is merged into its row
first (consumer.store.confirmed_state)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import select

from consumer import json_codec
from consumer.store.confirmed_state import confirm, confirmed_times
from consumer.store.rows import JOB_VALUES, Folded, JobKey
from consumer.store.schema import chunks, jobs, runs
from consumer.store.writer.batch import Batch, merged_with_stored, without_facets


def write_jobs(batch: Batch, folded: Folded, namespace_ids: dict[str, int]) -> tuple[dict[tuple[str, str], int], set[int]]:
    """The batch's jobs' ids, and those of the ones whose lineage had been retired (seen again
    now: their current lineage is written again). A job whose events all belong to runs that
    asserted exactly its stored state keeps its row as it is (_unchanged_jobs); before any
    other write of a job, what such runs confirmed is merged into its row (consumer.store.confirmed_state)."""
    if not folded.jobs:
        return {}, set()
    incoming = {(namespace_ids[namespace], name): fold.merged for (namespace, name), fold in folded.jobs.items()}
    stored = batch.existing(jobs, [jobs.c.namespace_id, jobs.c.name], list(incoming), without_facets(jobs))
    unchanged = _unchanged_jobs(batch, folded, namespace_ids, stored)
    changing = {key: row for key, row in stored.items() if key not in unchanged}
    confirmed = confirmed_times(batch.connection, [row["id"] for row in changing.values()])
    for row in changing.values():
        if row["id"] in confirmed:
            confirm(row, confirmed[row["id"]])
    existing = batch.stored_for_merge(
        jobs, [jobs.c.namespace_id, jobs.c.name], {key: incoming[key] for key in changing}, changing
    )
    values = []
    for (namespace, name), fold in folded.jobs.items():
        key = (namespace_ids[namespace], name)
        if key in unchanged:
            continue
        current = existing.get(key)
        merged = merged_with_stored(current, JOB_VALUES, fold.merged)
        times = [fold.first_named, fold.last_named, *([current["created_at"], current["last_seen"]] if current else [])]
        values.append(
            {
                "namespace_id": key[0],
                "name": name,
                **{column: merged.values.get(column) for column in JOB_VALUES},
                "facets": json_codec.object_of(merged.facets),
                "merged_at": merged.times,
                "state_hash": merged.state(),
                "created_at": min(times),
                "updated_at": max(times),
                "last_seen": max(times),
                "lineage_retired_at": None,
            }
        )
    ids = batch.upsert(jobs, ["namespace_id", "name"], values)
    ids.update({key: stored[key]["id"] for key in unchanged})
    retired = {row["id"] for row in existing.values() if row["lineage_retired_at"] is not None}
    return {(namespace, name): ids[(namespace_ids[namespace], name)] for namespace, name in folded.jobs}, retired


def _unchanged_jobs(
    batch: Batch, folded: Folded, namespace_ids: dict[str, int], stored: Mapping[tuple[int, str], Mapping[str, Any]]
) -> set[tuple[int, str]]:
    """The stored jobs (by natural key) the batch leaves as they are: every event of the job
    belongs to a run that asserted exactly the stored state (EntityFold.state), and to no run
    stored before with another job or state; none is older than the job; its lineage is not
    retired. Such runs' times are what the row would have taken (schema.job_seen_at)."""
    candidates: dict[JobKey, Mapping[str, Any]] = {}
    for job, fold in folded.jobs.items():
        row = stored.get((namespace_ids[job[0]], job[1]))
        if (
            row is not None
            and fold.state is not None
            and fold.state == row["state_hash"]
            and row["lineage_retired_at"] is None
            and fold.first_named >= row["created_at"]
        ):
            candidates[job] = row
    if not candidates:
        return set()
    their_runs = sorted(uuid for uuid, run in folded.runs.items() if run.job in candidates)
    blocked = set()
    for chunk in chunks(their_runs):
        query = select(runs.c.uuid, runs.c.job_id, runs.c.job_state).where(runs.c.uuid.in_(chunk))
        for uuid, job_id, job_state in batch.connection.execute(query):
            row = candidates[folded.runs[uuid].job]
            if (job_id, job_state) != (row["id"], row["state_hash"]):
                blocked.add(folded.runs[uuid].job)
    return {(namespace_ids[job[0]], job[1]) for job in candidates if job not in blocked}
