"""Current lineage (`job_io`, `column_lineage`): each touched job's current version (`jobs.current_version_id`),
and where it changed, the job's table and column lineage rows following that version's content:
only the edges that differ where the job reads and writes the same tables as before, all of its
rows elsewhere."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select, update

from consumer.store.rows import DatasetKey, current_rows, decoded_content
from consumer.store.schema import chunks, column_lineage, column_lineage_of_jobs, job_io, job_versions, jobs, latest_run
from consumer.store.writer.batch import Batch
from consumer.store.writer.datasets import stored_dataset_ids, stored_field_ids

# Every column of a column_lineage row but its id: two rows with the same values are the same edge.
_EDGE_COLUMNS = (
    "job_id",
    "output_dataset_id",
    "output_field_id",
    "input_dataset_id",
    "input_field_id",
    "transformation_type",
    "transformation_subtype",
    "transformation_description",
    "masking",
)


def write_current_lineage(
    batch: Batch,
    job_id_set: set[int],
    retired: set[int],
    dataset_ids: Mapping[DatasetKey, int],
    field_ids: Mapping[tuple[int, str], int],
) -> None:
    """Each touched job's current version: the one its latest finished run ran, else its latest
    run's, else its newest JobEvent's. Where that changed (or the job's lineage had been retired),
    its rows of job_io and column_lineage follow the version's content; where the job_io rows stay
    (the same tables, or only the version's first run moved), their first_seen follows. A repeated
    run writes neither."""
    if not job_id_set:
        return
    changed: dict[int, int | None] = {}
    for job_id, stored, chosen in _current_versions(batch, sorted(job_id_set)):
        if stored != chosen or job_id in retired:
            changed[job_id] = chosen
    io_kept: set[int] = set()
    if changed:
        batch.many(
            update(jobs).where(jobs.c.id == bindparam("job")).values(current_version_id=bindparam("version")),
            [{"job": job_id, "version": version} for job_id, version in sorted(changed.items())],
        )
        io_kept = _write_current(batch, changed, dataset_ids, field_ids)
    io_kept |= job_id_set - set(changed)
    since = (
        select(job_versions.c.created_at)
        .join(jobs, jobs.c.current_version_id == job_versions.c.id)
        .where(jobs.c.id == job_io.c.job_id)
        .scalar_subquery()
    )
    for chunk in chunks(sorted(io_kept)):
        batch.connection.execute(
            update(job_io).where(job_io.c.job_id.in_(chunk), job_io.c.first_seen != since).values(first_seen=since)
        )


def _current_versions(batch: Batch, job_id_list: list[int]) -> list[tuple[int, int | None, int | None]]:
    """(job id, its stored current version, the one it should be) of each job."""
    finished, latest = (
        latest_run(jobs.c.id, "job_version_id", versioned=True, finished=True),
        latest_run(jobs.c.id, "job_version_id", versioned=True),
    )
    found = []
    for chunk in chunks(job_id_list):
        for row in batch.connection.execute(
            select(jobs.c.id, jobs.c.current_version_id, finished, latest, jobs.c.declared_version_id).where(jobs.c.id.in_(chunk))
        ):
            found.append((row[0], row[1], row[2] if row[2] is not None else row[3] if row[3] is not None else row[4]))
    return found


def _write_current(
    batch: Batch,
    versions: Mapping[int, int | None],
    dataset_ids: Mapping[DatasetKey, int],
    field_ids: Mapping[tuple[int, str], int],
) -> set[int]:
    """Make the jobs' rows of job_io and column_lineage their versions' content; the jobs whose
    job_io rows were kept as they were (their first_seen is the caller's to move)."""
    stored = _version_rows(batch, sorted({v for v in versions.values() if v is not None}))
    contents = {job_id: stored[version] for job_id, version in versions.items() if version is not None}
    named: set[DatasetKey] = {
        (key[0], key[1]) for content, _ in contents.values() for key in (*content["inputs"], *content["outputs"])
    }
    named |= {(e[i], e[i + 1]) for content, _ in contents.values() for e in content["edges"] for i in (0, 3)}
    ids = dict(dataset_ids)
    ids.update(stored_dataset_ids(batch, sorted(named - set(ids))))
    fields = dict(field_ids)
    with_fields = {dataset_id for dataset_id, _ in fields}
    edge_datasets = {ids[(e[i], e[i + 1])] for content, _ in contents.values() for e in content["edges"] for i in (0, 3)}
    fields.update(stored_field_ids(batch, sorted(edge_datasets - with_fields)))
    io_rows, edge_rows = current_rows({job_id: content for job_id, (content, _) in contents.items()}, ids, fields)
    for row in io_rows:
        row["first_seen"] = contents[row["job_id"]][1]
    stored_io = _stored_io(batch, sorted(versions))
    new_io: dict[int, set[tuple[int, str]]] = defaultdict(set)
    for row in io_rows:
        new_io[row["job_id"]].add((row["dataset_id"], row["direction"]))
    # Where a job reads and writes the same tables as before, its new version mostly keeps the
    # old one's edges (a column added, one edge moved): only the edges that differ are written.
    # Elsewhere (other tables: few edges in common) all of its rows are replaced.
    edited = {job_id for job_id, io in stored_io.items() if new_io.get(job_id) == io}
    replaced = sorted(set(versions) - edited)
    for chunk in chunks(replaced):
        batch.connection.execute(job_io.delete().where(job_io.c.job_id.in_(chunk)))
        batch.connection.execute(column_lineage.delete().where(column_lineage_of_jobs(chunk, batch.dialect)))
    edge_rows = _edge_changes(batch, sorted(edited), edge_rows)
    io_rows = [row for row in io_rows if row["job_id"] not in edited]
    if io_rows:
        batch.many(batch.insert(job_io), sorted(io_rows, key=lambda r: (r["job_id"], r["dataset_id"], r["direction"])))
    if edge_rows:
        batch.many(batch.insert(column_lineage), edge_rows)
    return edited


def _stored_io(batch: Batch, job_id_list: Sequence[int]) -> dict[int, set[tuple[int, str]]]:
    """The (dataset id, direction) pairs of job_io by job."""
    found: dict[int, set[tuple[int, str]]] = defaultdict(set)
    c = job_io.c
    for chunk in chunks(job_id_list):
        for job_id, dataset_id, direction in batch.connection.execute(
            select(c.job_id, c.dataset_id, c.direction).where(c.job_id.in_(chunk))
        ):
            found[job_id].add((dataset_id, direction))
    return found


def _edge_changes(batch: Batch, job_id_list: Sequence[int], edge_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Delete the stored column_lineage rows of these jobs that `edge_rows` (their rows now, with
    every other job's) no longer hold; the rows of `edge_rows` still to insert."""
    if not job_id_list:
        return edge_rows
    wanted = {tuple(row[name] for name in _EDGE_COLUMNS): row for row in edge_rows}
    c = column_lineage.c
    stale: list[int] = []
    for chunk in chunks(job_id_list):
        for edge_id, *values in batch.connection.execute(
            select(c.id, *(c[name] for name in _EDGE_COLUMNS)).where(column_lineage_of_jobs(chunk, batch.dialect))
        ):
            if wanted.pop(tuple(values), None) is None:
                stale.append(edge_id)
    for chunk in chunks(sorted(stale)):
        batch.connection.execute(column_lineage.delete().where(c.id.in_(chunk)))
    return list(wanted.values())  # in edge_rows' order


def _version_rows(batch: Batch, version_ids: Sequence[int]) -> dict[int, tuple[dict[str, Any], datetime]]:
    """(content, created_at) of job versions by id; the content read only where this batch did not know it."""
    c = job_versions.c
    found: dict[int, tuple[dict[str, Any], datetime]] = {}
    for chunk in chunks(version_ids):
        known = [version for version in chunk if version in batch.version_content]
        if known:
            for version, created_at in batch.connection.execute(select(c.id, c.created_at).where(c.id.in_(known))):
                found[version] = (decoded_content(batch.version_content[version]), created_at)
        unknown = [version for version in chunk if version not in batch.version_content]
        if unknown:
            for version, content, created_at in batch.connection.execute(
                select(c.id, c.content, c.created_at).where(c.id.in_(unknown))
            ):
                found[version] = (content, created_at)
    return found
