"""Marquez's catalog reads: namespaces, tags, jobs, runs, datasets, dataset versions and raw lineage events,
ordered and paged as Marquez does (names ascending; runs, versions and events newest first)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import BigInteger, Integer, Select, bindparam, func, select

from consumer.query.db import as_json, check_page, engine_of, parse_instant, reading, statement_cache
from consumer.query.marquez.loaders import (
    column_lineage_of,
    dataset_row,
    dataset_select,
    job_select,
    load_datasets,
    load_jobs,
    run_id_of,
    runs_by_id,
)
from consumer.query.marquez.shapes import namespace_shape, version_shape
from consumer.store import schema as s
from consumer.store.lookup import existing_job_id, existing_namespace_id, present
from consumer.store.raw_dictionaries import RawDictionaries


def list_namespaces(store: Any, limit: int, offset: int) -> dict:
    check_page(limit, offset)
    with reading(store) as conn:
        rows = conn.execute(select(s.namespaces).order_by(s.namespaces.c.name).limit(limit).offset(offset))
        total = conn.execute(select(func.count()).select_from(s.namespaces)).scalar_one()
        return {"namespaces": [namespace_shape(r) for r in rows], "totalCount": total}


def get_namespace(store: Any, name: str) -> dict:
    with reading(store) as conn:
        row = present(
            conn.execute(select(s.namespaces).where(s.namespaces.c.name == name)).first(), f"namespace '{name}' not found"
        )
        return namespace_shape(row)


def list_tags(store: Any, limit: int, offset: int) -> dict:
    check_page(limit, offset)
    with reading(store) as conn:
        rows = conn.execute(select(s.tags).order_by(s.tags.c.name).limit(limit).offset(offset))
        total = conn.execute(select(func.count()).select_from(s.tags)).scalar_one()
        return {"tags": [{"name": r.name, "description": r.description} for r in rows], "totalCount": total}


def get_run(store: Any, run_uuid: str) -> dict:
    with reading(store) as conn:
        return runs_by_id(conn, [run_id_of(conn, run_uuid)]).popitem()[1]


def run_facets(store: Any, run_uuid: str, kind: str) -> dict:
    with reading(store) as conn:
        row = conn.execute(
            select(s.runs.c.facets.label("run_facets"), s.jobs.c.facets.label("job_facets"))
            .join(s.jobs, s.jobs.c.id == s.runs.c.job_id)
            .where(s.runs.c.uuid == run_uuid)
        ).first()
        row = present(row, f"run '{run_uuid}' not found")
        facets = row.run_facets if kind == "run" else row.job_facets
        return {"runId": run_uuid, "facets": as_json(facets) or {}}


def list_runs(store: Any, namespace: str, job: str, limit: int, offset: int) -> dict:
    check_page(limit, offset)
    with reading(store) as conn:
        job_row_id = existing_job_id(conn, namespace, job)
        ids = (
            conn.execute(
                select(s.runs.c.id)
                .where(s.runs.c.job_id == job_row_id)
                .order_by(s.runs.c.created_at.desc(), s.runs.c.run_seq.desc())
                .limit(limit)
                .offset(offset)
            )
            .scalars()
            .all()
        )
        total = conn.execute(select(func.count()).where(s.runs.c.job_id == job_row_id)).scalar_one()
        runs = runs_by_id(conn, ids)
        return {"runs": [runs[i] for i in ids], "totalCount": total}


def list_jobs(store: Any, namespace: str | None, limit: int, offset: int, last_run_states: Sequence[str] = ()) -> dict:
    check_page(limit, offset)
    with reading(store) as conn:
        # The page's job ids first, then their rows: a job row's times and latest run are looked up
        # per row, and a database evaluates the select list for the rows an offset skips too.
        matching = select(s.jobs.c.id)
        if namespace is not None:
            matching = matching.where(s.jobs.c.namespace_id == existing_namespace_id(conn, namespace))
        if last_run_states:
            matching = matching.join_from(s.jobs, s.runs, s.runs.c.id == s.latest_run(s.jobs.c.id)).where(
                s.runs.c.state.in_(last_run_states)
            )
        # within one namespace the (namespace_id, name) index already yields jobs in name order: no sort
        order = [s.jobs.c.name]
        paged = matching
        if namespace is None:
            paged = matching.join_from(s.jobs, s.namespaces, s.namespaces.c.id == s.jobs.c.namespace_id)
            order.append(s.namespaces.c.name)
        page = paged.order_by(*order).limit(limit).offset(offset).subquery()
        rows = conn.execute(job_select().join(page, page.c.id == s.jobs.c.id).order_by(*order)).all()
        total = conn.execute(select(func.count()).select_from(matching.subquery())).scalar_one()
        return {"jobs": load_jobs(conn, rows), "totalCount": total}


def get_job(store: Any, namespace: str, name: str) -> dict:
    with reading(store) as conn:
        row = conn.execute(job_select().where(s.jobs.c.id == existing_job_id(conn, namespace, name))).one()
        return load_jobs(conn, [row])[0]


def list_datasets(store: Any, namespace: str, limit: int, offset: int) -> dict:
    check_page(limit, offset)
    with reading(store) as conn:
        query = dataset_select().where(
            s.datasets.c.namespace_id == existing_namespace_id(conn, namespace), s.datasets.c.is_deleted.is_(False)
        )
        rows = conn.execute(query.order_by(s.datasets.c.name).limit(limit).offset(offset)).all()
        total = conn.execute(select(func.count()).select_from(query.subquery())).scalar_one()
        return {"datasets": load_datasets(conn, rows), "totalCount": total}


def get_dataset(store: Any, namespace: str, name: str) -> dict:
    with reading(store) as conn:
        return load_datasets(conn, [dataset_row(conn, namespace, name)])[0]


def list_dataset_versions(store: Any, namespace: str, name: str, limit: int, offset: int) -> dict:
    check_page(limit, offset)
    with reading(store) as conn:
        dataset = dataset_row(conn, namespace, name)
        rows = conn.execute(_versions_page(conn), {"dataset": dataset.id, "limit": limit, "offset": offset}).all()
        total = conn.execute(select(func.count()).where(s.dataset_versions.c.dataset_id == dataset.id)).scalar_one()
        runs = runs_by_id(conn, [r.run_id for r in rows])
        lineage = column_lineage_of(conn, [dataset.id]).get(dataset.id)
        return {"versions": [version_shape(dataset, r, runs.get(r.run_id), lineage) for r in rows], "totalCount": total}


@statement_cache
def _versions_page(dialect: str) -> Select[Any]:
    """A page of a dataset's versions, newest first: read from the top of
    ix_dataset_versions_dataset_created, whatever the number of its versions."""
    versions, content = s.dataset_versions, s.dataset_version_contents
    return (
        select(versions, content.c.fields, content.c.facets.label("content_facets"))
        .join(content, content.c.id == versions.c.content_id)
        .where(versions.c.dataset_id == bindparam("dataset", type_=BigInteger))
        .order_by(versions.c.created_at.desc(), versions.c.id.desc())
        .limit(bindparam("limit", type_=Integer))
        .offset(bindparam("offset", type_=Integer))
    )


# A page of raw events ends early once this many bytes of them are in it (always at least one
# event): `limit` events of up to the largest event size each would not fit in memory otherwise.
EVENTS_PAGE_BYTES = 16 * 1024 * 1024


def lineage_events(store: Any, before: str | None, after: str | None, direction: str, limit: int, offset: int) -> dict:
    """Marquez's events page; it may hold fewer than `limit` events (EVENTS_PAGE_BYTES): the next
    page starts at `offset` plus the events returned."""
    check_page(limit, offset)
    conditions = []
    if (upper := parse_instant(before, "before")) is not None:
        conditions.append(s.lineage_events.c.event_time < upper)
    if (lower := parse_instant(after, "after")) is not None:
        conditions.append(s.lineage_events.c.event_time > lower)
    order = s.lineage_events.c.event_time.asc() if direction == "asc" else s.lineage_events.c.event_time.desc()
    tiebreak = s.lineage_events.c.id.asc() if direction == "asc" else s.lineage_events.c.id.desc()
    # the store's own (cached) dictionaries; an engine given directly reads them afresh
    dictionaries = getattr(store, "raw_dictionaries", None) or RawDictionaries(engine_of(store))
    with reading(store) as conn:
        # streamed a few at a time: the rows past the byte bound are never fetched
        query = select(s.lineage_events.c.payload).where(*conditions).order_by(order, tiebreak).limit(limit).offset(offset)
        payloads = conn.execution_options(yield_per=16).execute(query).scalars()
        events: list[Any] = []
        size = 0
        for payload in payloads:
            text = dictionaries.text(payload)  # the bound is on the events' text, as received
            if events and size + len(text) > EVENTS_PAGE_BYTES:
                break
            size += len(text)
            events.append(json.loads(text))
        payloads.close()
        total = conn.execute(select(func.count()).select_from(s.lineage_events).where(*conditions)).scalar_one()
        return {"events": events, "totalCount": total}
