"""Lineage as of an instant: the rows `job_io` and `column_lineage` held then, for the walks to run on.

A job's version current at instant T (docs/store.md, "Job versions"): among its runs that ran a version
and were created at or before T, the latest (by created_at, uuid) of those finished by T, else the latest
of them all; with no such run, its declared version if declared at or before T; else the job did nothing
yet at T. A job whose lineage the retirement sweep had retired at T has none then.

Most jobs run today the version they ran at T, and their rows are the stored ones. Only the jobs whose
version at T differs from the one the tables hold now ("replaced" jobs) get rows of their own: built from
their version's content, ids resolved by natural key (rows of datasets and fields are never deleted, so
every name an old version holds has a row), in temporary tables of the request's connection. The walks
then read the stored rows of the other jobs and those rows, each query once per `EdgeSource` branch
(`consumer.query.graph`). Without an instant the one branch is the stored table: the walks' SQL as always.
"""

# ruff: noqa: S608 - the SQL built here names this module's constant tables and columns; every value is bound

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

import attrs
from sqlalchemy import Connection, Select, bindparam, select, text

from consumer.query.db import as_json, ids_in, parse_instant, statement_cache
from consumer.query.errors import BadParameter
from consumer.store import schema as s
from consumer.store.rows import current_rows

_CHUNK = 5_000


Branch = tuple[str, str]  # a table, and the condition ("AND ...") its rows of `{alias}` must meet


@attrs.frozen
class EdgeSource:
    """What the walks read as `job_io` and `column_lineage`: the rows of each branch (table and condition),
    together. `overlay_*`: the branches as one UNION ALL subquery and the condition on its rows, for a
    recursive step on PostgreSQL (which takes one recursive term; it plans the subquery as one appended
    table with index lookups into each); None: one recursive term per branch (SQLite, whose planner would
    materialize the subquery)."""

    job_io: tuple[Branch, ...] = (("job_io", ""),)
    column_lineage: tuple[Branch, ...] = (("column_lineage", ""),)
    overlay_job_io: Branch | None = None
    overlay_column_lineage: Branch | None = None
    parameters: Mapping[str, Any] = attrs.field(factory=dict)
    instant: datetime | None = None  # None: now

    @property
    def is_current(self) -> bool:
        return self.instant is None


CURRENT = EdgeSource()

_IO_COLUMNS = "id, job_id, dataset_id, direction"
_EDGE_COLUMNS = (
    "id, output_dataset_id, output_field_id, input_dataset_id, input_field_id, transformation_type, "
    "transformation_subtype, transformation_description, masking, job_id"
)
_REPLACED, _IO, _EDGES = "as_of_replaced_jobs", "as_of_job_io", "as_of_column_lineage"

# Per job, its runs that ran a version by T, best first: finished by T, then the latest created. (One pass
# over those runs: faster than a look-up of each job's latest runs, 10x on PostgreSQL.)
_VERSIONS_AT = """
WITH ranked AS (
    SELECT job_id, job_version_id,
           ROW_NUMBER() OVER (
               PARTITION BY job_id
               ORDER BY CASE WHEN ended_at IS NOT NULL AND ended_at <= :instant THEN 0 ELSE 1 END,
                        created_at DESC, uuid DESC
           ) AS place
    FROM runs WHERE job_version_id IS NOT NULL AND created_at <= :instant
)
SELECT j.id,
       CASE WHEN j.lineage_retired_at IS NOT NULL AND j.lineage_retired_at <= :instant THEN NULL
            WHEN r.job_version_id IS NOT NULL THEN r.job_version_id
            WHEN j.declared_at <= :instant THEN j.declared_version_id END AS then_version,
       CASE WHEN j.lineage_retired_at IS NULL THEN j.current_version_id END AS now_version
FROM jobs j LEFT JOIN ranked r ON r.job_id = j.id AND r.place = 1
"""


def versions_at(conn: Connection, instant: datetime) -> dict[int, int | None]:
    """Each job's version current at `instant` (None: no lineage then)."""
    return {job: then for job, then, _ in _versions_rows(conn, instant)}


def _versions_rows(conn: Connection, instant: datetime) -> list[tuple[int, int | None, int | None]]:
    sql = text(_VERSIONS_AT).bindparams(bindparam("instant", type_=s.Time))
    return [(row[0], row[1], row[2]) for row in conn.execute(sql, {"instant": instant})]


def replaced_at(conn: Connection, instant: datetime) -> dict[int, int | None]:
    """The jobs whose version at `instant` is not the one job_io and column_lineage hold now, with it."""
    return {job: then for job, then, now in _versions_rows(conn, instant) if then != now}


@contextmanager
def edges_as_of(conn: Connection, instant: datetime | None) -> Iterator[EdgeSource]:
    """The edges to walk at `instant` (None: now) on `conn`, for as long as the context lasts."""
    if instant is None:
        yield CURRENT
        return
    replaced = replaced_at(conn, instant)
    if not replaced:
        yield EdgeSource(instant=instant)
        return
    _create_tables(conn)
    try:
        _fill(conn, replaced)
        yield _source(conn, instant, sorted(replaced))
    finally:
        for table in (_REPLACED, _IO, _EDGES):
            conn.execute(text(f"DROP TABLE IF EXISTS {table}"))


def _source(conn: Connection, instant: datetime, replaced: list[int]) -> EdgeSource:
    if conn.dialect.name != "postgresql":
        others = f"AND {{alias}}.job_id NOT IN (SELECT job_id FROM {_REPLACED})"
        return EdgeSource(
            job_io=(("job_io", others), (_IO, "")), column_lineage=(("column_lineage", others), (_EDGES, "")), instant=instant
        )
    conn.execute(text(f"ANALYZE {_IO}, {_EDGES}"))  # the planner's row counts of the new tables (none until analyzed)
    others = "AND {alias}.job_id <> ALL(CAST(:as_of_replaced AS bigint[]))"
    # PostgreSQL appends the members of a UNION ALL (index lookups into each) only when they have no WHERE:
    # the condition on the stored rows is the outer query's
    overlay = "AND ({alias}.built = 1 OR {alias}.job_id <> ALL(CAST(:as_of_replaced AS bigint[])))"
    return EdgeSource(
        job_io=(("job_io", others), (_IO, "")),
        column_lineage=(("column_lineage", others), (_EDGES, "")),
        overlay_job_io=(_overlay(_IO_COLUMNS, "job_io", _IO), overlay),
        overlay_column_lineage=(_overlay(_EDGE_COLUMNS, "column_lineage", _EDGES), overlay),
        parameters={"as_of_replaced": replaced},
        instant=instant,
    )


def _overlay(columns: str, stored: str, built: str) -> str:
    return f"(SELECT {columns}, 0 AS built FROM {stored} UNION ALL SELECT {columns}, 1 AS built FROM {built})"


def _create_tables(conn: Connection) -> None:
    """The replaced jobs and their rows, with the stored tables' column types (PostgreSQL plans a UNION ALL of
    the stored and these rows as one appended table, index lookups into each, only when the types match)."""
    for table in (_REPLACED, _IO, _EDGES):
        conn.execute(text(f"DROP TABLE IF EXISTS {table}"))
    conn.execute(text(f"CREATE TEMPORARY TABLE {_REPLACED} AS SELECT id AS job_id FROM jobs WHERE 1 = 0"))
    conn.execute(text(f"CREATE TEMPORARY TABLE {_IO} AS SELECT {_IO_COLUMNS} FROM job_io WHERE 1 = 0"))
    conn.execute(text(f"CREATE TEMPORARY TABLE {_EDGES} AS SELECT {_EDGE_COLUMNS} FROM column_lineage WHERE 1 = 0"))
    # the lookups the walks make on the stored tables
    conn.execute(text(f"CREATE UNIQUE INDEX {_REPLACED}_job ON {_REPLACED} (job_id)"))
    conn.execute(text(f"CREATE INDEX {_IO}_dataset ON {_IO} (dataset_id, direction)"))
    conn.execute(text(f"CREATE INDEX {_IO}_job ON {_IO} (job_id, direction)"))
    conn.execute(text(f"CREATE UNIQUE INDEX {_EDGES}_id ON {_EDGES} (id)"))
    conn.execute(text(f"CREATE INDEX {_EDGES}_output ON {_EDGES} (output_field_id)"))
    conn.execute(text(f"CREATE INDEX {_EDGES}_input ON {_EDGES} (input_field_id)"))
    conn.execute(text(f"CREATE INDEX {_EDGES}_dataset ON {_EDGES} (output_dataset_id)"))


def _fill(conn: Connection, replaced: Mapping[int, int | None]) -> None:
    conn.execute(text(f"INSERT INTO {_REPLACED} (job_id) VALUES (:job)"), [{"job": job} for job in sorted(replaced)])
    contents = _contents(conn, {version for version in replaced.values() if version is not None})
    by_job = {job: contents[version] for job, version in replaced.items() if version is not None}
    io_rows, edge_rows = lineage_rows(conn, by_job)
    # negative ids: never one of a stored row (the column walk finds its rows by id)
    _insert(conn, _IO, _IO_COLUMNS, _IO_TYPES, [(-(n + 1), *row.values()) for n, row in enumerate(io_rows)])
    names = _EDGE_COLUMNS.split(", ")[1:]
    edges = [(-(n + 1), *(row[name] for name in names)) for n, row in enumerate(edge_rows)]
    _insert(conn, _EDGES, _EDGE_COLUMNS, _EDGE_TYPES, edges)


# the columns' PostgreSQL types, for its one-statement insert
_IO_TYPES = ("bigint", "bigint", "bigint", "text")
_EDGE_TYPES = ("bigint", "bigint", "bigint", "bigint", "bigint", "text", "text", "text", "boolean", "bigint")


def _insert(conn: Connection, table: str, columns: str, types: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    """Thousands of rows at once: on PostgreSQL one statement with a column array each (its driver's
    executemany sends a statement per row), elsewhere the driver's executemany of plain tuples."""
    if not rows:
        return
    if conn.dialect.name == "postgresql":
        arrays = ", ".join(f"CAST(:c{i} AS {kind}[])" for i, kind in enumerate(types))
        values = {f"c{i}": list(column) for i, column in enumerate(zip(*rows, strict=True))}
        conn.execute(text(f"INSERT INTO {table} ({columns}) SELECT * FROM unnest({arrays})"), values)
        return
    placeholders = ", ".join(["?"] * len(rows[0]))
    conn.exec_driver_sql(f"INSERT INTO {table} ({columns}) VALUES ({placeholders})", rows)


def _contents(conn: Connection, version_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    ids = sorted(version_ids)
    found: dict[int, dict[str, Any]] = {}
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        found.update({row[0]: as_json(row[1]) for row in conn.execute(_contents_query(conn), {"versions": chunk})})
    return found


@statement_cache
def _contents_query(dialect: str) -> Select[Any]:
    return select(s.job_versions.c.id, s.job_versions.c.content).where(ids_in(dialect, s.job_versions.c.id, "versions"))


DatasetKey = tuple[str, str]


def lineage_rows(
    conn: Connection, contents: Mapping[int, Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The job_io and column_lineage rows (without ids) of each job's version content, by job id: the
    rows the store writes when that version is current."""
    named: set[DatasetKey] = set()
    for content in contents.values():
        named |= {(key[0], key[1]) for key in (*content["inputs"], *content["outputs"])}
        named |= {(e[i], e[i + 1]) for e in content["edges"] for i in (0, 3)}
    datasets = _dataset_ids(conn, named)
    fields = _field_ids(conn, {datasets[(e[i], e[i + 1])] for c in contents.values() for e in c["edges"] for i in (0, 3)})
    return current_rows(contents, datasets, fields)


def _dataset_ids(conn: Connection, keys: set[DatasetKey]) -> dict[DatasetKey, int]:
    """Row ids of datasets by (namespace, name), through the unique index on (namespace_id, name)."""
    by_namespace: dict[str, list[str]] = {}
    for namespace, name in keys:
        by_namespace.setdefault(namespace, []).append(name)
    namespace_ids = dict(
        conn.execute(select(s.namespaces.c.name, s.namespaces.c.id).where(s.namespaces.c.name.in_(sorted(by_namespace)))).all()
    )
    found: dict[DatasetKey, int] = {}
    for namespace, names in by_namespace.items():
        names.sort()
        for start in range(0, len(names), _CHUNK):
            query = select(s.datasets.c.name, s.datasets.c.id).where(
                s.datasets.c.namespace_id == namespace_ids.get(namespace), s.datasets.c.name.in_(names[start : start + _CHUNK])
            )
            found.update({(namespace, name): row_id for name, row_id in conn.execute(query)})
    return found


def _field_ids(conn: Connection, dataset_ids: Iterable[int]) -> dict[tuple[int, str], int]:
    ids = sorted(dataset_ids)
    found: dict[tuple[int, str], int] = {}
    for start in range(0, len(ids), _CHUNK):
        for row_id, dataset, name in conn.execute(_field_ids_query(conn), {"datasets": ids[start : start + _CHUNK]}):
            found[(dataset, name)] = row_id
    return found


@statement_cache
def _field_ids_query(dialect: str) -> Select[Any]:
    f = s.dataset_fields.c
    return select(f.id, f.dataset_id, f.name).where(ids_in(dialect, f.dataset_id, "datasets"))


def parse_as_of(value: str | None, name: str = "asOf") -> datetime | None:
    """An `asOf` parameter as an aware UTC instant (None: now); `BadParameter` when it is not one."""
    instant = parse_instant(value, name)
    if instant is None:
        return None
    try:
        return instant.astimezone(timezone.utc)
    except OverflowError:
        raise BadParameter(f"{name}={value!r} is out of range") from None
