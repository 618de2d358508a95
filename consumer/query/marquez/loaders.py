"""Batch loaders: the rows of many jobs, datasets or runs and everything their Marquez shapes need
(inputs/outputs, tags, latest runs, fields, column lineage), each in a fixed number of queries."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, Select, func, literal, select, union_all

from consumer.query import graph
from consumer.query.db import as_json, in_ids
from consumer.query.marquez.shapes import dataset_shape, job_shape, run_shape, transformation_shape
from consumer.store import schema as s
from consumer.store.lookup import existing_dataset_id, present


def job_select() -> Select[Any]:
    """Job rows with what the answers show: `updated_at` as schema.job_seen_at gives it (the stored
    `last_seen` is left out: no answer shows it), the namespace's name and the latest run's id.
    Built once (statements are immutable; building this one costs more than running it)."""
    return _JOB_SELECT


def _job_select() -> Select[Any]:
    stored = [column for column in s.jobs.c if column.name not in ("updated_at", "last_seen")]
    updated_at = s.job_seen_at(s.jobs.c.updated_at).label("updated_at")
    namespace = s.namespaces.c.name.label("namespace")
    return select(*stored, updated_at, namespace, s.latest_run(s.jobs.c.id).label("latest_run_id")).join(
        s.namespaces, s.namespaces.c.id == s.jobs.c.namespace_id
    )


_JOB_SELECT = _job_select()


def dataset_select() -> Select[Any]:
    return select(s.datasets, s.namespaces.c.name.label("namespace")).join(
        s.namespaces, s.namespaces.c.id == s.datasets.c.namespace_id
    )


def runs_by_id(conn: Connection, run_ids: Iterable[int]) -> dict[int, dict]:
    ids = sorted({run_id for run_id in run_ids if run_id is not None})
    if not ids:
        return {}
    rows = conn.execute(
        select(s.runs, s.jobs.c.name.label("job_name"), s.namespaces.c.name.label("job_namespace"))
        .join(s.jobs, s.jobs.c.id == s.runs.c.job_id)
        .join(s.namespaces, s.namespaces.c.id == s.jobs.c.namespace_id)
        .where(in_ids(conn, s.runs.c.id, ids))
    ).all()
    versions = _run_dataset_versions(conn, ids)
    return {row.id: run_shape(row, *versions.get(row.id, ([], []))) for row in rows}


def _run_dataset_versions(conn: Connection, run_ids: Sequence[int]) -> dict[int, tuple[list, list]]:
    """Per run: the dataset versions it read (its input snapshots) and wrote (output snapshots and versions)."""
    snap, ver = s.snapshot_lineage, s.dataset_versions
    touched = union_all(
        select(snap.c.run_id, snap.c.direction, snap.c.snapshot_id.label("version"), snap.c.dataset_id).where(
            in_ids(conn, snap.c.run_id, run_ids)
        ),
        select(ver.c.run_id, literal("output").label("direction"), ver.c.version, ver.c.dataset_id).where(
            in_ids(conn, ver.c.run_id, run_ids)
        ),
    ).subquery()
    rows = conn.execute(
        select(
            touched.c.run_id, touched.c.direction, touched.c.version, s.datasets.c.name, s.namespaces.c.name.label("namespace")
        )
        .join(s.datasets, s.datasets.c.id == touched.c.dataset_id)
        .join(s.namespaces, s.namespaces.c.id == s.datasets.c.namespace_id)
        .order_by(s.namespaces.c.name, s.datasets.c.name, touched.c.version)
    )
    found: dict[int, tuple[list, list]] = defaultdict(lambda: ([], []))
    for row in rows:
        version = {"datasetVersionId": {"namespace": row.namespace, "name": row.name, "version": row.version}, "facets": {}}
        side = found[row.run_id][0 if row.direction == "input" else 1]
        if version not in side:
            side.append(version)
    return found


def run_id_of(conn: Connection, run_uuid: str) -> int:
    return present(conn.execute(select(s.runs.c.id).where(s.runs.c.uuid == run_uuid)).scalar(), f"run '{run_uuid}' not found")


def load_jobs(conn: Connection, rows: Sequence[Any], edges: Sequence[tuple[int, int, str]] | None = None) -> list[dict]:
    """The Marquez shapes of job rows; `edges`: their (job, dataset, direction) rows when the
    caller has them already."""
    ids = [row.id for row in rows]
    io: dict[int, tuple[list, list]] = defaultdict(lambda: ([], []))
    # The edges by job id, then the datasets' names by id: two index lookups (joined in one query,
    # PostgreSQL hash-joins whole tables for a few hundred jobs).
    if edges is None:
        edges = graph.job_io_of(conn, ids)
    names = graph.names(conn, s.datasets, [dataset for _, dataset, _ in edges])
    for job, dataset, direction in sorted(edges, key=lambda edge: names[edge[1]]):
        namespace, name = names[dataset]
        io[job][0 if direction == "input" else 1].append({"namespace": namespace, "name": name})
    tags = _tags_of(conn, s.job_tags, s.job_tags.c.job_id, ids)
    runs = runs_by_id(conn, [row.latest_run_id for row in rows])
    parents = _parent_names(conn, [row.parent_job_id for row in rows])
    return [job_shape(row, *io[row.id], runs.get(row.latest_run_id), tags.get(row.id, []), parents) for row in rows]


def _parent_names(conn: Connection, parent_ids: Iterable[int | None]) -> dict[int, str]:
    ids = sorted({i for i in parent_ids if i is not None})
    if not ids:
        return {}
    return dict(conn.execute(select(s.jobs.c.id, s.jobs.c.name).where(in_ids(conn, s.jobs.c.id, ids))).all())


def _tags_of(conn: Connection, link: Any, key: Any, ids: Sequence[int]) -> dict[int, list[str]]:
    if not ids:
        return {}
    found: dict[int, list[str]] = defaultdict(list)
    for owner, name in conn.execute(
        select(key, s.tags.c.name)
        .join(s.tags, s.tags.c.id == link.c.tag_id)
        .where(in_ids(conn, key, ids))
        .order_by(s.tags.c.name)
    ):
        found[owner].append(name)
    return found


def load_datasets(conn: Connection, rows: Sequence[Any], with_column_lineage: bool = True) -> list[dict]:
    ids = [row.id for row in rows]
    fields: dict[int, list[dict]] = defaultdict(list)
    if ids:
        f_ = s.dataset_fields.c
        for f in conn.execute(
            select(f_.dataset_id, f_.name, f_.type, f_.tags, f_.description)
            .where(in_ids(conn, f_.dataset_id, ids))
            .order_by(f_.id)
        ):
            fields[f.dataset_id].append(
                {"name": f.name, "type": f.type or "UNKNOWN", "tags": as_json(f.tags) or [], "description": f.description}
            )
    tags = _tags_of(conn, s.dataset_tags, s.dataset_tags.c.dataset_id, ids)
    lineage = column_lineage_of(conn, ids) if with_column_lineage else {}
    modified = _last_modified(conn, ids)
    return [dataset_shape(r, fields[r.id], tags.get(r.id, []), lineage.get(r.id, []), modified.get(r.id)) for r in rows]


def _last_modified(conn: Connection, ids: Sequence[int]) -> dict[int, Any]:
    if not ids:
        return {}
    return dict(
        conn.execute(
            select(s.dataset_versions.c.dataset_id, func.max(s.dataset_versions.c.created_at))
            .join(s.runs, s.runs.c.id == s.dataset_versions.c.run_id)
            .where(in_ids(conn, s.dataset_versions.c.dataset_id, ids), s.runs.c.state == "COMPLETED")
            .group_by(s.dataset_versions.c.dataset_id)
        ).all()
    )


def column_lineage_of(conn: Connection, ids: Sequence[int]) -> dict[int, list[dict]]:
    """Marquez's dataset `columnLineage`: per output field its input fields, plus what Marquez drops
    (subtype, masking, the full transformation list)."""
    if not ids:
        return {}
    out_field, in_field = s.dataset_fields.alias("out_field"), s.dataset_fields.alias("in_field")
    in_dataset, in_namespace = s.datasets.alias("in_dataset"), s.namespaces.alias("in_namespace")
    cl = s.column_lineage
    rows = conn.execute(
        select(
            cl,
            out_field.c.name.label("output_field"),
            in_field.c.name.label("input_field"),
            in_dataset.c.name.label("input_dataset"),
            in_namespace.c.name.label("input_namespace"),
        )
        .join(out_field, out_field.c.id == cl.c.output_field_id)
        .join(in_field, in_field.c.id == cl.c.input_field_id)
        .join(in_dataset, in_dataset.c.id == cl.c.input_dataset_id)
        .join(in_namespace, in_namespace.c.id == in_dataset.c.namespace_id)
        .where(in_ids(conn, cl.c.output_dataset_id, ids))
        .order_by(cl.c.output_dataset_id, out_field.c.name, in_namespace.c.name, in_dataset.c.name, in_field.c.name)
    ).all()
    grouped: dict[int, dict[str, dict[tuple, dict]]] = defaultdict(dict)
    for r in rows:
        per_field = grouped[r.output_dataset_id].setdefault(r.output_field, {})
        key = (r.input_namespace, r.input_dataset, r.input_field)
        entry = per_field.setdefault(
            key,
            {
                "namespace": r.input_namespace,
                "dataset": r.input_dataset,
                "field": r.input_field,
                "transformationDescription": r.transformation_description,
                "transformationType": r.transformation_type,
                "transformations": [],
            },
        )
        entry["transformations"].append(transformation_shape(r))
    return {
        dataset: [{"name": name, "inputFields": list(inputs.values())} for name, inputs in by_field.items()]
        for dataset, by_field in grouped.items()
    }


def dataset_row(conn: Connection, namespace: str, name: str) -> Any:
    dataset = existing_dataset_id(conn, namespace, name)
    return conn.execute(dataset_select().where(s.datasets.c.id == dataset)).one()
