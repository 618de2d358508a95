"""Name search: Marquez's `/search` and the OpenSearch-backed `/api/v2beta/search/{jobs,datasets}`."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, Integer, Select, String, bindparam, func, literal, select, union_all

from consumer.query.db import as_json, check_page, ids_in, iso, like_contains, reading, statement_cache
from consumer.query.marquez.loaders import dataset_select, job_select
from consumer.query.nodeid import dataset_id, job_id
from consumer.store import schema as s


def search(store: Any, text: str, kind: str | None, sort: str, limit: int, namespace: str | None) -> dict:
    check_page(limit, 0)
    by_time = sort in ("updated_at", "update_at")
    parameters = {"pattern": like_contains(text), "namespace": namespace, "limit": limit}
    with reading(store) as conn:
        page, count = _search_queries(conn, kind, bool(namespace), by_time)
        rows = conn.execute(page, parameters).all()
        total = rows[0].total if rows else conn.execute(count, parameters).scalar_one()
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


@statement_cache
def _search_queries(dialect: str, kind: str | None, in_namespace: bool, by_time: bool) -> tuple[Select[Any], Select[Any]]:
    """The page of matches (the total riding along on every row as a window count: one scan) and
    the count alone (for a page past the matches); `:pattern`, `:namespace` and `:limit` bound."""
    parts = [
        _search_part(dialect, kind_name, table, in_namespace)
        for kind_name, table in (("DATASET", s.datasets), ("JOB", s.jobs))
        if kind in (None, kind_name)
    ]
    found = union_all(*parts).subquery()
    order = [found.c.updated_at.desc(), found.c.name] if by_time else [found.c.name, found.c.type]
    page = select(found, func.count().over().label("total")).order_by(*order).limit(bindparam("limit", type_=Integer))
    return page, select(func.count()).select_from(found)


def _name_matches(dialect: str, table: Any) -> Any:
    """`table.name` matches the bound `:pattern`, ignoring case (SQLite's LIKE ignores ASCII case
    already; lower() there would cost a call per row)."""
    pattern = bindparam("pattern", type_=String)
    return table.c.name.ilike(pattern) if dialect == "postgresql" else table.c.name.like(pattern)


def _search_part(dialect: str, kind: str, table: Any, in_namespace: bool) -> Any:
    # names are matched first on their own (a covering scan of the (namespace_id, name) index), then only
    # the matches are joined for the columns shown
    conditions = [table.c.id.in_(select(table.c.id).where(_name_matches(dialect, table)))]
    if in_namespace:
        conditions.append(s.namespaces.c.name == bindparam("namespace", type_=String))
    if table is s.datasets:
        conditions.append(table.c.is_deleted.is_(False))
    updated_at = s.job_seen_at(s.jobs.c.updated_at).label("updated_at") if table is s.jobs else table.c.updated_at
    return (
        select(literal(kind).label("type"), table.c.name, updated_at, s.namespaces.c.name.label("namespace"))
        .join(s.namespaces, s.namespaces.c.id == table.c.namespace_id)
        .where(*conditions)
    )


# Marquez indexes the last event's type; our runs keep the state that event left behind.
_EVENT_TYPE_OF_STATE = {"NEW": "START", "RUNNING": "RUNNING", "COMPLETED": "COMPLETE", "FAILED": "FAIL", "ABORTED": "ABORT"}


def search_hits(store: Any, text: str, kind: str, limit: int) -> dict:
    """Marquez `GET /api/v2beta/search/{jobs,datasets}`: `{hits, highlights}` as Marquez builds them from
    OpenSearch documents, answered with the `/search` name match (case-insensitive substring, % and _ wildcards).
    A highlight marks the matched part of the name the way OpenSearch's plain highlighter does (`<em>`)."""
    check_page(limit, 0)
    with reading(store) as conn:
        rows = conn.execute(_hits_query(conn, kind), {"pattern": like_contains(text), "limit": limit}).all()
        hits = _job_hits(conn, rows) if kind == "JOB" else _dataset_hits(conn, rows)
    return {"hits": hits, "highlights": [_highlight(text, hit["name"]) for hit in hits]}


@statement_cache
def _hits_query(dialect: str, kind: str) -> Select[Any]:
    table = s.jobs if kind == "JOB" else s.datasets
    select_rows = job_select() if kind == "JOB" else dataset_select().where(s.datasets.c.is_deleted.is_(False))
    return (
        select_rows.where(_name_matches(dialect, table))
        .order_by(table.c.name, s.namespaces.c.name)
        .limit(bindparam("limit", type_=Integer))
    )


def _runs_by_row_id(conn: Connection, run_ids: Iterable[int | None]) -> dict[int, Any]:
    ids = sorted({i for i in run_ids if i is not None})
    if not ids:
        return {}
    return {r.id: r for r in conn.execute(_runs_query(conn), {"runs": ids})}


@statement_cache
def _runs_query(dialect: str) -> Select[Any]:
    return select(s.runs.c.id, s.runs.c.uuid, s.runs.c.state, s.runs.c.facets).where(ids_in(dialect, s.runs.c.id, "runs"))


def _job_hits(conn: Connection, rows: Sequence[Any]) -> list[dict]:
    runs = _runs_by_row_id(conn, [row.latest_run_id for row in rows])
    hits = []
    for row in rows:
        run = runs.get(row.latest_run_id)
        hits.append(
            {
                "run_id": run.uuid if run else None,
                "eventType": _EVENT_TYPE_OF_STATE.get(run.state) if run else None,
                "name": row.name,
                "type": row.type,
                "namespace": row.namespace,
                "facets": as_json(row.facets) or {},
                "runFacets": (as_json(run.facets) or {}) if run else {},
            }
        )
    return hits


def _dataset_hits(conn: Connection, rows: Sequence[Any]) -> list[dict]:
    latest_run: dict[int, int | None] = {}
    if rows:
        latest_run = dict(conn.execute(_latest_runs_query(conn), {"datasets": [row.id for row in rows]}).all())
    runs = _runs_by_row_id(conn, latest_run.values())
    hits = []
    for row in rows:
        run_id = latest_run.get(row.id)
        run = runs.get(run_id) if run_id is not None else None
        hits.append(
            {
                "run_id": run.uuid if run else None,
                "eventType": _EVENT_TYPE_OF_STATE.get(run.state) if run else None,
                "name": row.name,
                "namespace": row.namespace,
                "facets": as_json(row.facets) or {},
                "inputFacets": {},
                "outputFacets": {},
            }
        )
    return hits


@statement_cache
def _latest_runs_query(dialect: str) -> Select[Any]:
    """Each dataset's newest version's run, from the top of ix_dataset_versions_dataset_created."""
    versions = s.dataset_versions.alias()
    newest = (
        select(versions.c.run_id)
        .where(versions.c.dataset_id == s.datasets.c.id)
        .order_by(versions.c.created_at.desc(), versions.c.id.desc())
        .limit(1)
        .correlate(s.datasets)
        .scalar_subquery()
    )
    return select(s.datasets.c.id, newest).where(ids_in(dialect, s.datasets.c.id, "datasets"))


def _highlight(text: str, name: str) -> dict[str, list[str]]:
    found = like_span(text, name)
    if found is None or found[0] == found[1]:
        return {}
    start, end = found
    return {"name": [f"{name[:start]}<em>{name[start:end]}</em>{name[end:]}"]}


def like_span(pattern: str, name: str) -> tuple[int, int] | None:
    """Where the LIKE `pattern` (% any run, _ any one character, case-insensitive) first matches
    inside `name`, as (start, end), or None. Each %-separated piece is found at its earliest place
    after the previous one: a piece found later could only leave less room for the rest, so this
    finds a match whenever there is one, in time proportional to the name times the pattern, never
    backtracking (a regex of lazy `.*?` runs does, badly, on long names)."""
    pieces = [piece for piece in pattern.split("%") if piece]
    start = end = None
    position = 0
    for piece in pieces:
        regex = re.compile("".join("." if c == "_" else re.escape(c) for c in piece), re.IGNORECASE | re.DOTALL)
        found = regex.search(name, position)
        if found is None:
            return None
        start = found.start() if start is None else start
        end = position = found.end()
    return (0, 0) if start is None or end is None else (start, end)  # no piece: matches, empty
