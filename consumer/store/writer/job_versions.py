"""Job versions (`job_versions`: what a job does, stored once per distinct content): the version each
run of the batch ran (the union of its stored version and its events), the version a JobEvent
declares for its job, and each version's first run time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, select, update

from consumer import json_codec
from consumer.store.rows import Folded, JobKey, VersionContent, lineage_from_content, lineage_version
from consumer.store.schema import chunks, job_versions, jobs, runs
from consumer.store.writer.batch import Batch


def run_versions(
    batch: Batch, folded: Folded, run_job_ids: Mapping[str, int], stored: Mapping[str, int | None]
) -> dict[str, int]:
    """The version each run of the batch with lineage ran: the union of what its stored version
    and the batch's events say (a version known already costs one keyed lookup)."""
    stored_ids = {uuid: version_id for uuid in folded.lineage if (version_id := stored.get(uuid)) is not None}
    stored_content = _version_contents(batch, sorted(set(stored_ids.values())))
    wanted: dict[str, tuple[int, str, VersionContent, datetime]] = {}
    for uuid, version in folded.lineage.items():
        known = stored_content.get(stored_ids[uuid]) if uuid in stored_ids else None
        content: VersionContent = version.content
        content_hash = version.lineage_hash
        if known is not None:
            known_lineage = lineage_from_content(version.job, known[1], version.time)
            union = known_lineage.union(version.lineage())
            if union.key() == known_lineage.key():
                continue  # nothing new: the run keeps its version
            content_hash, content = lineage_version(union)
        wanted[uuid] = (run_job_ids[uuid], content_hash, content, version.time)
    ids = _version_ids(
        batch, {(job_id, content_hash): (content, time) for job_id, content_hash, content, time in wanted.values()}
    )
    return {uuid: ids[(job_id, content_hash)] for uuid, (job_id, content_hash, _, _) in wanted.items()}


def _version_contents(batch: Batch, version_ids: Sequence[int]) -> dict[int, tuple[str, dict[str, Any]]]:
    found: dict[int, tuple[str, dict[str, Any]]] = {}
    for chunk in chunks(version_ids):
        for row in batch.connection.execute(
            select(job_versions.c.id, job_versions.c.lineage_hash, job_versions.c.content).where(job_versions.c.id.in_(chunk))
        ):
            found[row.id] = (row.lineage_hash, row.content)
    return found


def _version_ids(batch: Batch, wanted: Mapping[tuple[int, str], tuple[VersionContent, datetime]]) -> dict[tuple[int, str], int]:
    """The ids of job versions by (job id, hash), inserting those not stored yet."""

    def row(key: tuple[int, str]) -> dict[str, Any]:
        content, created_at = wanted[key]
        stored = json_codec.Fragment(content) if isinstance(content, bytes) else content
        return {"job_id": key[0], "lineage_hash": key[1], "content": stored, "created_at": created_at}

    ids = batch.ids_inserting_missing(job_versions, ["job_id", "lineage_hash"], wanted, row)
    batch.version_content.update((ids[key], content) for key, (content, _) in wanted.items())
    return ids


def version_times(batch: Batch, version_ids: Sequence[int]) -> None:
    """A version's created_at is the earliest run that ran it (written only where that changed)."""
    if not version_ids:
        return
    earliest = select(func.min(runs.c.created_at)).where(runs.c.job_version_id == job_versions.c.id).scalar_subquery()
    for chunk in chunks(version_ids):
        batch.connection.execute(
            update(job_versions)
            .where(job_versions.c.id.in_(chunk), earliest.is_not(None), job_versions.c.created_at != earliest)
            .values(created_at=earliest)
        )


def write_declared_versions(batch: Batch, folded: Folded, job_ids: Mapping[JobKey, int]) -> None:
    """A JobEvent's lineage becomes its job's declared version when it is the newest declaration."""
    if not folded.declared:
        return
    stored = dict(
        batch.connection.execute(
            select(jobs.c.id, jobs.c.declared_at).where(jobs.c.id.in_(sorted(job_ids[job] for job in folded.declared)))
        ).all()
    )
    newer: dict[int, tuple[str, dict[str, Any], datetime]] = {}
    for job, lineage in folded.declared.items():
        job_id = job_ids[job]
        if stored.get(job_id) is None or lineage.time >= stored[job_id]:
            newer[job_id] = (*lineage_version(lineage), lineage.time)
    ids = _version_ids(batch, {(job_id, h): (content, time) for job_id, (h, content, time) in newer.items()})
    batch.many(
        update(jobs)
        .where(jobs.c.id == bindparam("job"))
        .values(declared_version_id=bindparam("version"), declared_at=bindparam("at")),
        [{"job": job_id, "version": ids[(job_id, h)], "at": time} for job_id, (h, _, time) in sorted(newer.items())],
    )
