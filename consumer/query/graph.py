"""Recursive graph walks over the lineage stores (table, column, snapshot and partition lineage), in plain SQL
that SQLite and PostgreSQL both run.

Every walk is a `WITH RECURSIVE` over integer ids with a depth limit. Cycles cannot loop: UNION drops
a (node, depth) row already produced and depth is bounded, so a walk visits each node at most
`depth` times; the callers then keep each node's smallest depth. This keeps the work bounded by
nodes x depth even on diamonds, where a path-array (Marquez's approach) would enumerate every path.

Dataset-level column-lineage rows (NULL output field) are walked through but dropped at the end: their NULL
`next_field` ends the walk, and keeping extra filters out of the recursive step keeps SQLite's lookups on
covering indexes. (SQLite after ANALYZE adds a Bloom filter to recursive steps whose lookups also filter on
a non-indexed column and rebuilds it every step — 30-100x slower; the store is not ANALYZEd on SQLite.)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import attrs
from sqlalchemy import Connection, bindparam, text

from consumer.query.as_of import CURRENT, EdgeSource
from consumer.store.schema import Time


@attrs.frozen
class FieldEdge:
    output_field: int
    input_field: int
    type: str
    subtype: str
    description: str | None
    masking: bool
    job_id: int
    depth: int


@attrs.frozen
class TableEdge:
    output_dataset: int
    job_id: int
    input_dataset: int | None  # None: the job writes the output without reading anything
    depth: int


@attrs.frozen
class SnapshotStep:
    input_dataset: int
    input_snapshot: str
    job_id: int
    run_id: int
    barrier_id: int
    output_dataset: int
    output_snapshot: str
    created_at: Any
    depth: int


def _expanding(sql: str, *names: str) -> Any:
    return text(sql).bindparams(*(bindparam(name, expanding=True) for name in names))


def _id_lists(conn: Connection, sql: str, *names: str) -> Any:
    """`sql` whose `IN :name` take lists of integer ids: on PostgreSQL one array parameter each
    (one statement text, planned once; 2-3x faster than hundreds of parameters), elsewhere an
    expanded list. The same for SQL text as `consumer.query.db.ids_in` for Core expressions."""
    if conn.dialect.name != "postgresql":
        return _expanding(sql, *names)
    for name in names:
        sql = sql.replace(f"IN :{name}", f"= ANY(CAST(:{name} AS bigint[]))")
    return text(sql)


# ---------------------------------------------------------------- table lineage

# Ids per IN list: under SQLite's default bound-parameter limit (32,766) and small enough for PostgreSQL's planner.
_IDS_PER_QUERY = 5_000


def _ids_in_chunks(ids: Iterable[int]) -> Iterable[list[int]]:
    ordered = sorted(ids)
    for start in range(0, len(ordered), _IDS_PER_QUERY):
        yield ordered[start : start + _IDS_PER_QUERY]


# ---------------------------------------------------------------- the rows walked (consumer.query.as_of)
# A query reads job_io or column_lineage as %EDGES% (and ends its WHERE with %ONLY%): it is run once per
# branch of the EdgeSource, the branches' rows together. Today's source has one branch, the table itself.


def _each(sql: str, branches: Sequence[tuple[str, str]], alias: str, joiner: str) -> str:
    """`sql` over each branch (its table as %EDGES%, its condition on `alias` as %ONLY%), joined by `joiner`."""
    return f"\n{joiner}\n".join(
        sql.replace("%EDGES%", table).replace("%ONLY%", only.format(alias=alias)) for table, only in branches
    )


def _step(sql: str, branches: Sequence[tuple[str, str]], overlay: tuple[str, str] | None, alias: str) -> str:
    """The recursive step of a walk over the branches: one recursive term per branch, or one over `overlay`."""
    return _each(sql, branches if overlay is None else [overlay], alias, "UNION")


def _column_of_io(conn: Connection, column: str, key: str, ids: Iterable[int], edges: EdgeSource = CURRENT) -> set[int]:
    """DISTINCT `column` of the job_io rows whose `key` is one of `ids`."""
    found: set[int] = set()
    sql = _each(f"SELECT DISTINCT {column} FROM %EDGES% io WHERE {key} IN :ids %ONLY%", edges.job_io, "io", "UNION")  # noqa: S608 - column names from this module's constants; the ids are bound
    statement = _id_lists(conn, sql, "ids")
    for chunk in _ids_in_chunks(ids):
        found.update(conn.execute(statement, {"ids": chunk, **edges.parameters}).scalars())
    return found


def jobs_touching(conn: Connection, dataset_id: int, edges: EdgeSource = CURRENT) -> list[int]:
    """Jobs that read or write the dataset."""
    return sorted(_column_of_io(conn, "job_id", "dataset_id", [dataset_id], edges))


def connected_jobs(conn: Connection, start_jobs: Sequence[int], depth: int, edges: EdgeSource = CURRENT) -> list[int]:
    """Jobs linked to `start_jobs` through shared datasets (either direction), within `depth` job hops
    (Marquez /lineage). Breadth-first, one level per step: the jobs sharing a not yet seen dataset with the
    newest jobs, so every job and dataset is expanded once however many paths lead to it. (A recursive
    query over (job, depth) rows re-expands a job at every depth it is reached at, and a hub dataset shared
    by n jobs multiplies that by n.)"""
    reached = _existing_jobs(conn, start_jobs)
    frontier, seen_datasets = set(reached), set[int]()
    # PostgreSQL's planner estimates a hub dataset's jobs from the average and hash-joins the
    # whole of job_io in the one-query form: there, two index lookups per level are faster.
    one_query = conn.dialect.name != "postgresql" and edges.is_current
    for _ in range(depth):
        if one_query and len(frontier) <= _IDS_PER_QUERY and len(seen_datasets) <= _IDS_PER_QUERY:
            # one round trip per level: what a chain of small jobs needs most
            pairs = conn.execute(_NEXT_LEVEL, {"frontier": sorted(frontier), "seen": sorted(seen_datasets)}).all()
            datasets, jobs = {dataset for dataset, _ in pairs}, {job for _, job in pairs}
        else:  # the same in two steps, each in chunks of ids
            datasets = _column_of_io(conn, "dataset_id", "job_id", frontier, edges) - seen_datasets
            jobs = _column_of_io(conn, "job_id", "dataset_id", datasets, edges)
        seen_datasets |= datasets
        frontier = jobs - reached
        if not frontier:
            break
        reached |= frontier
    return sorted(reached)


# The new datasets first, then their jobs: joining job_io to itself directly would pair every
# frontier job with every job of a hub dataset they share before DISTINCT removes the repeats.
# (Not used on PostgreSQL, see connected_jobs, nor as of an instant.)
_NEXT_LEVEL = _expanding(
    "SELECT DISTINCT dataset_id, job_id FROM job_io WHERE dataset_id IN "
    "(SELECT dataset_id FROM job_io WHERE job_id IN :frontier AND dataset_id NOT IN :seen)",
    "frontier",
    "seen",
)


def _existing_jobs(conn: Connection, job_ids: Sequence[int]) -> set[int]:
    found: set[int] = set()
    sql = _id_lists(conn, "SELECT id FROM jobs WHERE id IN :ids", "ids")
    for chunk in _ids_in_chunks(job_ids):
        found.update(conn.execute(sql, {"ids": chunk}).scalars())
    return found


def job_io_of(conn: Connection, job_ids: Sequence[int], edges: EdgeSource = CURRENT) -> list[tuple[int, int, str]]:
    sql = _each(
        "SELECT job_id, dataset_id, direction FROM %EDGES% io WHERE job_id IN :jobs %ONLY%", edges.job_io, "io", "UNION ALL"
    )
    statement = _id_lists(conn, sql, "jobs")
    rows = [
        tuple(row) for chunk in _ids_in_chunks(job_ids) for row in conn.execute(statement, {"jobs": chunk, **edges.parameters})
    ]
    return sorted(rows)


# upstream: from a dataset to the jobs that wrote it, to the datasets those jobs read
_TABLE_STEP = """
    SELECT far.dataset_id, w.depth + 1
    FROM walk w
    JOIN %EDGES% near ON near.dataset_id = w.dataset_id AND near.direction = :near
    JOIN %EDGES% far ON far.job_id = near.job_id AND far.direction = :far
    WHERE w.depth < :depth %ONLY%"""
_TABLE_ANSWER = """
SELECT near.dataset_id AS near_dataset, near.job_id, far.dataset_id AS far_dataset, MIN(r.depth) + 1 AS depth
FROM reached r
JOIN %EDGES% near ON near.dataset_id = r.dataset_id AND near.direction = :near
LEFT JOIN %EDGES% far ON far.job_id = near.job_id AND far.direction = :far
WHERE r.depth < :depth %ONLY%
GROUP BY near.dataset_id, near.job_id, far.dataset_id"""


def _table_walk(edges: EdgeSource) -> str:
    return f"""
WITH RECURSIVE walk(dataset_id, depth) AS (
    SELECT id, 0 FROM datasets WHERE id = :start
    UNION{_step(_TABLE_STEP, edges.job_io, edges.overlay_job_io, "near")}
),
reached AS (SELECT dataset_id, MIN(depth) AS depth FROM walk GROUP BY dataset_id)
{_each(_TABLE_ANSWER, edges.job_io, "near", "UNION ALL")}
ORDER BY 4, 1, 2, 3
"""  # noqa: S608 - tables and conditions from consumer.query.as_of; the values are bound


_CURRENT_TABLE_WALK = _table_walk(CURRENT)


def table_edges(conn: Connection, start_dataset: int, depth: int, upstream: bool, edges: EdgeSource = CURRENT) -> list[TableEdge]:
    """Every (input dataset) -job-> (output dataset) step within `depth` steps up- or downstream of a dataset."""
    near, far = ("output", "input") if upstream else ("input", "output")
    sql = text(_CURRENT_TABLE_WALK if edges.is_current else _table_walk(edges))
    rows = conn.execute(sql, {"start": start_dataset, "near": near, "far": far, "depth": depth, **edges.parameters})
    found = []
    for near_dataset, job, far_dataset, step in rows:
        if upstream:
            found.append(TableEdge(output_dataset=near_dataset, job_id=job, input_dataset=far_dataset, depth=step))
        elif far_dataset is not None:
            found.append(TableEdge(output_dataset=far_dataset, job_id=job, input_dataset=near_dataset, depth=step))
    return found


# ---------------------------------------------------------------- column lineage

_FIELD_START = "SELECT cl.id, cl.{far}, 1 FROM %EDGES% cl WHERE cl.{near} IN :start AND :depth >= 1 {direct} %ONLY%"
_FIELD_STEP = """
    SELECT cl.id, cl.{far}, w.depth + 1
    FROM walk w JOIN %EDGES% cl ON cl.{near} = w.next_field
    WHERE w.depth < :depth {direct} %ONLY%"""
# a walked row's id names it in its own branch (rows built for an instant have negative ids)
_FIELD_ANSWER = """
SELECT cl.output_field_id, cl.input_field_id, cl.transformation_type, cl.transformation_subtype,
       cl.transformation_description, cl.masking, cl.job_id, w.depth
FROM (SELECT lineage_id, MIN(depth) AS depth FROM walk GROUP BY lineage_id) w
JOIN %EDGES% cl ON cl.id = w.lineage_id
WHERE cl.output_field_id IS NOT NULL"""


def _field_walk(edges: EdgeSource, near: str, far: str, direct: str) -> str:
    branches, names = edges.column_lineage, {"near": near, "far": far, "direct": direct}
    no_condition = [(table, "") for table, _ in branches]
    return f"""
WITH RECURSIVE walk(lineage_id, next_field, depth) AS (
    {_each(_FIELD_START.format(**names), branches, "cl", "UNION")}
    UNION{_step(_FIELD_STEP.format(**names), branches, edges.overlay_column_lineage, "cl")}
)
{_each(_FIELD_ANSWER, no_condition, "cl", "UNION ALL")}
ORDER BY 8, 1, 2, 3, 4
"""


def field_edges(
    conn: Connection,
    start_fields: Sequence[int],
    depth: int,
    upstream: bool,
    direct_only: bool = False,
    edges: EdgeSource = CURRENT,
) -> list[FieldEdge]:
    """Field-level edges reached from `start_fields` within `depth` steps (upstream: towards the sources)."""
    if not start_fields:
        return []
    near, far = ("output_field_id", "input_field_id") if upstream else ("input_field_id", "output_field_id")
    direct = "AND cl.transformation_type = 'DIRECT'" if direct_only else ""
    sql = _field_walk(edges, near, far, direct)
    rows = conn.execute(_expanding(sql, "start"), {"start": list(start_fields), "depth": depth, **edges.parameters})
    return [FieldEdge(row[0], row[1], row[2], row[3], row[4], bool(row[5]), row[6], row[7]) for row in rows]


def dataset_level_inputs(conn: Connection, dataset_id: int, edges: EdgeSource = CURRENT) -> list[FieldEdge]:
    """The dataset-level INDIRECT inputs of a dataset (column-lineage rows without an output field)."""
    query = """SELECT transformation_type, transformation_subtype, transformation_description, masking, job_id, input_field_id
           FROM %EDGES% cl WHERE output_dataset_id = :d AND output_field_id IS NULL %ONLY%"""
    sql = text(_each(query, edges.column_lineage, "cl", "UNION ALL") + "\nORDER BY 6, 1, 2")
    return [
        FieldEdge(
            output_field=0,
            input_field=row[5],
            type=row[0],
            subtype=row[1],
            description=row[2],
            masking=bool(row[3]),
            job_id=row[4],
            depth=1,
        )
        for row in conn.execute(sql, {"d": dataset_id, **edges.parameters})
    ]


@attrs.frozen
class FieldInfo:
    namespace: str
    dataset: str
    field: str
    type: str | None
    dataset_id: int


def describe_fields(conn: Connection, field_ids: Iterable[int]) -> dict[int, FieldInfo]:
    ids = sorted(set(field_ids))
    if not ids:
        return {}
    sql = _expanding(
        """SELECT f.id, n.name, d.name, f.name, f.type, d.id FROM dataset_fields f
           JOIN datasets d ON d.id = f.dataset_id JOIN namespaces n ON n.id = d.namespace_id
           WHERE f.id IN :ids""",
        "ids",
    )
    return {row[0]: FieldInfo(*row[1:]) for row in conn.execute(sql, {"ids": ids})}


# ---------------------------------------------------------------- data (snapshot) lineage

_SNAPSHOT_WALK = """
WITH RECURSIVE walk(dataset_id, snapshot_id, depth) AS (
    SELECT DISTINCT dataset_id, snapshot_id, 0 FROM snapshot_lineage
    WHERE dataset_id = :dataset AND snapshot_id = :snapshot
    UNION
    SELECT far.dataset_id, far.snapshot_id, w.depth + 1
    FROM walk w
    JOIN snapshot_lineage near
      ON near.dataset_id = w.dataset_id AND near.snapshot_id = w.snapshot_id AND near.direction = :near
    JOIN snapshot_lineage far
      ON far.run_id = near.run_id AND far.barrier_id = near.barrier_id AND far.direction = :far
    WHERE w.depth < :depth {runs_then}
),
reached AS (SELECT dataset_id, snapshot_id, MIN(depth) AS depth FROM walk GROUP BY dataset_id, snapshot_id)
SELECT near.dataset_id, near.snapshot_id, near.job_id, near.run_id, near.barrier_id,
       far.dataset_id, far.snapshot_id, {output}.created_at, MIN(r.depth) + 1 AS depth
FROM reached r
JOIN snapshot_lineage near
  ON near.dataset_id = r.dataset_id AND near.snapshot_id = r.snapshot_id AND near.direction = :near
JOIN snapshot_lineage far
  ON far.run_id = near.run_id AND far.barrier_id = near.barrier_id AND far.direction = :far
WHERE r.depth < :depth {runs_then}
GROUP BY near.dataset_id, near.snapshot_id, near.job_id, near.run_id, near.barrier_id,
         far.dataset_id, far.snapshot_id, {output}.created_at
ORDER BY 9, 5, 1, 6
"""


# As of an instant, the steps of the runs created by then only (a run's steps share its run_id).
_RUNS_THEN = "AND near.run_id IN (SELECT id FROM runs WHERE created_at <= :as_of)"


def _at(sql: str, as_of: datetime | None) -> Any:
    """`sql` with an `:as_of` instant bound as the store's times are (UTC text on SQLite)."""
    return text(sql).bindparams(bindparam("as_of", type_=Time)) if as_of is not None else text(sql)


def snapshot_steps(
    conn: Connection, dataset_id: int, snapshot_id: str, depth: int, upstream: bool, as_of: datetime | None = None
) -> list[SnapshotStep]:
    """Each (input snapshot) -job, batch-> (output snapshot) step within `depth` steps of (dataset, snapshot);
    with `as_of`, of the runs created at or before that instant."""
    near, far = ("output", "input") if upstream else ("input", "output")
    sql = _SNAPSHOT_WALK.format(output="near" if upstream else "far", runs_then=_RUNS_THEN if as_of else "")
    parameters = {"dataset": dataset_id, "snapshot": snapshot_id, "near": near, "far": far, "depth": depth}
    rows = conn.execute(_at(sql, as_of), {**parameters, **({"as_of": as_of} if as_of else {})})
    steps = []
    for near_ds, near_snap, job, run, barrier, far_ds, far_snap, created, step in rows:
        if upstream:
            steps.append(SnapshotStep(far_ds, far_snap, job, run, barrier, near_ds, near_snap, created, step))
        else:
            steps.append(SnapshotStep(near_ds, near_snap, job, run, barrier, far_ds, far_snap, created, step))
    return steps


def snapshot_exists(conn: Connection, dataset_id: int, snapshot_id: str, as_of: datetime | None = None) -> bool:
    """Whether a run (created at or before `as_of`, when given) read or wrote the snapshot."""
    sql = "SELECT 1 FROM snapshot_lineage near WHERE dataset_id = :d AND snapshot_id = :s " + (_RUNS_THEN if as_of else "")  # noqa: S608 - a constant of this module
    parameters = {"d": dataset_id, "s": snapshot_id, **({"as_of": as_of} if as_of else {})}
    return conn.execute(_at(sql, as_of), parameters).first() is not None


def produced_snapshots(conn: Connection, dataset_id: int, limit: int) -> list[tuple[str, Any, int, int, int]]:
    """The newest snapshots written to a dataset: (snapshot_id, created_at, job_id, run_id, barrier_id), newest first."""
    sql = text(
        """SELECT snapshot_id, MAX(created_at) AS created, MIN(job_id), MIN(run_id), MIN(barrier_id)
           FROM snapshot_lineage WHERE dataset_id = :d AND direction = 'output'
           GROUP BY snapshot_id ORDER BY created DESC, snapshot_id DESC LIMIT :limit"""
    )
    return [tuple(row) for row in conn.execute(sql, {"d": dataset_id, "limit": limit})]


def upstream_snapshot_sets(
    conn: Connection, dataset_id: int, snapshots: Sequence[str], depth: int
) -> dict[str, dict[int, set[str]]]:
    """For each given snapshot of a dataset: every upstream dataset's snapshot(s) it derives from (transitively),
    including itself."""
    if not snapshots:
        return {}
    sql = _expanding(
        """
        WITH RECURSIVE walk(origin, dataset_id, snapshot_id, depth) AS (
            SELECT DISTINCT snapshot_id, dataset_id, snapshot_id, 0 FROM snapshot_lineage
            WHERE dataset_id = :d AND snapshot_id IN :snaps
            UNION
            SELECT w.origin, i.dataset_id, i.snapshot_id, w.depth + 1
            FROM walk w
            JOIN snapshot_lineage o
              ON o.dataset_id = w.dataset_id AND o.snapshot_id = w.snapshot_id AND o.direction = 'output'
            JOIN snapshot_lineage i ON i.run_id = o.run_id AND i.barrier_id = o.barrier_id AND i.direction = 'input'
            WHERE w.depth < :depth
        )
        SELECT DISTINCT origin, dataset_id, snapshot_id FROM walk
        """,
        "snaps",
    )
    found: dict[str, dict[int, set[str]]] = {snap: {} for snap in snapshots}
    for origin, upstream_dataset, upstream_snapshot in conn.execute(
        sql, {"d": dataset_id, "snaps": list(snapshots), "depth": depth}
    ):
        found[origin].setdefault(upstream_dataset, set()).add(upstream_snapshot)
    return found


def last_snapshot_before(conn: Connection, dataset_id: int, excluded: Iterable[str], before: Any) -> tuple[str, Any] | None:
    """The newest snapshot written to a dataset before `before` that is not one of `excluded`."""
    excluded = sorted(set(excluded))
    sql = _expanding(
        """SELECT snapshot_id, MAX(created_at) AS created FROM snapshot_lineage
           WHERE dataset_id = :d AND direction = 'output' AND created_at < :before AND snapshot_id NOT IN :excluded
           GROUP BY snapshot_id ORDER BY created DESC, snapshot_id DESC LIMIT 1""",
        "excluded",
    )
    row = conn.execute(sql, {"d": dataset_id, "before": before, "excluded": excluded or [""]}).first()
    return (row[0], row[1]) if row else None


# ---------------------------------------------------------------- partition lineage


@attrs.frozen
class PartitionStep:
    """One run (or micro-batch) read `input_partition` and wrote `output_partition`; a partition of
    None is the whole table (a table the run read or wrote without partitions)."""

    input_dataset: int
    input_partition: str | None
    input_snapshot: str
    job_id: int
    run_id: int
    barrier_id: int
    output_dataset: int
    output_partition: str | None
    output_snapshot: str
    created_at: Any
    depth: int


# Like the snapshot walk, over partition rows: a partition read by a run's batch reaches every
# partition that batch wrote (and back). The walk goes on from partitions only; a far side without
# partition rows is reported as the whole table (an unpartitioned output, an input whose partitions
# are not known) unless it is an input known to have read none of its partitions.
_PARTITION_WALK = """
WITH RECURSIVE walk(dataset_id, partition_name, depth) AS (
    SELECT DISTINCT dataset_id, partition_name, 0 FROM partition_lineage
    WHERE dataset_id = :dataset AND (partition_name = :partition OR substr(partition_name, 1, :prefix_length) = :prefix)
    UNION
    SELECT farp.dataset_id, farp.partition_name, w.depth + 1
    FROM walk w
    JOIN partition_lineage nearp
      ON nearp.dataset_id = w.dataset_id AND nearp.partition_name = w.partition_name AND nearp.direction = :near
    JOIN snapshot_lineage near ON near.id = nearp.snapshot_lineage_id
    JOIN snapshot_lineage far
      ON far.run_id = near.run_id AND far.barrier_id = near.barrier_id AND far.direction = :far
    JOIN partition_lineage farp ON farp.snapshot_lineage_id = far.id
    WHERE w.depth < :depth
),
reached AS (SELECT dataset_id, partition_name, MIN(depth) AS depth FROM walk GROUP BY dataset_id, partition_name)
SELECT near.dataset_id, nearp.partition_name, near.snapshot_id, near.job_id, near.run_id, near.barrier_id,
       far.dataset_id, farp.partition_name, far.snapshot_id, {output}.created_at, MIN(r.depth) + 1 AS depth
FROM reached r
JOIN partition_lineage nearp
  ON nearp.dataset_id = r.dataset_id AND nearp.partition_name = r.partition_name AND nearp.direction = :near
JOIN snapshot_lineage near ON near.id = nearp.snapshot_lineage_id
JOIN snapshot_lineage far
  ON far.run_id = near.run_id AND far.barrier_id = near.barrier_id AND far.direction = :far
LEFT JOIN partition_lineage farp ON farp.snapshot_lineage_id = far.id
WHERE r.depth < :depth AND (farp.id IS NOT NULL OR far.partitions IS NULL OR far.direction = 'output')
GROUP BY near.dataset_id, nearp.partition_name, near.snapshot_id, near.job_id, near.run_id, near.barrier_id,
         far.dataset_id, farp.partition_name, far.snapshot_id, {output}.created_at
"""


def _partition_match(partition: str) -> dict[str, Any]:
    """A partition names itself and, on a table partitioned by more columns, every partition below it."""
    return {"partition": partition, "prefix": partition + "/", "prefix_length": len(partition) + 1}


def partition_steps(conn: Connection, dataset_id: int, partition: str, depth: int, upstream: bool) -> list[PartitionStep]:
    """Each (input partition) -job, batch-> (output partition) step within `depth` steps of a partition
    of a dataset (and the partitions below it), nearest first."""
    near, far = ("output", "input") if upstream else ("input", "output")
    sql = _PARTITION_WALK.format(output="near" if upstream else "far")
    parameters = {"dataset": dataset_id, "near": near, "far": far, "depth": depth, **_partition_match(partition)}
    steps = []
    for row in conn.execute(text(sql), parameters):
        near_side, far_side = (row[0], row[1], row[2]), (row[6], row[7], row[8])
        (in_ds, in_part, in_snap), (out_ds, out_part, out_snap) = (far_side, near_side) if upstream else (near_side, far_side)
        steps.append(PartitionStep(in_ds, in_part, in_snap, row[3], row[4], row[5], out_ds, out_part, out_snap, row[9], row[10]))
    return sorted(steps, key=_step_order)


def _step_order(x: PartitionStep) -> tuple[Any, ...]:
    return (x.depth, x.barrier_id, x.run_id, x.input_dataset, x.input_partition or "", x.output_dataset, x.output_partition or "")


def matching_partitions(conn: Connection, dataset_id: int, partition: str) -> list[str]:
    """The partitions of a dataset known to the store that `partition` names (itself, or those below it)."""
    sql = text(
        """SELECT DISTINCT partition_name FROM partition_lineage
           WHERE dataset_id = :dataset AND (partition_name = :partition OR substr(partition_name, 1, :prefix_length) = :prefix)"""
    )
    return sorted(conn.execute(sql, {"dataset": dataset_id, **_partition_match(partition)}).scalars())


def names(conn: Connection, table: Any, ids: Iterable[int | None]) -> dict[int, tuple[str, str]]:
    """(namespace, name) of jobs or datasets by row id."""
    wanted = sorted({i for i in ids if i is not None})
    if not wanted:
        return {}
    sql = _id_lists(
        conn,
        f"SELECT t.id, n.name, t.name FROM {table.name} t JOIN namespaces n ON n.id = t.namespace_id WHERE t.id IN :ids",  # noqa: S608 - a table name from the schema; the ids are bound
        "ids",
    )
    return {row[0]: (row[1], row[2]) for row in conn.execute(sql, {"ids": wanted})}
