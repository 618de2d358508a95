"""Reads for the lineage-changes topic: the current state of given table-lineage edges, column-
lineage edges, snapshot lineage and runs, each as the JSON-ready message a subscriber receives,
and each job's current version (its hash and id: the change message, with the diff of the two
versions' contents, is made by consumer.ingest.change_publishing, which diffs two such readings
around a store transaction)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import attrs
from sqlalchemy import Connection, Engine, Table, select

from consumer.store import schema as s
from consumer.store.rows import TERMINAL_STATES

JobKey = tuple[str, str]  # (namespace, name)
DatasetKey = tuple[str, str]
# (job namespace, job name, direction, dataset namespace, dataset name)
TableEdgeKey = tuple[str, str, str, str, str]
# Every key below starts with the message kind, so one topic holds all four kinds.
StateKey = tuple[Any, ...]

TABLE_EDGE = "table_lineage_edge"
COLUMN_EDGE = "column_lineage_edge"
SNAPSHOT = "snapshot_lineage"
RUN = "run_finished"
JOB_VERSION = "job_version_changed"
PRESENT, RETIRED = "present", "retired"  # an edge's state


@attrs.frozen
class ChangeScope:
    """What one store transaction may have changed."""

    table_edges: frozenset[TableEdgeKey] = frozenset()
    column_outputs: frozenset[DatasetKey] = frozenset()  # column edges into these datasets
    run_uuids: frozenset[str] = frozenset()  # their snapshot lineage and final state
    jobs: frozenset[JobKey] = frozenset()  # every table and column edge of these jobs

    def __bool__(self) -> bool:
        return bool(self.table_edges or self.column_outputs or self.run_uuids or self.jobs)


def lineage_state(conn: Connection, scope: ChangeScope) -> dict[StateKey, dict[str, Any]]:
    """The current message of every key in `scope` that exists (runs: only finished ones), as
    `conn` sees it (inside a write transaction: with its writes)."""
    if not scope:
        return {}
    return {
        **_table_edges(conn, scope),
        **_column_edges(conn, scope),
        **_snapshots(conn, scope.run_uuids),
        **_finished_runs(conn, scope.run_uuids),
        **_current_versions(conn, scope.jobs),
    }


def version_contents(conn: Connection, version_ids: Iterable[int]) -> dict[int, Any]:
    """The stored content of each job version (a version's content never changes once stored)."""
    wanted = sorted(set(version_ids))
    if not wanted:
        return {}
    rows = conn.execute(select(s.job_versions.c.id, s.job_versions.c.content).where(s.job_versions.c.id.in_(wanted)))
    return {row[0]: json.loads(row[1]) if isinstance(row[1], (str, bytes)) else row[1] for row in rows}


def stale_job_keys(engine: Engine, cutoff: datetime) -> frozenset[JobKey]:
    """Jobs with table lineage not seen since `cutoff` (the ones a retirement sweep may retire)."""
    job_ns = s.namespaces.alias("job_ns")
    with engine.connect() as conn:
        rows = conn.execute(
            select(job_ns.c.name, s.jobs.c.name, s.job_seen_at(s.jobs.c.last_seen))
            .join(job_ns, job_ns.c.id == s.jobs.c.namespace_id)
            .where(s.jobs.c.lineage_retired_at.is_(None))
        ).all()
    return frozenset((row[0], row[1]) for row in rows if row[2] is not None and row[2] < cutoff)


def everything(engine: Engine) -> ChangeScope:
    """Every job's edges and every run's snapshots and final state."""
    with engine.connect() as conn:
        jobs = conn.execute(
            select(s.namespaces.c.name, s.jobs.c.name).join(s.namespaces, s.namespaces.c.id == s.jobs.c.namespace_id)
        ).all()
        run_uuids = conn.execute(select(s.runs.c.uuid)).scalars().all()
    return ChangeScope(jobs=frozenset((row[0], row[1]) for row in jobs), run_uuids=frozenset(run_uuids))


def jobs_named(engine: Engine, name: str, namespace: str | None) -> frozenset[JobKey]:
    query = select(s.namespaces.c.name, s.jobs.c.name).join(s.namespaces, s.namespaces.c.id == s.jobs.c.namespace_id)
    query = query.where(s.jobs.c.name == name)
    if namespace is not None:
        query = query.where(s.namespaces.c.name == namespace)
    with engine.connect() as conn:
        return frozenset((row[0], row[1]) for row in conn.execute(query))


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")  # columns are UtcDateTime: aware UTC


def _named(namespace: str, name: str) -> dict[str, str]:
    return {"namespace": namespace, "name": name}


def _ids_of(conn: Connection, table: Table, keys: Iterable[tuple[str, str]]) -> dict[int, tuple[str, str]]:
    """The ids of the (namespace, name) keys `table` (jobs or datasets) holds."""
    wanted = set(keys)
    if not wanted:
        return {}
    rows = conn.execute(
        select(table.c.id, s.namespaces.c.name, table.c.name)
        .join(s.namespaces, s.namespaces.c.id == table.c.namespace_id)
        .where(table.c.name.in_(sorted({name for _, name in wanted})))
    ).all()
    return {row[0]: (row[1], row[2]) for row in rows if (row[1], row[2]) in wanted}


def _job_ids(conn: Connection, jobs: Iterable[JobKey]) -> dict[int, JobKey]:
    return _ids_of(conn, s.jobs, jobs)


def _dataset_ids(conn: Connection, datasets: Iterable[DatasetKey]) -> dict[int, DatasetKey]:
    return _ids_of(conn, s.datasets, datasets)


def _table_edges(conn: Connection, scope: ChangeScope) -> dict[StateKey, dict[str, Any]]:
    job_ids = _job_ids(conn, {(edge[0], edge[1]) for edge in scope.table_edges} | scope.jobs)
    if not job_ids:
        return {}
    ds_ns = s.namespaces.alias("ds_ns")
    rows = conn.execute(
        select(s.job_io.c.job_id, s.job_io.c.direction, ds_ns.c.name, s.datasets.c.name, s.job_io.c.first_seen)
        .join(s.datasets, s.datasets.c.id == s.job_io.c.dataset_id)
        .join(ds_ns, ds_ns.c.id == s.datasets.c.namespace_id)
        .where(s.job_io.c.job_id.in_(sorted(job_ids)))
    ).all()
    state: dict[StateKey, dict[str, Any]] = {}
    for job_id, direction, dataset_namespace, dataset_name, first_seen in rows:
        job = job_ids[job_id]
        edge = (job[0], job[1], direction, dataset_namespace, dataset_name)
        if edge in scope.table_edges or job in scope.jobs:
            state[(TABLE_EDGE, job[0], job[1], direction, dataset_namespace, dataset_name)] = {
                "kind": TABLE_EDGE,
                "job": _named(*job),
                "direction": direction,
                "dataset": _named(dataset_namespace, dataset_name),
                "state": PRESENT,
                "firstSeen": _iso(first_seen),
            }
    return state


def _column_edges(conn: Connection, scope: ChangeScope) -> dict[StateKey, dict[str, Any]]:
    output_ids = _dataset_ids(conn, scope.column_outputs)
    job_ids = _job_ids(conn, scope.jobs)
    if not output_ids and not job_ids:
        return {}
    cl = s.column_lineage
    out_ds, in_ds = s.datasets.alias("out_ds"), s.datasets.alias("in_ds")
    out_ns, in_ns, job_ns = s.namespaces.alias("out_ns"), s.namespaces.alias("in_ns"), s.namespaces.alias("job_ns")
    out_field, in_field = s.dataset_fields.alias("out_field"), s.dataset_fields.alias("in_field")
    query = (
        select(
            out_ns.c.name,
            out_ds.c.name,
            out_field.c.name,
            in_ns.c.name,
            in_ds.c.name,
            in_field.c.name,
            cl.c.transformation_type,
            cl.c.transformation_subtype,
            cl.c.transformation_description,
            cl.c.masking,
            job_ns.c.name,
            s.jobs.c.name,
        )  # fmt: skip
        .select_from(cl)
        .join(out_ds, out_ds.c.id == cl.c.output_dataset_id)
        .join(out_ns, out_ns.c.id == out_ds.c.namespace_id)
        .outerjoin(out_field, out_field.c.id == cl.c.output_field_id)
        .join(in_ds, in_ds.c.id == cl.c.input_dataset_id)
        .join(in_ns, in_ns.c.id == in_ds.c.namespace_id)
        .join(in_field, in_field.c.id == cl.c.input_field_id)
        .join(s.jobs, s.jobs.c.id == cl.c.job_id)
        .join(job_ns, job_ns.c.id == s.jobs.c.namespace_id)
        .where(cl.c.output_dataset_id.in_(sorted(output_ids)) | s.column_lineage_of_jobs(sorted(job_ids), conn.dialect.name))
    )
    state: dict[StateKey, dict[str, Any]] = {}
    for row in conn.execute(query):
        out_namespace, out_name, out_field_name, in_namespace, in_name, in_field_name = row[:6]
        kind, subtype, description, masking, job_namespace, job_name = row[6:]
        key = (COLUMN_EDGE, out_namespace, out_name, out_field_name, in_namespace, in_name, in_field_name, kind, subtype)
        state[key] = {
            "kind": COLUMN_EDGE,
            "output": {**_named(out_namespace, out_name), "field": out_field_name},
            "input": {**_named(in_namespace, in_name), "field": in_field_name},
            "transformation": {"type": kind, "subtype": subtype, "description": description, "masking": bool(masking)},
            "job": _named(job_namespace, job_name),
            "state": PRESENT,
        }
    return state


def _snapshots(conn: Connection, run_uuids: Iterable[str]) -> dict[StateKey, dict[str, Any]]:
    uuids = sorted(set(run_uuids))
    if not uuids:
        return {}
    sl = s.snapshot_lineage
    ds_ns, job_ns = s.namespaces.alias("ds_ns"), s.namespaces.alias("job_ns")
    rows = conn.execute(
        select(
            s.runs.c.uuid,
            sl.c.barrier_id,
            ds_ns.c.name,
            s.datasets.c.name,
            sl.c.direction,
            sl.c.snapshot_id,
            sl.c.kind,
            sl.c.partitions,
            sl.c.start_offset,
            sl.c.end_offset,
            job_ns.c.name,
            s.jobs.c.name,
        )  # fmt: skip
        .select_from(sl)
        .join(s.runs, s.runs.c.id == sl.c.run_id)
        .join(s.jobs, s.jobs.c.id == sl.c.job_id)
        .join(job_ns, job_ns.c.id == s.jobs.c.namespace_id)
        .join(s.datasets, s.datasets.c.id == sl.c.dataset_id)
        .join(ds_ns, ds_ns.c.id == s.datasets.c.namespace_id)
        .where(s.runs.c.uuid.in_(uuids))
    ).all()
    state: dict[StateKey, dict[str, Any]] = {}
    for (
        run_uuid,
        barrier,
        ds_namespace,
        ds_name,
        direction,
        snapshot_id,
        kind,
        partitions,
        start,
        end,
        job_namespace,
        job_name,
    ) in rows:
        state[(SNAPSHOT, run_uuid, barrier, ds_namespace, ds_name, direction)] = {
            "kind": SNAPSHOT,
            "job": _named(job_namespace, job_name),
            "runId": run_uuid,
            "barrierId": barrier,
            "dataset": _named(ds_namespace, ds_name),
            "direction": direction,
            "snapshotId": snapshot_id,
            "snapshotKind": kind,
            "partitions": partitions,
            "startOffset": start,
            "endOffset": end,
        }
    return state


def _finished_runs(conn: Connection, run_uuids: Iterable[str]) -> dict[StateKey, dict[str, Any]]:
    uuids = sorted(set(run_uuids))
    if not uuids:
        return {}
    rows = conn.execute(
        select(s.runs.c.uuid, s.runs.c.state, s.runs.c.started_at, s.runs.c.ended_at, s.namespaces.c.name, s.jobs.c.name)
        .join(s.jobs, s.jobs.c.id == s.runs.c.job_id)
        .join(s.namespaces, s.namespaces.c.id == s.jobs.c.namespace_id)
        .where(s.runs.c.uuid.in_(uuids), s.runs.c.state.in_(sorted(TERMINAL_STATES)))
    ).all()
    return {
        (RUN, run_uuid): {
            "kind": RUN,
            "runId": run_uuid,
            "job": _named(job_namespace, job_name),
            "state": state,
            "startedAt": _iso(started_at),
            "endedAt": _iso(ended_at),
        }
        for run_uuid, state, started_at, ended_at, job_namespace, job_name in rows
    }


def _current_versions(conn: Connection, jobs: Iterable[JobKey]) -> dict[StateKey, dict[str, Any]]:
    """Each job's current version (jobs with none are left out): `version` (its hash) and
    `versionId` (to read its content), not a message yet."""
    job_ids = _job_ids(conn, jobs)
    if not job_ids:
        return {}
    rows = conn.execute(
        select(s.jobs.c.id, s.job_versions.c.id, s.job_versions.c.lineage_hash)
        .join(s.job_versions, s.job_versions.c.id == s.jobs.c.current_version_id)
        .where(s.jobs.c.id.in_(sorted(job_ids)))
    ).all()
    return {
        (JOB_VERSION, *job_ids[job_id]): {
            "kind": JOB_VERSION,
            "job": _named(*job_ids[job_id]),
            "version": lineage_hash,
            "versionId": version_id,
        }
        for job_id, version_id, lineage_hash in rows
    }
