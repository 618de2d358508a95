"""Batch loaders: the rows of many jobs, datasets or runs and everything their Marquez shapes need
(inputs/outputs, tags, latest runs, fields, column lineage), each in a fixed number of queries."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, Select, literal, select, union_all

from consumer.query import graph
from consumer.query.db import as_json, ids_in, statement_cache
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
    rows = conn.execute(_runs_query(conn), {"runs": ids}).all()
    versions = _run_dataset_versions(conn, ids)
    return {row.id: run_shape(row, *versions.get(row.id, ([], []))) for row in rows}


@statement_cache
def _runs_query(dialect: str) -> Select[Any]:
    return (
        select(s.runs, s.jobs.c.name.label("job_name"), s.namespaces.c.name.label("job_namespace"))
        .join(s.jobs, s.jobs.c.id == s.runs.c.job_id)
        .join(s.namespaces, s.namespaces.c.id == s.jobs.c.namespace_id)
        .where(ids_in(dialect, s.runs.c.id, "runs"))
    )


def _run_dataset_versions(conn: Connection, run_ids: Sequence[int]) -> dict[int, tuple[list, list]]:
    """Per run: the dataset versions it read (its input snapshots) and wrote (output snapshots and versions)."""
    rows = conn.execute(_run_dataset_versions_query(conn), {"runs": list(run_ids)})
    found: dict[int, tuple[list, list]] = {}
    seen: set[tuple] = set()
    for run_id, direction, version, name, namespace in rows:
        key = (run_id, direction == "input", namespace, name, version)
        if key not in seen:
            seen.add(key)
            found.setdefault(run_id, ([], []))[0 if key[1] else 1].append(
                {"datasetVersionId": {"namespace": namespace, "name": name, "version": version}, "facets": {}}
            )
    return found


@statement_cache
def _run_dataset_versions_query(dialect: str) -> Select[Any]:
    snap, ver = s.snapshot_lineage, s.dataset_versions
    touched = union_all(
        select(snap.c.run_id, snap.c.direction, snap.c.snapshot_id.label("version"), snap.c.dataset_id).where(
            ids_in(dialect, snap.c.run_id, "runs")
        ),
        select(ver.c.run_id, literal("output").label("direction"), ver.c.version, ver.c.dataset_id).where(
            ids_in(dialect, ver.c.run_id, "runs")
        ),
    ).subquery()
    return (
        select(
            touched.c.run_id, touched.c.direction, touched.c.version, s.datasets.c.name, s.namespaces.c.name.label("namespace")
        )
        .join(s.datasets, s.datasets.c.id == touched.c.dataset_id)
        .join(s.namespaces, s.namespaces.c.id == s.datasets.c.namespace_id)
        .order_by(s.namespaces.c.name, s.datasets.c.name, touched.c.version)
    )


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
    tags = _tags_of(conn, _job_tags_query, ids)
    runs = runs_by_id(conn, [row.latest_run_id for row in rows])
    parents = _parent_names(conn, [row.parent_job_id for row in rows])
    return [job_shape(row, *io[row.id], runs.get(row.latest_run_id), tags.get(row.id, []), parents) for row in rows]


def _parent_names(conn: Connection, parent_ids: Iterable[int | None]) -> dict[int, str]:
    ids = sorted({i for i in parent_ids if i is not None})
    if not ids:
        return {}
    return dict(conn.execute(_job_names_query(conn), {"jobs": ids}).all())


@statement_cache
def _job_names_query(dialect: str) -> Select[Any]:
    return select(s.jobs.c.id, s.jobs.c.name).where(ids_in(dialect, s.jobs.c.id, "jobs"))


def _tags_of(conn: Connection, query: Callable[[Connection], Select[Any]], ids: Sequence[int]) -> dict[int, list[str]]:
    if not ids:
        return {}
    found: dict[int, list[str]] = defaultdict(list)
    for owner, name in conn.execute(query(conn), {"owners": ids}):
        found[owner].append(name)
    return found


def _tags_query(link: Any, owner: Any) -> Callable[[Connection], Select[Any]]:
    def build(dialect: str) -> Select[Any]:
        return (
            select(owner, s.tags.c.name)
            .join(s.tags, s.tags.c.id == link.c.tag_id)
            .where(ids_in(dialect, owner, "owners"))
            .order_by(s.tags.c.name)
        )

    return statement_cache(build)


_job_tags_query = _tags_query(s.job_tags, s.job_tags.c.job_id)
_dataset_tags_query = _tags_query(s.dataset_tags, s.dataset_tags.c.dataset_id)


def load_datasets(conn: Connection, rows: Sequence[Any], with_column_lineage: bool = True) -> list[dict]:
    ids = [row.id for row in rows]
    fields: dict[int, list[dict]] = defaultdict(list)
    if ids:
        for f in conn.execute(_fields_query(conn), {"datasets": ids}):
            fields[f.dataset_id].append(
                {"name": f.name, "type": f.type or "UNKNOWN", "tags": as_json(f.tags) or [], "description": f.description}
            )
    tags = _tags_of(conn, _dataset_tags_query, ids)
    lineage = column_lineage_of(conn, ids) if with_column_lineage else {}
    modified = _last_modified(conn, ids)
    return [dataset_shape(r, fields[r.id], tags.get(r.id, []), lineage.get(r.id, []), modified.get(r.id)) for r in rows]


@statement_cache
def _fields_query(dialect: str) -> Select[Any]:
    f = s.dataset_fields.c
    return (
        select(f.dataset_id, f.name, f.type, f.tags, f.description)
        .where(ids_in(dialect, f.dataset_id, "datasets"))
        .order_by(f.id)
    )


def _last_modified(conn: Connection, ids: Sequence[int]) -> dict[int, Any]:
    if not ids:
        return {}
    return dict(conn.execute(_last_modified_query(conn), {"datasets": ids}).all())


@statement_cache
def _last_modified_query(dialect: str) -> Select[Any]:
    """Each dataset's newest version written by a completed run, read from the top of
    ix_dataset_versions_dataset_created (a grouped max read every version of the dataset)."""
    versions = s.dataset_versions.alias()
    newest_completed = (
        select(versions.c.created_at)
        .join(s.runs, s.runs.c.id == versions.c.run_id)
        .where(versions.c.dataset_id == s.datasets.c.id, s.runs.c.state == "COMPLETED")
        .order_by(versions.c.created_at.desc())
        .limit(1)
        .correlate(s.datasets)
        .scalar_subquery()
    )
    return select(s.datasets.c.id, newest_completed).where(ids_in(dialect, s.datasets.c.id, "datasets"))


def column_lineage_of(conn: Connection, ids: Sequence[int]) -> dict[int, list[dict]]:
    """Marquez's dataset `columnLineage`: per output field its input fields, plus what Marquez drops
    (subtype, masking, the full transformation list)."""
    if not ids:
        return {}
    rows = conn.execute(_column_lineage_query(conn), {"datasets": ids}).all()
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


@statement_cache
def _column_lineage_query(dialect: str) -> Select[Any]:
    out_field, in_field = s.dataset_fields.alias("out_field"), s.dataset_fields.alias("in_field")
    in_dataset, in_namespace = s.datasets.alias("in_dataset"), s.namespaces.alias("in_namespace")
    cl = s.column_lineage
    return (
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
        .where(ids_in(dialect, cl.c.output_dataset_id, "datasets"))
        .order_by(cl.c.output_dataset_id, out_field.c.name, in_namespace.c.name, in_dataset.c.name, in_field.c.name)
    )


def dataset_row(conn: Connection, namespace: str, name: str) -> Any:
    dataset = existing_dataset_id(conn, namespace, name)
    return conn.execute(dataset_select().where(s.datasets.c.id == dataset)).one()
