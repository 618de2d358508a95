"""Marquez-shaped reads: namespaces, tags, jobs, runs, datasets, versions, events, search (v1 and v2beta),
stats, and the `/lineage` and `/column-lineage` graphs; plus Marquez's tag writes (jobs, datasets, fields).
Returns plain dicts in Marquez's JSON shapes, ordered and paged as Marquez does (names ascending; runs,
versions and events newest first)."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlalchemy import Connection, func, literal, select, union_all

from consumer.query import graph
from consumer.query.db import as_json, check_depth, check_page, iso, like_contains, parse_instant, reading
from consumer.query.errors import BadParameter, NotFound
from consumer.query.nodeid import dataset_id, field_id, job_id, parse_node_id
from consumer.store import schema as s
from consumer.store.lookup import job_row_id
from consumer.store.writer import utc

_STATE_OF_EVENT = {"START": "start", "COMPLETE": "complete", "FAIL": "fail", "ABORT": "abort"}


# ---------------------------------------------------------------- namespaces and tags


def _namespace(row: Any) -> dict:
    return {
        "name": row.name,
        "createdAt": iso(row.created_at),
        "updatedAt": iso(row.updated_at),
        "ownerName": row.owner_name or "anonymous",
        "description": row.description,
        "isHidden": False,
    }


def list_namespaces(store: Any, limit: int, offset: int) -> dict:
    check_page(limit, offset)
    with reading(store) as conn:
        rows = conn.execute(select(s.namespaces).order_by(s.namespaces.c.name).limit(limit).offset(offset))
        total = conn.execute(select(func.count()).select_from(s.namespaces)).scalar_one()
        return {"namespaces": [_namespace(r) for r in rows], "totalCount": total}


def get_namespace(store: Any, name: str) -> dict:
    with reading(store) as conn:
        row = conn.execute(select(s.namespaces).where(s.namespaces.c.name == name)).first()
        if row is None:
            raise NotFound(f"namespace '{name}' not found")
        return _namespace(row)


def list_tags(store: Any, limit: int, offset: int) -> dict:
    check_page(limit, offset)
    with reading(store) as conn:
        rows = conn.execute(select(s.tags).order_by(s.tags.c.name).limit(limit).offset(offset))
        total = conn.execute(select(func.count()).select_from(s.tags)).scalar_one()
        return {"tags": [{"name": r.name, "description": r.description} for r in rows], "totalCount": total}


# ---------------------------------------------------------------- runs


def _run_rows_by_id(conn: Connection, run_ids: Iterable[int]) -> dict[int, dict]:
    ids = sorted({run_id for run_id in run_ids if run_id is not None})
    if not ids:
        return {}
    rows = conn.execute(
        select(s.runs, s.jobs.c.name.label("job_name"), s.namespaces.c.name.label("job_namespace"))
        .join(s.jobs, s.jobs.c.id == s.runs.c.job_id)
        .join(s.namespaces, s.namespaces.c.id == s.jobs.c.namespace_id)
        .where(s.runs.c.id.in_(ids))
    ).all()
    versions = _run_dataset_versions(conn, ids)
    return {row.id: _run(row, *versions.get(row.id, ([], []))) for row in rows}


def _run_dataset_versions(conn: Connection, run_ids: Sequence[int]) -> dict[int, tuple[list, list]]:
    """Per run: the dataset versions it read (its input snapshots) and wrote (output snapshots and versions)."""
    snap, ver = s.snapshot_lineage, s.dataset_versions
    touched = union_all(
        select(snap.c.run_id, snap.c.direction, snap.c.snapshot_id.label("version"), snap.c.dataset_id)
        .where(snap.c.run_id.in_(run_ids)),
        select(ver.c.run_id, literal("output").label("direction"), ver.c.version, ver.c.dataset_id)
        .where(ver.c.run_id.in_(run_ids)),
    ).subquery()
    rows = conn.execute(
        select(touched.c.run_id, touched.c.direction, touched.c.version, s.datasets.c.name, s.namespaces.c.name.label("namespace"))
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


def _run(row: Any, inputs: list, outputs: list) -> dict:
    started, ended = row.started_at, row.ended_at
    duration = None
    if started is not None and ended is not None:
        duration = int((utc(ended) - utc(started)).total_seconds() * 1000)
    return {
        "id": row.uuid,
        "createdAt": iso(row.created_at),
        "updatedAt": iso(row.updated_at),
        "nominalStartTime": iso(row.nominal_start_time),
        "nominalEndTime": iso(row.nominal_end_time),
        "state": row.state,
        "startedAt": iso(started),
        "endedAt": iso(ended),
        "durationMs": duration,
        "args": {},
        "jobVersion": {"namespace": row.job_namespace, "name": row.job_name, "version": row.job_version},
        "inputDatasetVersions": inputs,
        "outputDatasetVersions": outputs,
        "context": {},
        "facets": as_json(row.facets) or {},
    }


def _run_id_of(conn: Connection, run_uuid: str) -> int:
    run_id = conn.execute(select(s.runs.c.id).where(s.runs.c.uuid == run_uuid)).scalar()
    if run_id is None:
        raise NotFound(f"run '{run_uuid}' not found")
    return run_id


def get_run(store: Any, run_uuid: str) -> dict:
    with reading(store) as conn:
        return _run_rows_by_id(conn, [_run_id_of(conn, run_uuid)]).popitem()[1]


def run_facets(store: Any, run_uuid: str, kind: str) -> dict:
    with reading(store) as conn:
        row = conn.execute(
            select(s.runs.c.facets.label("run_facets"), s.jobs.c.facets.label("job_facets"))
            .join(s.jobs, s.jobs.c.id == s.runs.c.job_id)
            .where(s.runs.c.uuid == run_uuid)
        ).first()
        if row is None:
            raise NotFound(f"run '{run_uuid}' not found")
        facets = row.run_facets if kind == "run" else row.job_facets
        return {"runId": run_uuid, "facets": as_json(facets) or {}}


def list_runs(store: Any, namespace: str, job: str, limit: int, offset: int) -> dict:
    check_page(limit, offset)
    with reading(store) as conn:
        job_row_id = _job_id(conn, namespace, job)
        ids = conn.execute(
            select(s.runs.c.id).where(s.runs.c.job_id == job_row_id)
            .order_by(s.runs.c.created_at.desc(), s.runs.c.run_seq.desc()).limit(limit).offset(offset)
        ).scalars().all()
        total = conn.execute(select(func.count()).where(s.runs.c.job_id == job_row_id)).scalar_one()
        runs = _run_rows_by_id(conn, ids)
        return {"runs": [runs[i] for i in ids], "totalCount": total}


# ---------------------------------------------------------------- jobs


def _job_id(conn: Connection, namespace: str, name: str) -> int:
    found = job_row_id(conn, namespace, name)
    if found is None:
        raise NotFound(f"job '{name}' not found in namespace '{namespace}'")
    return found


def _job_select():
    return (
        select(s.jobs, s.namespaces.c.name.label("namespace"))
        .join(s.namespaces, s.namespaces.c.id == s.jobs.c.namespace_id)
    )


def _jobs(conn: Connection, rows: Sequence[Any]) -> list[dict]:
    ids = [row.id for row in rows]
    io: dict[int, tuple[list, list]] = defaultdict(lambda: ([], []))
    if ids:
        for r in conn.execute(
            select(s.job_io.c.job_id, s.job_io.c.direction, s.datasets.c.name, s.namespaces.c.name.label("namespace"))
            .join(s.datasets, s.datasets.c.id == s.job_io.c.dataset_id)
            .join(s.namespaces, s.namespaces.c.id == s.datasets.c.namespace_id)
            .where(s.job_io.c.job_id.in_(ids))
            .order_by(s.namespaces.c.name, s.datasets.c.name)
        ):
            io[r.job_id][0 if r.direction == "input" else 1].append({"namespace": r.namespace, "name": r.name})
    tags = _tags_of(conn, s.job_tags, s.job_tags.c.job_id, ids)
    runs = _run_rows_by_id(conn, [row.latest_run_id for row in rows])
    parents = _parent_names(conn, [row.parent_job_id for row in rows])
    return [_job(row, *io[row.id], runs.get(row.latest_run_id), tags.get(row.id, []), parents) for row in rows]


def _parent_names(conn: Connection, parent_ids: Iterable[int | None]) -> dict[int, str]:
    ids = sorted({i for i in parent_ids if i is not None})
    if not ids:
        return {}
    return dict(conn.execute(select(s.jobs.c.id, s.jobs.c.name).where(s.jobs.c.id.in_(ids))).all())


def _tags_of(conn: Connection, link: Any, key: Any, ids: Sequence[int]) -> dict[int, list[str]]:
    if not ids:
        return {}
    found: dict[int, list[str]] = defaultdict(list)
    for owner, name in conn.execute(
        select(key, s.tags.c.name).join(s.tags, s.tags.c.id == link.c.tag_id).where(key.in_(ids)).order_by(s.tags.c.name)
    ):
        found[owner].append(name)
    return found


def _job(row: Any, inputs: list, outputs: list, latest_run: dict | None, tags: list, parents: dict) -> dict:
    parent = parents.get(row.parent_job_id)
    simple = row.name[len(parent) + 1 :] if parent and row.name.startswith(parent + ".") else row.name
    return {
        "id": {"namespace": row.namespace, "name": row.name},
        "type": row.type,
        "name": row.name,
        "simpleName": simple,
        "parentJobName": parent,
        "parentJobUuid": None,
        "createdAt": iso(row.created_at),
        "updatedAt": iso(row.updated_at),
        "namespace": row.namespace,
        "inputs": inputs,
        "outputs": outputs,
        "location": row.location,
        "context": {},
        "description": row.description,
        "latestRun": latest_run,
        "latestRuns": [latest_run] if latest_run else [],
        "facets": as_json(row.facets) or {},
        "currentVersion": row.current_version,
        "tags": tags,
        "labels": [],
    }


def list_jobs(store: Any, namespace: str | None, limit: int, offset: int, last_run_states: Sequence[str] = ()) -> dict:
    check_page(limit, offset)
    with reading(store) as conn:
        query = _job_select()
        # within one namespace the (namespace_id, name) index already yields jobs in name order: no sort
        order = [s.jobs.c.name]
        if namespace is not None:
            query = query.where(s.jobs.c.namespace_id == _namespace_id(conn, namespace))
        else:
            order.append(s.namespaces.c.name)
        if last_run_states:
            query = query.join(s.runs, s.runs.c.id == s.jobs.c.latest_run_id).where(s.runs.c.state.in_(last_run_states))
        rows = conn.execute(query.order_by(*order).limit(limit).offset(offset)).all()
        total = conn.execute(select(func.count()).select_from(query.subquery())).scalar_one()
        return {"jobs": _jobs(conn, rows), "totalCount": total}


def get_job(store: Any, namespace: str, name: str) -> dict:
    with reading(store) as conn:
        row = conn.execute(_job_select().where(s.namespaces.c.name == namespace, s.jobs.c.name == name)).first()
        if row is None:
            raise NotFound(f"job '{name}' not found in namespace '{namespace}'")
        return _jobs(conn, [row])[0]


def _namespace_id(conn: Connection, namespace: str) -> int:
    found = conn.execute(select(s.namespaces.c.id).where(s.namespaces.c.name == namespace)).scalar()
    if found is None:
        raise NotFound(f"namespace '{namespace}' not found")
    return found


# ---------------------------------------------------------------- datasets


def _dataset_select():
    return (
        select(s.datasets, s.namespaces.c.name.label("namespace"))
        .join(s.namespaces, s.namespaces.c.id == s.datasets.c.namespace_id)
    )


def _datasets(conn: Connection, rows: Sequence[Any], with_column_lineage: bool = True) -> list[dict]:
    ids = [row.id for row in rows]
    fields: dict[int, list[dict]] = defaultdict(list)
    if ids:
        f_ = s.dataset_fields.c
        for f in conn.execute(
            select(f_.dataset_id, f_.name, f_.type, f_.tags, f_.description).where(f_.dataset_id.in_(ids)).order_by(f_.id)
        ):
            fields[f.dataset_id].append(
                {"name": f.name, "type": f.type or "UNKNOWN", "tags": as_json(f.tags) or [], "description": f.description}
            )
    tags = _tags_of(conn, s.dataset_tags, s.dataset_tags.c.dataset_id, ids)
    lineage = _column_lineage_of(conn, ids) if with_column_lineage else {}
    modified = _last_modified(conn, ids)
    return [_dataset(r, fields[r.id], tags.get(r.id, []), lineage.get(r.id, []), modified.get(r.id)) for r in rows]


def _last_modified(conn: Connection, ids: Sequence[int]) -> dict[int, Any]:
    if not ids:
        return {}
    return dict(
        conn.execute(
            select(s.dataset_versions.c.dataset_id, func.max(s.dataset_versions.c.created_at))
            .join(s.runs, s.runs.c.id == s.dataset_versions.c.run_id)
            .where(s.dataset_versions.c.dataset_id.in_(ids), s.runs.c.state == "COMPLETED")
            .group_by(s.dataset_versions.c.dataset_id)
        ).all()
    )


def _column_lineage_of(conn: Connection, ids: Sequence[int]) -> dict[int, list[dict]]:
    """Marquez's dataset `columnLineage`: per output field its input fields, plus what Marquez drops
    (subtype, masking, the full transformation list)."""
    if not ids:
        return {}
    out_field, in_field = s.dataset_fields.alias("out_field"), s.dataset_fields.alias("in_field")
    in_dataset, in_namespace = s.datasets.alias("in_dataset"), s.namespaces.alias("in_namespace")
    cl = s.column_lineage
    rows = conn.execute(
        select(cl, out_field.c.name.label("output_field"), in_field.c.name.label("input_field"),
               in_dataset.c.name.label("input_dataset"), in_namespace.c.name.label("input_namespace"))
        .join(out_field, out_field.c.id == cl.c.output_field_id)
        .join(in_field, in_field.c.id == cl.c.input_field_id)
        .join(in_dataset, in_dataset.c.id == cl.c.input_dataset_id)
        .join(in_namespace, in_namespace.c.id == in_dataset.c.namespace_id)
        .where(cl.c.output_dataset_id.in_(ids))
        .order_by(cl.c.output_dataset_id, out_field.c.name, in_namespace.c.name, in_dataset.c.name, in_field.c.name)
    ).all()
    grouped: dict[int, dict[str, dict[tuple, dict]]] = defaultdict(dict)
    for r in rows:
        per_field = grouped[r.output_dataset_id].setdefault(r.output_field, {})
        key = (r.input_namespace, r.input_dataset, r.input_field)
        entry = per_field.setdefault(key, {
            "namespace": r.input_namespace, "dataset": r.input_dataset, "field": r.input_field,
            "transformationDescription": r.transformation_description, "transformationType": r.transformation_type,
            "transformations": [],
        })
        entry["transformations"].append(_transformation(r))
    return {
        dataset: [{"name": name, "inputFields": list(inputs.values())} for name, inputs in by_field.items()]
        for dataset, by_field in grouped.items()
    }


def _transformation(row: Any) -> dict:
    return {
        "type": row.transformation_type,
        "subtype": row.transformation_subtype,
        "description": row.transformation_description or "",
        "masking": bool(row.masking),
    }


def _dataset(row: Any, fields: list, tags: list, column_lineage: list, last_modified: Any) -> dict:
    return {
        "id": {"namespace": row.namespace, "name": row.name},
        "type": row.type,
        "name": row.name,
        "physicalName": row.name,
        "createdAt": iso(row.created_at),
        "updatedAt": iso(row.updated_at),
        "namespace": row.namespace,
        "sourceName": row.source_name or row.namespace,
        "fields": fields,
        "tags": tags,
        "lastModifiedAt": iso(last_modified),
        "lastLifecycleState": (as_json(row.facets) or {}).get("lifecycleStateChange", {}).get("lifecycleStateChange"),
        "description": row.description,
        "currentVersion": row.current_version,
        "columnLineage": column_lineage or None,
        "facets": as_json(row.facets) or {},
        "deleted": bool(row.is_deleted),
    }


def list_datasets(store: Any, namespace: str, limit: int, offset: int) -> dict:
    check_page(limit, offset)
    with reading(store) as conn:
        query = _dataset_select().where(s.datasets.c.namespace_id == _namespace_id(conn, namespace), s.datasets.c.is_deleted.is_(False))
        rows = conn.execute(query.order_by(s.datasets.c.name).limit(limit).offset(offset)).all()
        total = conn.execute(select(func.count()).select_from(query.subquery())).scalar_one()
        return {"datasets": _datasets(conn, rows), "totalCount": total}


def get_dataset(store: Any, namespace: str, name: str) -> dict:
    with reading(store) as conn:
        return _datasets(conn, [_dataset_row(conn, namespace, name)])[0]


def _dataset_row(conn: Connection, namespace: str, name: str) -> Any:
    row = conn.execute(_dataset_select().where(s.namespaces.c.name == namespace, s.datasets.c.name == name)).first()
    if row is None:
        raise NotFound(f"dataset '{name}' not found in namespace '{namespace}'")
    return row


def list_dataset_versions(store: Any, namespace: str, name: str, limit: int, offset: int) -> dict:
    check_page(limit, offset)
    with reading(store) as conn:
        dataset = _dataset_row(conn, namespace, name)
        rows = conn.execute(
            select(s.dataset_versions).where(s.dataset_versions.c.dataset_id == dataset.id)
            .order_by(s.dataset_versions.c.created_at.desc(), s.dataset_versions.c.id.desc()).limit(limit).offset(offset)
        ).all()
        total = conn.execute(select(func.count()).where(s.dataset_versions.c.dataset_id == dataset.id)).scalar_one()
        runs = _run_rows_by_id(conn, [r.run_id for r in rows])
        lineage = _column_lineage_of(conn, [dataset.id]).get(dataset.id)
        return {"versions": [_version(dataset, r, runs.get(r.run_id), lineage) for r in rows], "totalCount": total}


def _version(dataset: Any, row: Any, run: dict | None, column_lineage: list | None) -> dict:
    fields = [
        {"name": f.get("name"), "type": f.get("type") or "UNKNOWN", "tags": f.get("tags") or [], "description": f.get("description")}
        for f in as_json(row.fields) or []
    ]
    return {
        "id": {"namespace": dataset.namespace, "name": dataset.name, "version": row.version},
        "type": dataset.type,
        "name": dataset.name,
        "physicalName": dataset.name,
        "createdAt": iso(row.created_at),
        "version": row.version,
        "namespace": dataset.namespace,
        "sourceName": dataset.source_name or dataset.namespace,
        "fields": fields,
        "tags": [],
        "lifecycleState": None,
        "description": dataset.description,
        "createdByRun": run,
        "columnLineage": column_lineage,
        "facets": as_json(row.facets) or {},
    }


# ---------------------------------------------------------------- events


def lineage_events(store: Any, before: str | None, after: str | None, direction: str, limit: int, offset: int) -> dict:
    check_page(limit, offset)
    conditions = []
    if (upper := parse_instant(before, "before")) is not None:
        conditions.append(s.lineage_events.c.event_time < upper)
    if (lower := parse_instant(after, "after")) is not None:
        conditions.append(s.lineage_events.c.event_time > lower)
    order = s.lineage_events.c.event_time.asc() if direction == "asc" else s.lineage_events.c.event_time.desc()
    tiebreak = s.lineage_events.c.id.asc() if direction == "asc" else s.lineage_events.c.id.desc()
    with reading(store) as conn:
        payloads = conn.execute(
            select(s.lineage_events.c.payload).where(*conditions).order_by(order, tiebreak).limit(limit).offset(offset)
        ).scalars()
        events = [json.loads(p) for p in payloads]
        total = conn.execute(select(func.count()).select_from(s.lineage_events).where(*conditions)).scalar_one()
        return {"events": events, "totalCount": total}


# ---------------------------------------------------------------- search


def search(store: Any, text: str, kind: str | None, sort: str, limit: int, namespace: str | None) -> dict:
    check_page(limit, 0)
    pattern = like_contains(text)
    with reading(store) as conn:
        # SQLite's LIKE ignores ASCII case already; lower() there would cost a call per row
        matches = (lambda column: column.ilike(pattern)) if conn.dialect.name == "postgresql" else (lambda column: column.like(pattern))
        parts = [
            _search_part(kind_name, table, matches, namespace)
            for kind_name, table in (("DATASET", s.datasets), ("JOB", s.jobs))
            if kind in (None, kind_name)
        ]
        found = union_all(*parts).subquery()
        order = [found.c.updated_at.desc(), found.c.name] if sort in ("updated_at", "update_at") else [found.c.name, found.c.type]
        # one scan: the total rides along on every row as a window count
        rows = conn.execute(select(found, func.count().over().label("total")).order_by(*order).limit(limit)).all()
        total = rows[0].total if rows else conn.execute(select(func.count()).select_from(found)).scalar_one()
    results = [
        {
            "type": r.type,
            "name": r.name,
            "updatedAt": iso(r.updated_at),
            "namespace": r.namespace,
            "nodeId": (dataset_id if r.type == "DATASET" else job_id)(r.namespace, r.name),
        }
        for r in rows
    ]
    return {"totalCount": total, "results": results}


def _search_part(kind: str, table: Any, matches: Any, namespace: str | None) -> Any:
    # names are matched first on their own (a covering scan of the (namespace_id, name) index), then only
    # the matches are joined for the columns shown
    matched_ids = select(table.c.id).where(matches(table.c.name))
    conditions = [table.c.id.in_(matched_ids)]
    if namespace:
        conditions.append(s.namespaces.c.name == namespace)
    if table is s.datasets:
        conditions.append(table.c.is_deleted.is_(False))
    return (
        select(literal(kind).label("type"), table.c.name, table.c.updated_at, s.namespaces.c.name.label("namespace"))
        .join(s.namespaces, s.namespaces.c.id == table.c.namespace_id)
        .where(*conditions)
    )


# ---------------------------------------------------------------- stats


def _intervals(period: str, zone_name: str) -> list[tuple[datetime, datetime]]:
    try:
        zone = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise BadParameter(f"unknown timezone {zone_name!r}") from error
    now = datetime.now(zone)
    if period == "DAY":
        end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        step, count = timedelta(hours=1), 24
    else:
        end = now.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
        step, count = timedelta(days=1), 7
    return [(end - step * (count - i), end - step * (count - i - 1)) for i in range(count)]


def lineage_event_stats(store: Any, period: str, zone_name: str) -> list[dict]:
    intervals = _intervals(period, zone_name)
    with reading(store) as conn:
        rows = conn.execute(
            select(s.lineage_events.c.event_time, s.lineage_events.c.event_type)
            .where(s.lineage_events.c.event_time >= intervals[0][0])
        ).all()
    buckets = [{"startInterval": iso(a), "endInterval": iso(b), "fail": 0, "start": 0, "complete": 0, "abort": 0}
               for a, b in intervals]
    for moment, event_type in rows:
        index = _bucket(intervals, utc(moment))
        if index is not None and event_type in _STATE_OF_EVENT:
            buckets[index][_STATE_OF_EVENT[event_type]] += 1
    return buckets


def entity_stats(store: Any, entity: str, period: str, zone_name: str) -> list[dict]:
    """Running count of jobs / datasets / sources that existed at the end of each interval."""
    intervals = _intervals(period, zone_name)
    with reading(store) as conn:
        if entity == "jobs":
            created = conn.execute(select(s.jobs.c.created_at)).scalars().all()
        elif entity == "datasets":
            created = conn.execute(select(s.datasets.c.created_at)).scalars().all()
        else:
            created = conn.execute(
                select(func.min(s.datasets.c.created_at)).group_by(func.coalesce(s.datasets.c.source_name, s.datasets.c.namespace_id))
            ).scalars().all()
    moments = sorted(utc(m) for m in created)
    return [{"startInterval": iso(a), "endInterval": iso(b), "count": sum(1 for m in moments if m < b)} for a, b in intervals]


def _bucket(intervals: Sequence[tuple[datetime, datetime]], moment: datetime) -> int | None:
    for index, (start, end) in enumerate(intervals):
        if start <= moment < end:
            return index
    return None


# ---------------------------------------------------------------- graphs


def lineage_graph(store: Any, node_text: str, depth: int) -> dict:
    """Marquez `GET /lineage`: the jobs connected to the node within `depth` job-hops, their datasets."""
    check_depth(depth)
    node = parse_node_id(node_text)
    if node.kind not in ("dataset", "job"):
        raise BadParameter(f"nodeId {node_text!r}: /lineage takes a dataset or job node")
    with reading(store) as conn:
        if node.kind == "dataset":
            start_dataset = _dataset_row(conn, node.namespace, node.name).id
            start_jobs = graph.jobs_touching(conn, start_dataset)
        else:
            start_dataset, start_jobs = None, [_job_id(conn, node.namespace, node.name)]
        job_ids = graph.connected_jobs(conn, start_jobs, depth)
        io = graph.job_io_of(conn, job_ids)
        dataset_ids = sorted({d for _, d, _ in io} | ({start_dataset} if start_dataset else set()))
        job_rows = conn.execute(_job_select().where(s.jobs.c.id.in_(job_ids))).all() if job_ids else []
        dataset_rows = conn.execute(_dataset_select().where(s.datasets.c.id.in_(dataset_ids))).all() if dataset_ids else []
        nodes = [("JOB", job_id(r.namespace, r.name), data) for r, data in zip(job_rows, _jobs(conn, job_rows))]
        nodes += [("DATASET", dataset_id(r.namespace, r.name), data) for r, data in zip(dataset_rows, _datasets(conn, dataset_rows, with_column_lineage=False))]
    node_of_job = {r.id: job_id(r.namespace, r.name) for r in job_rows}
    node_of_dataset = {r.id: dataset_id(r.namespace, r.name) for r in dataset_rows}
    edges = [(node_of_dataset[d], node_of_job[j]) if direction == "input" else (node_of_job[j], node_of_dataset[d])
             for j, d, direction in io]
    return {"graph": _graph_nodes(nodes, edges)}


def _graph_nodes(nodes: Sequence[tuple[str, str, dict]], edges: Sequence[tuple[str, str]]) -> list[dict]:
    in_edges: dict[str, list[dict]] = defaultdict(list)
    out_edges: dict[str, list[dict]] = defaultdict(list)
    for origin, destination in sorted(set(edges)):
        edge = {"origin": origin, "destination": destination}
        out_edges[origin].append(edge)
        in_edges[destination].append(edge)
    return [
        {"id": node_id, "type": kind, "data": data, "inEdges": in_edges[node_id], "outEdges": out_edges[node_id]}
        for kind, node_id, data in sorted(nodes, key=lambda n: n[1])
    ]


def _edge_key(edge: dict) -> tuple[str, str]:
    return edge["origin"], edge["destination"]


def column_lineage_graph(store: Any, node_text: str, depth: int, with_downstream: bool) -> dict:
    """Marquez `GET /column-lineage`: field nodes; inEdges point (origin = the node) at upstream fields.
    Each input carries the transformation type, subtype, description and masking Marquez drops."""
    check_depth(depth)
    node = parse_node_id(node_text)
    with reading(store) as conn:
        start_fields = _start_fields(conn, node, node_text)
        edges = graph.field_edges(conn, start_fields, depth, upstream=True)
        if with_downstream:
            edges += graph.field_edges(conn, start_fields, depth, upstream=False)
        fields = graph.describe_fields(conn, {e.output_field for e in edges} | {e.input_field for e in edges} | set(start_fields))
    return {"graph": _field_graph(fields, edges)}


def _start_fields(conn: Connection, node: Any, node_text: str) -> list[int]:
    if node.kind == "run":
        raise BadParameter(f"nodeId {node_text!r}: /column-lineage takes a dataset, datasetField or job node")
    if node.kind == "job":
        outputs = select(s.job_io.c.dataset_id).where(
            s.job_io.c.job_id == _job_id(conn, node.namespace, node.name), s.job_io.c.direction == "output")
        return list(conn.execute(select(s.dataset_fields.c.id).where(s.dataset_fields.c.dataset_id.in_(outputs))).scalars())
    dataset = _dataset_row(conn, node.namespace, node.name)
    fields = select(s.dataset_fields.c.id).where(s.dataset_fields.c.dataset_id == dataset.id)
    if node.kind == "datasetField":
        found = conn.execute(fields.where(s.dataset_fields.c.name == node.field)).scalar()
        if found is None:
            raise NotFound(f"field '{node.field}' not found in dataset '{node.name}' of namespace '{node.namespace}'")
        return [found]
    return list(conn.execute(fields).scalars())


def _field_graph(fields: dict[int, Any], edges: Sequence[Any]) -> list[dict]:
    unique = {(e.output_field, e.input_field, e.type, e.subtype): e for e in edges}
    inputs: dict[int, dict[int, list]] = defaultdict(lambda: defaultdict(list))
    downstream: dict[int, set[int]] = defaultdict(set)
    for e in unique.values():
        inputs[e.output_field][e.input_field].append(e)
        downstream[e.input_field].add(e.output_field)
    nodes = []
    for row_id, f in fields.items():
        node_id = field_id(f.namespace, f.dataset, f.field)
        input_fields = []
        for input_row, steps in sorted(inputs[row_id].items(), key=lambda kv: _field_sort(fields[kv[0]])):
            source = fields[input_row]
            first = steps[0]
            input_fields.append({
                "namespace": source.namespace, "dataset": source.dataset, "datasetVersion": None, "field": source.field,
                "transformationDescription": first.description, "transformationType": first.type,
                "transformations": [{"type": t.type, "subtype": t.subtype, "description": t.description or "",
                                     "masking": bool(t.masking)} for t in steps],
            })
        data = {
            "type": "DATASET_FIELD", "namespace": f.namespace, "dataset": f.dataset, "datasetVersion": None,
            "field": f.field, "fieldType": f.type, "transformationDescription": None, "transformationType": None,
            "inputFields": input_fields,
        }
        in_edges = [{"origin": node_id, "destination": field_id(fields[i].namespace, fields[i].dataset, fields[i].field)}
                    for i in inputs[row_id]]
        out_edges = [{"origin": node_id, "destination": field_id(fields[o].namespace, fields[o].dataset, fields[o].field)}
                     for o in downstream[row_id]]
        nodes.append({"id": node_id, "type": "DATASET_FIELD", "data": data,
                      "inEdges": sorted(in_edges, key=_edge_key), "outEdges": sorted(out_edges, key=_edge_key)})
    return sorted(nodes, key=lambda n: n["id"])


def _field_sort(f: Any) -> tuple[str, str, str]:
    return f.namespace, f.dataset, f.field


# ---------------------------------------------------------------- v2beta search (Marquez's OpenSearch-backed routes)

# Marquez indexes the last event's type; our runs keep the state that event left behind.
_EVENT_TYPE_OF_STATE = {"NEW": "START", "RUNNING": "RUNNING", "COMPLETED": "COMPLETE", "FAILED": "FAIL", "ABORTED": "ABORT"}


def search_hits(store: Any, text: str, kind: str, limit: int) -> dict:
    """Marquez `GET /api/v2beta/search/{jobs,datasets}`: `{hits, highlights}` as Marquez builds them from
    OpenSearch documents, answered with the `/search` name match (case-insensitive substring, % and _ wildcards).
    A highlight marks the matched part of the name the way OpenSearch's plain highlighter does (`<em>`)."""
    check_page(limit, 0)
    table = s.jobs if kind == "JOB" else s.datasets
    pattern = like_contains(text)
    with reading(store) as conn:
        matches = table.c.name.ilike(pattern) if conn.dialect.name == "postgresql" else table.c.name.like(pattern)
        select_rows = _job_select() if kind == "JOB" else _dataset_select().where(s.datasets.c.is_deleted.is_(False))
        rows = conn.execute(select_rows.where(matches).order_by(table.c.name, s.namespaces.c.name).limit(limit)).all()
        hits = _job_hits(conn, rows) if kind == "JOB" else _dataset_hits(conn, rows)
    return {"hits": hits, "highlights": [_highlight(text, hit["name"]) for hit in hits]}


def _runs_by_row_id(conn: Connection, run_ids: Iterable[int | None]) -> dict[int, Any]:
    ids = sorted({i for i in run_ids if i is not None})
    if not ids:
        return {}
    return {r.id: r for r in conn.execute(select(s.runs.c.id, s.runs.c.uuid, s.runs.c.state, s.runs.c.facets).where(s.runs.c.id.in_(ids)))}


def _job_hits(conn: Connection, rows: Sequence[Any]) -> list[dict]:
    runs = _runs_by_row_id(conn, [row.latest_run_id for row in rows])
    hits = []
    for row in rows:
        run = runs.get(row.latest_run_id)
        hits.append({
            "run_id": run.uuid if run else None,
            "eventType": _EVENT_TYPE_OF_STATE.get(run.state) if run else None,
            "name": row.name,
            "type": row.type,
            "namespace": row.namespace,
            "facets": as_json(row.facets) or {},
            "runFacets": (as_json(run.facets) or {}) if run else {},
        })
    return hits


def _dataset_hits(conn: Connection, rows: Sequence[Any]) -> list[dict]:
    latest_run: dict[int, int] = {}
    if rows:
        versions = conn.execute(
            select(s.dataset_versions.c.dataset_id, s.dataset_versions.c.run_id)
            .where(s.dataset_versions.c.dataset_id.in_([row.id for row in rows]))
            .order_by(s.dataset_versions.c.created_at.desc(), s.dataset_versions.c.id.desc())
        )
        for dataset, run_id in versions:
            latest_run.setdefault(dataset, run_id)
    runs = _runs_by_row_id(conn, latest_run.values())
    hits = []
    for row in rows:
        run = runs.get(latest_run.get(row.id))
        hits.append({
            "run_id": run.uuid if run else None,
            "eventType": _EVENT_TYPE_OF_STATE.get(run.state) if run else None,
            "name": row.name,
            "namespace": row.namespace,
            "facets": as_json(row.facets) or {},
            "inputFacets": {},
            "outputFacets": {},
        })
    return hits


def _highlight(text: str, name: str) -> dict[str, list[str]]:
    # the LIKE pattern as a regex: % any run, _ any one character, everything else literal
    regex = "".join(".*?" if c == "%" else "." if c == "_" else re.escape(c) for c in text.strip("%"))
    found = re.search(regex, name, re.IGNORECASE)
    if found is None or not found.group(0):
        return {}
    return {"name": [f"{name[:found.start()]}<em>{found.group(0)}</em>{name[found.end():]}"]}
