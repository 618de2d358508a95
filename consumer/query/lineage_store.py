"""The lineage questions Marquez cannot answer, as plain dicts (served under /api/v1/lineage-store and
printed by `python -m consumer lineage ...`):

- tables up/downstream of a table, transitive, with the job of every step;
- where a column's values come from / go, transitive, each edge with its transformation (DIRECT only on demand);
- snapshots a (table, snapshot) was derived from / that derive from it, with job and batch of every step;
- a data correction plan for a bad (table, snapshot), with the statements that roll Iceberg and Delta tables back;
- partitions a (table, partition) was derived from / that derive from it, and the correction plan of a bad
  partition (the downstream partitions to recompute, the jobs with the batches to rerun);
- an aligned start: the newest mutually consistent snapshots of a set of tables (Paimon's job_startup);
- any of these as a picture (DOT / SVG).

Tables are named as `namespace:name` node parts or by a `dataset:NS:NAME` node id; see `resolve_dataset`.
Snapshots match by exact snapshot id: a snapshot derives from the input snapshots of the same run and batch.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, select

from consumer.partitions import parse_partition
from consumer.query import graph
from consumer.query.as_of import edges_as_of, parse_as_of
from consumer.query.db import check_depth, iso, reading
from consumer.query.errors import BadParameter, NotFound, SearchLimitReached
from consumer.query.nodeid import dataset_id, field_id, job_id, parse_node_id
from consumer.query.render import GraphEdge, GraphNode, Picture
from consumer.query.rollback import rollback_statements
from consumer.store import schema as s
from consumer.store.lookup import dataset_row_id, job_row_id, present

ALIGNED_CANDIDATES = 50  # newest snapshots per table considered by aligned_start
# Combinations aligned_start tries before it gives up: with nothing consistent, backtracking over n tables
# could otherwise try up to ALIGNED_CANDIDATES ** n of them.
ALIGNED_SEARCH_STEPS = 100_000
ALIGNED_DEPTH = 30


def resolve_dataset(conn: Connection, table: str) -> int:
    """A dataset's row id from `dataset:NS:NAME`, `NS:NAME`, or a bare name / Paimon `database.table`
    when that is unambiguous."""
    text = table if table.startswith("dataset:") else None
    if text is None and ":" in table:
        text = f"dataset:{table}"
    if text is not None:
        node = parse_node_id(text)
        if node.kind == "dataset":
            found = dataset_row_id(conn, node.namespace, node.name)
            if found is not None:
                return found
    by_name = list(conn.execute(select(s.datasets.c.id).where(s.datasets.c.name == table)).scalars())
    if not by_name and "." in table:
        database, _, name = table.rpartition(".")
        by_name = list(
            conn.execute(
                select(s.datasets.c.id).where(s.datasets.c.database_name == database, s.datasets.c.table_name == name)
            ).scalars()
        )
    if len(by_name) == 1:
        return by_name[0]
    if len(by_name) > 1:
        raise BadParameter(f"table {table!r} is ambiguous ({len(by_name)} datasets); give it as dataset:NAMESPACE:NAME")
    raise NotFound(f"table {table!r} not found")


def _dataset_ref(names: dict[int, tuple[str, str]], row_id: int) -> dict:
    namespace, name = names[row_id]
    return {"namespace": namespace, "name": name, "nodeId": dataset_id(namespace, name)}


def _rollback_to(snapshot: tuple[str, Any] | None) -> dict[str, Any]:
    """The snapshot to roll a table back to, and when it was written (None: no earlier snapshot)."""
    if snapshot is None:
        return {"rollBackTo": None, "rollBackToCreatedAt": None}
    return {"rollBackTo": snapshot[0], "rollBackToCreatedAt": iso(snapshot[1])}


def _optional_dataset_ref(names: dict[int, tuple[str, str]], row_id: int | None) -> dict | None:
    return None if row_id is None else _dataset_ref(names, row_id)


def _job_ref(names: dict[int, tuple[str, str]], row_id: int) -> dict:
    namespace, name = names[row_id]
    return {"namespace": namespace, "name": name, "nodeId": job_id(namespace, name)}


# ---------------------------------------------------------------- tables


def table_lineage(store: Any, table: str, direction: str, depth: int, as_of: str | None = None) -> dict:
    """Tables up- or downstream of a table; with `as_of` (ISO 8601), through each job's version current then."""
    check_depth(depth)
    upstream = _direction(direction)
    instant = parse_as_of(as_of)
    with reading(store) as conn, edges_as_of(conn, instant) as source:
        start = resolve_dataset(conn, table)
        edges = graph.table_edges(conn, start, depth, upstream, source)
        datasets = graph.names(conn, s.datasets, [start] + [e.input_dataset for e in edges] + [e.output_dataset for e in edges])
        jobs = graph.names(conn, s.jobs, [e.job_id for e in edges])
    reached: dict[int, int] = {}
    for e in edges:
        other = e.input_dataset if upstream else e.output_dataset
        if other is not None and other != start:
            reached[other] = min(reached.get(other, e.depth), e.depth)
    return {
        "table": _dataset_ref(datasets, start),
        "direction": direction,
        "depth": depth,
        **_as_of_key(instant),
        "tables": sorted(
            ({**_dataset_ref(datasets, d), "distance": dist} for d, dist in reached.items()),
            key=lambda t: (t["distance"], t["nodeId"]),
        ),
        "edges": [
            {
                "from": _optional_dataset_ref(datasets, e.input_dataset),
                "job": _job_ref(jobs, e.job_id),
                "to": _dataset_ref(datasets, e.output_dataset),
                "depth": e.depth,
            }
            for e in edges
        ],
    }


def _as_of_key(instant: Any) -> dict[str, str]:
    """An answer as of an instant says which (UTC); today's answer keeps its shape."""
    return {} if instant is None else {"asOf": iso(instant) or ""}


def _direction(direction: str) -> bool:
    if direction not in ("upstream", "downstream"):
        raise BadParameter(f"direction={direction!r}: expected upstream or downstream")
    return direction == "upstream"


# ---------------------------------------------------------------- columns


def column_lineage(
    store: Any, table: str, column: str, direction: str, depth: int, direct_only: bool, as_of: str | None = None
) -> dict:
    """Where a column's values come from or go; with `as_of` (ISO 8601), through each job's version current then."""
    check_depth(depth)
    upstream = _direction(direction)
    instant = parse_as_of(as_of)
    with reading(store) as conn, edges_as_of(conn, instant) as source:
        dataset = resolve_dataset(conn, table)
        start = conn.execute(
            select(s.dataset_fields.c.id).where(s.dataset_fields.c.dataset_id == dataset, s.dataset_fields.c.name == column)
        ).scalar()
        start = present(start, f"column {column!r} not found in table {table!r}")
        edges = graph.field_edges(conn, [start], depth, upstream, direct_only, source)
        dataset_level = [] if (direct_only or not upstream or depth < 1) else graph.dataset_level_inputs(conn, dataset, source)
        fields = graph.describe_fields(
            conn,
            [start] + [e.input_field for e in edges] + [e.output_field for e in edges] + [e.input_field for e in dataset_level],
        )
        jobs = graph.names(conn, s.jobs, [e.job_id for e in edges + dataset_level])
    return {
        "column": _field_ref(fields[start]),
        "direction": direction,
        "depth": depth,
        "directOnly": direct_only,
        **_as_of_key(instant),
        # INDIRECT inputs of the whole table (JOIN keys, FILTER, GROUP_BY, SORT): they shape every column
        "tableLevelInputs": [
            {
                "from": _field_ref(fields[e.input_field]),
                "transformation": _transformation(e),
                "job": _job_ref(jobs, e.job_id),
            }
            for e in dataset_level
        ],
        "edges": [
            {
                "from": _field_ref(fields[e.input_field]),
                "to": _field_ref(fields[e.output_field]),
                "transformation": _transformation(e),
                "job": _job_ref(jobs, e.job_id),
                "depth": e.depth,
            }
            for e in edges
        ],
    }


def _transformation(edge: graph.FieldEdge) -> dict:
    return {"type": edge.type, "subtype": edge.subtype, "description": edge.description or "", "masking": edge.masking}


def _field_ref(f: graph.FieldInfo) -> dict:
    return {"namespace": f.namespace, "dataset": f.dataset, "field": f.field, "nodeId": field_id(f.namespace, f.dataset, f.field)}


# ---------------------------------------------------------------- snapshots


def snapshot_lineage(store: Any, table: str, snapshot: str, direction: str, depth: int, as_of: str | None = None) -> dict:
    """Snapshots a snapshot derives from or that derive from it; with `as_of` (ISO 8601), of the runs created by then."""
    check_depth(depth)
    upstream = _direction(direction)
    instant = parse_as_of(as_of)
    with reading(store) as conn:
        dataset = _snapshot_owner(conn, table, snapshot, instant)
        steps = graph.snapshot_steps(conn, dataset, snapshot, depth, upstream, instant)
        datasets = graph.names(conn, s.datasets, [dataset] + [x.input_dataset for x in steps] + [x.output_dataset for x in steps])
        jobs = graph.names(conn, s.jobs, [x.job_id for x in steps])
        runs = _run_uuids(conn, [x.run_id for x in steps])
    return {
        "table": _dataset_ref(datasets, dataset),
        "snapshot": snapshot,
        "direction": direction,
        "depth": depth,
        **_as_of_key(instant),
        "steps": [_step(x, datasets, jobs, runs) for x in steps],
    }


def _snapshot_owner(conn: Connection, table: str, snapshot: str, as_of: Any = None) -> int:
    """The table's row id, once its snapshot is known to the data-lineage store (at `as_of`, when given)."""
    dataset = resolve_dataset(conn, table)
    if not graph.snapshot_exists(conn, dataset, snapshot, as_of):
        when = "" if as_of is None else f" at {iso(as_of)}"
        raise NotFound(f"snapshot {snapshot!r} of table {table!r} not found{when}")
    return dataset


def _step(x: graph.SnapshotStep, datasets: dict, jobs: dict, runs: dict) -> dict:
    return {
        "from": {**_dataset_ref(datasets, x.input_dataset), "snapshot": x.input_snapshot},
        "job": _job_ref(jobs, x.job_id),
        "runId": runs[x.run_id],
        "batchId": x.barrier_id,
        "to": {**_dataset_ref(datasets, x.output_dataset), "snapshot": x.output_snapshot},
        "createdAt": iso(x.created_at),
        "depth": x.depth,
    }


def _run_uuids(conn: Connection, run_ids: Sequence[int]) -> dict[int, str]:
    ids = sorted(set(run_ids))
    if not ids:
        return {}
    return dict(conn.execute(select(s.runs.c.id, s.runs.c.uuid).where(s.runs.c.id.in_(ids))).all())


def correction_plan(store: Any, table: str, snapshot: str, depth: int = 30) -> dict:
    """For a bad (table, snapshot): each downstream table with the snapshots derived from it and the last
    snapshot written before them that is not derived from it (where to roll back to), and each job with
    the first batch that consumed bad data (where to restart from)."""
    check_depth(depth)
    with reading(store) as conn:
        dataset = _snapshot_owner(conn, table, snapshot)
        steps = graph.snapshot_steps(conn, dataset, snapshot, depth, upstream=False)
        affected: dict[int, dict[str, Any]] = defaultdict(dict)
        for x in steps:
            known = affected[x.output_dataset].get(x.output_snapshot)
            affected[x.output_dataset][x.output_snapshot] = min(known, x.created_at) if known else x.created_at
        rollback: dict[int, tuple[str, Any] | None] = {}
        for target, snaps in affected.items():
            rollback[target] = graph.last_snapshot_before(conn, target, snaps, min(snaps.values()))
        root_created = _snapshot_created(conn, dataset, snapshot)
        root_rollback = graph.last_snapshot_before(conn, dataset, [snapshot], root_created) if root_created else None
        datasets = graph.names(conn, s.datasets, [dataset, *affected, *(x.input_dataset for x in steps)])
        jobs = graph.names(conn, s.jobs, [x.job_id for x in steps])
        runs = _run_uuids(conn, [x.run_id for x in steps])
        targets = {row_id: (*datasets[row_id], to[0] if to else None) for row_id, to in rollback.items()}
        statements = rollback_statements(
            conn, {**targets, dataset: (*datasets[dataset], root_rollback[0] if root_rollback else None)}
        )
    restarts: dict[int, graph.SnapshotStep] = {}
    for x in steps:
        if x.job_id not in restarts or x.barrier_id < restarts[x.job_id].barrier_id:
            restarts[x.job_id] = x
    return {
        "table": _dataset_ref(datasets, dataset),
        "badSnapshot": snapshot,
        "rollBackTableTo": root_rollback[0] if root_rollback else None,
        "rollBackTableStatement": statements[dataset],
        "tables": sorted(
            (
                {
                    **_dataset_ref(datasets, target),
                    "derivedSnapshots": sorted(snaps, key=lambda snap: (snaps[snap], snap)),
                    **_rollback_to(rollback[target]),
                    "rollBackStatement": statements[target],
                }
                for target, snaps in affected.items()
            ),
            key=lambda t: t["nodeId"],
        ),
        "jobs": sorted(
            (
                {
                    **_job_ref(jobs, job),
                    "restartFromBatch": x.barrier_id,
                    "runId": runs[x.run_id],
                    "firstBadInput": {**_dataset_ref(datasets, x.input_dataset), "snapshot": x.input_snapshot},
                }
                for job, x in restarts.items()
            ),
            key=lambda j: j["nodeId"],
        ),
        "steps": [_step(x, datasets, jobs, runs) for x in steps],
    }


def _snapshot_created(conn: Connection, dataset: int, snapshot: str) -> Any:
    return conn.execute(
        select(s.snapshot_lineage.c.created_at)
        .where(s.snapshot_lineage.c.dataset_id == dataset, s.snapshot_lineage.c.snapshot_id == snapshot)
        .order_by(s.snapshot_lineage.c.created_at)
        .limit(1)
    ).scalar()


# ---------------------------------------------------------------- partitions


def partition_lineage(store: Any, table: str, partition: str, direction: str, depth: int) -> dict:
    """The partitions a (table, partition) derives from (upstream) or that derive from it (downstream), with the
    job, run and batch of every step; a partition names also the partitions below it (`dt=1` of a table
    partitioned by dt/hour)."""
    check_depth(depth)
    upstream = _direction(direction)
    name = _partition_name(partition)
    with reading(store) as conn:
        dataset, matched = _partition_owner(conn, table, name)
        steps = graph.partition_steps(conn, dataset, name, depth, upstream)
        datasets, jobs, runs = _step_names(conn, dataset, steps)
    start = {(dataset, m) for m in matched}
    reached: dict[tuple[int, str | None], int] = {}
    for x in steps:
        node = (x.input_dataset, x.input_partition) if upstream else (x.output_dataset, x.output_partition)
        if node not in start:
            reached[node] = min(reached.get(node, x.depth), x.depth)
    return {
        "table": _dataset_ref(datasets, dataset),
        "partition": name,
        "matchedPartitions": matched,
        "direction": direction,
        "depth": depth,
        "partitions": sorted(
            ({**_partition_ref(datasets, d, p), "distance": distance} for (d, p), distance in reached.items()),
            key=lambda t: (t["distance"], t["nodeId"], t["partition"] or ""),
        ),
        "steps": [_partition_step(x, datasets, jobs, runs) for x in steps],
    }


def _partition_name(partition: str) -> str:
    try:
        return parse_partition(partition)
    except ValueError as error:
        raise BadParameter(str(error)) from None


def _partition_owner(conn: Connection, table: str, partition: str) -> tuple[int, list[str]]:
    """The table's row id and its partitions `partition` names, once the partition-lineage store knows one."""
    dataset = resolve_dataset(conn, table)
    matched = graph.matching_partitions(conn, dataset, partition)
    if not matched:
        raise NotFound(f"partition {partition!r} of table {table!r} not found")
    return dataset, matched


def _step_names(
    conn: Connection, dataset: int, steps: Sequence[graph.PartitionStep]
) -> tuple[dict[int, tuple[str, str]], dict[int, tuple[str, str]], dict[int, str]]:
    datasets = graph.names(conn, s.datasets, [dataset, *(x.input_dataset for x in steps), *(x.output_dataset for x in steps)])
    return datasets, graph.names(conn, s.jobs, [x.job_id for x in steps]), _run_uuids(conn, [x.run_id for x in steps])


def _partition_ref(datasets: dict[int, tuple[str, str]], row_id: int, partition: str | None) -> dict:
    """A table's partition; `partition` None is the whole table."""
    return {**_dataset_ref(datasets, row_id), "partition": partition}


def _partition_step(x: graph.PartitionStep, datasets: dict, jobs: dict, runs: dict) -> dict:
    return {
        "from": {**_partition_ref(datasets, x.input_dataset, x.input_partition), "snapshot": x.input_snapshot},
        "job": _job_ref(jobs, x.job_id),
        "runId": runs[x.run_id],
        "batchId": x.barrier_id,
        "to": {**_partition_ref(datasets, x.output_dataset, x.output_partition), "snapshot": x.output_snapshot},
        "createdAt": iso(x.created_at),
        "depth": x.depth,
    }


def partition_correction_plan(store: Any, table: str, partition: str, depth: int = 30) -> dict:
    """For a bad partition: every downstream partition derived from it, to roll back or recompute (a table written
    without partitions as a whole), with the runs that wrote it; and every job with the batches (runs) that consumed
    bad data and must run again, each with the bad partitions it read and the partitions it wrote."""
    check_depth(depth)
    name = _partition_name(partition)
    with reading(store) as conn:
        dataset, matched = _partition_owner(conn, table, name)
        steps = graph.partition_steps(conn, dataset, name, depth, upstream=False)
        datasets, jobs, runs = _step_names(conn, dataset, steps)
    return {
        "table": _dataset_ref(datasets, dataset),
        "badPartition": name,
        "matchedPartitions": matched,
        "partitions": _derived_partitions(steps, datasets, jobs, runs),
        "jobs": _batches_to_rerun(steps, datasets, jobs, runs),
        "steps": [_partition_step(x, datasets, jobs, runs) for x in steps],
    }


def _derived_partitions(steps: Sequence[graph.PartitionStep], datasets: dict, jobs: dict, runs: dict) -> list[dict]:
    derived: dict[tuple[int, str | None], list[graph.PartitionStep]] = defaultdict(list)
    for x in steps:
        derived[(x.output_dataset, x.output_partition)].append(x)
    answer = []
    for (target, part), writes in derived.items():
        batches = sorted({(x.barrier_id, runs[x.run_id], x.job_id) for x in writes})
        answer.append(
            {
                **_partition_ref(datasets, target, part),
                "distance": min(x.depth for x in writes),
                "derivedSnapshots": sorted({x.output_snapshot for x in writes}),
                "writtenBy": [{"job": _job_ref(jobs, job), "runId": run, "batchId": batch} for batch, run, job in batches],
            }
        )
    return sorted(answer, key=lambda t: (t["distance"], t["nodeId"], t["partition"] or ""))


def _batches_to_rerun(steps: Sequence[graph.PartitionStep], datasets: dict, jobs: dict, runs: dict) -> list[dict]:
    by_batch: dict[int, dict[tuple[int, int], list[graph.PartitionStep]]] = defaultdict(lambda: defaultdict(list))
    for x in steps:
        by_batch[x.job_id][(x.barrier_id, x.run_id)].append(x)
    answer = []
    for job, batches in by_batch.items():
        reruns = [
            {
                "batchId": batch,
                "runId": runs[run],
                "createdAt": iso(min(x.created_at for x in batch_steps)),
                "badInputs": _partition_refs(datasets, {(x.input_dataset, x.input_partition) for x in batch_steps}),
                "recomputes": _partition_refs(datasets, {(x.output_dataset, x.output_partition) for x in batch_steps}),
            }
            for (batch, run), batch_steps in sorted(batches.items(), key=lambda item: (item[0][0], runs[item[0][1]]))
        ]
        answer.append({**_job_ref(jobs, job), "restartFromBatch": reruns[0]["batchId"], "batches": reruns})
    return sorted(answer, key=lambda j: j["nodeId"])


def _partition_refs(datasets: dict, nodes: set[tuple[int, str | None]]) -> list[dict]:
    refs = [_partition_ref(datasets, d, p) for d, p in nodes]
    return sorted(refs, key=lambda t: (t["nodeId"], t["partition"] or ""))


def aligned_start(store: Any, tables: Sequence[str], max_steps: int = ALIGNED_SEARCH_STEPS) -> dict:
    """The newest snapshots of `tables`, one each, that are mutually consistent: wherever two of them derive
    from the same upstream table, they derive from the same snapshot of it (and a table that is upstream
    of another is taken at the snapshot the other derives from). Raises `SearchLimitReached` after
    `max_steps` candidate checks without an answer either way."""
    if not tables:
        raise BadParameter("aligned start needs at least one table")
    with reading(store) as conn:
        ids = [resolve_dataset(conn, t) for t in tables]
        candidates: list[list[tuple[str, Any, dict[int, set[str]]]]] = []
        for dataset in ids:
            produced = graph.produced_snapshots(conn, dataset, ALIGNED_CANDIDATES)
            upstream = graph.upstream_snapshot_sets(conn, dataset, [p[0] for p in produced], ALIGNED_DEPTH)
            candidates.append([(snap, created, upstream.get(snap, {dataset: {snap}})) for snap, created, *_ in produced])
        datasets = graph.names(conn, s.datasets, ids)
    choice = _newest_consistent(candidates, max_steps)
    result = {"tables": [_dataset_ref(datasets, d) for d in ids], "consistent": choice is not None, "snapshots": []}
    if choice is not None:
        result["snapshots"] = [
            {**_dataset_ref(datasets, d), "snapshot": snap, "createdAt": iso(created)}
            for d, (snap, created, _) in zip(ids, choice, strict=True)
        ]
    return result


def _newest_consistent(candidates: list[list[tuple[str, Any, dict[int, set[str]]]]], max_steps: int) -> list | None:
    """Depth-first over the tables, newest candidate first, so the first full assignment is the newest
    on the earliest tables; backtracks on conflicts, at most `max_steps` candidate checks."""
    chosen: list = []
    steps = 0

    def consistent(upstream: dict[int, set[str]]) -> bool:
        for _, _, other in chosen:
            for dataset, snaps in upstream.items():
                if dataset in other and not (snaps & other[dataset]):
                    return False
        return True

    def search(index: int) -> bool:
        if index == len(candidates):
            return True
        nonlocal steps
        for candidate in candidates[index]:
            steps += 1
            if steps > max_steps:
                raise SearchLimitReached(
                    f"aligned start of {len(candidates)} tables gave up after {max_steps:,} candidate checks without "
                    "finding mutually consistent snapshots or ruling them out; ask for fewer tables at a time"
                )
            if consistent(candidate[2]):
                chosen.append(candidate)
                if search(index + 1):
                    return True
                chosen.pop()
        return False

    return list(chosen) if search(0) else None


# ---------------------------------------------------------------- pictures


def picture(store: Any, node_text: str, depth: int, kind: str = "table", as_of: str | None = None) -> Picture:
    """The graph around a node: tables and jobs (dataset/job node ids) or columns (datasetField ids), both directions;
    with `as_of` (ISO 8601), through each job's version current then."""
    check_depth(depth)
    node = parse_node_id(node_text)
    instant = parse_as_of(as_of)
    if node.kind == "datasetField":
        return _column_picture(store, node, depth, as_of)
    if node.kind == "job":
        with reading(store) as conn, edges_as_of(conn, instant) as source:
            job = job_row_id(conn, node.namespace, node.name)
            outputs = [] if job is None else [dataset for _, dataset, _ in graph.job_io_of(conn, [job], source)]
            if not outputs:
                raise NotFound(f"job '{node.name}' not found in namespace '{node.namespace}' (or it has no datasets)")
        tables = [f"dataset:{n}:{m}" for n, m in _names_of(store, outputs)]
    elif node.kind == "dataset":
        tables = [node_text]
    else:
        raise BadParameter(f"nodeId {node_text!r}: pictures take dataset, datasetField or job nodes")
    nodes: dict[str, GraphNode] = {}
    edges: set[GraphEdge] = set()
    for table in tables:
        for direction in ("upstream", "downstream"):
            answer = table_lineage(store, table, direction, depth, as_of)
            start = answer["table"]
            nodes[start["nodeId"]] = GraphNode(start["nodeId"], start["name"], "DATASET", highlight=node.kind == "dataset")
            for e in answer["edges"]:
                j = e["job"]
                nodes.setdefault(j["nodeId"], GraphNode(j["nodeId"], j["name"], "JOB", highlight=j["nodeId"] == node_text))
                for end in (e["from"], e["to"]):
                    if end:
                        nodes.setdefault(end["nodeId"], GraphNode(end["nodeId"], end["name"], "DATASET"))
                if e["from"]:
                    edges.add(GraphEdge(e["from"]["nodeId"], j["nodeId"]))
                edges.add(GraphEdge(j["nodeId"], e["to"]["nodeId"]))
    return Picture(tuple(sorted(nodes.values(), key=lambda n: n.id)), tuple(sorted(edges, key=lambda e: (e.source, e.target))))


def _names_of(store: Any, dataset_ids: Sequence[int]) -> list[tuple[str, str]]:
    with reading(store) as conn:
        return sorted(graph.names(conn, s.datasets, dataset_ids).values())


def _column_picture(store: Any, node: Any, depth: int, as_of: str | None) -> Picture:
    nodes: dict[str, GraphNode] = {}
    edges: set[GraphEdge] = set()
    table = f"dataset:{node.namespace}:{node.name}"
    for direction in ("upstream", "downstream"):
        answer = column_lineage(store, table, node.field, direction, depth, direct_only=False, as_of=as_of)
        start = answer["column"]
        nodes[start["nodeId"]] = GraphNode(start["nodeId"], f"{start['dataset']}.{start['field']}", "FIELD", highlight=True)
        for e in answer["edges"]:
            for end in (e["from"], e["to"]):
                nodes.setdefault(end["nodeId"], GraphNode(end["nodeId"], f"{end['dataset']}.{end['field']}", "FIELD"))
            t = e["transformation"]
            edges.add(GraphEdge(e["from"]["nodeId"], e["to"]["nodeId"], "/".join(p for p in (t["type"], t["subtype"]) if p)))
    return Picture(
        tuple(sorted(nodes.values(), key=lambda n: n.id)), tuple(sorted(edges, key=lambda e: (e.source, e.target, e.label)))
    )
