"""Marquez's `/lineage` (jobs and datasets) and `/column-lineage` (fields) graphs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Select, select

from consumer.query import graph
from consumer.query.as_of import EdgeSource, edges_as_of, parse_as_of
from consumer.query.db import check_depth, ids_in, iso, reading, statement_cache
from consumer.query.errors import BadParameter
from consumer.query.marquez.loaders import dataset_row, dataset_select, job_select, load_datasets, load_jobs
from consumer.query.nodeid import dataset_id, field_id, job_id, parse_node_id
from consumer.store import schema as s
from consumer.store.lookup import existing_job_id, present


def lineage_graph(store: Any, node_text: str, depth: int, as_of: str | None = None) -> dict:
    """Marquez `GET /lineage`: the jobs connected to the node within `depth` job-hops, their datasets; with
    `as_of` (ISO 8601), the edges of each job's version current then (the nodes' data stays today's)."""
    check_depth(depth)
    node = parse_node_id(node_text)
    if node.kind not in ("dataset", "job"):
        raise BadParameter(f"nodeId {node_text!r}: /lineage takes a dataset or job node")
    instant = parse_as_of(as_of)
    with reading(store) as conn, edges_as_of(conn, instant) as source:
        if node.kind == "dataset":
            start_dataset = dataset_row(conn, node.namespace, node.name).id
            start_jobs = graph.jobs_touching(conn, start_dataset, source)
        else:
            start_dataset, start_jobs = None, [existing_job_id(conn, node.namespace, node.name)]
        job_ids = graph.connected_jobs(conn, start_jobs, depth, source)
        io = graph.job_io_of(conn, job_ids, source)
        dataset_ids = sorted({d for _, d, _ in io} | ({start_dataset} if start_dataset else set()))
        job_rows = conn.execute(_jobs_query(conn), {"jobs": job_ids}).all() if job_ids else []
        dataset_rows = conn.execute(_datasets_query(conn), {"datasets": dataset_ids}).all() if dataset_ids else []
        nodes = [
            ("JOB", job_id(r.namespace, r.name), data) for r, data in zip(job_rows, load_jobs(conn, job_rows, io), strict=True)
        ]
        nodes += [
            ("DATASET", dataset_id(r.namespace, r.name), data)
            for r, data in zip(dataset_rows, load_datasets(conn, dataset_rows, with_column_lineage=False), strict=True)
        ]
    node_of_job = {r.id: job_id(r.namespace, r.name) for r in job_rows}
    node_of_dataset = {r.id: dataset_id(r.namespace, r.name) for r in dataset_rows}
    edges = [
        (node_of_dataset[d], node_of_job[j]) if direction == "input" else (node_of_job[j], node_of_dataset[d])
        for j, d, direction in io
    ]
    return {"graph": _graph_nodes(nodes, edges)}


@statement_cache
def _jobs_query(dialect: str) -> Select[Any]:
    return job_select().where(ids_in(dialect, s.jobs.c.id, "jobs"))


@statement_cache
def _datasets_query(dialect: str) -> Select[Any]:
    return dataset_select().where(ids_in(dialect, s.datasets.c.id, "datasets"))


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


def _edge_key(edge: dict[str, str]) -> tuple[str, str]:
    return edge["origin"], edge["destination"]


def column_lineage_graph(store: Any, node_text: str, depth: int, with_downstream: bool, as_of: str | None = None) -> dict:
    """Marquez `GET /column-lineage`: field nodes; inEdges point (origin = the node) at upstream fields.
    Each input carries the transformation type, subtype, description and masking Marquez drops. With `as_of`
    (ISO 8601): the edges of each job's version current then, from the fields the store knew then."""
    check_depth(depth)
    node = parse_node_id(node_text)
    instant = parse_as_of(as_of)
    with reading(store) as conn, edges_as_of(conn, instant) as source:
        start_fields = _start_fields(conn, node, node_text, source)
        edges = graph.field_edges(conn, start_fields, depth, upstream=True, edges=source)
        if with_downstream:
            edges += graph.field_edges(conn, start_fields, depth, upstream=False, edges=source)
        fields = graph.describe_fields(conn, {e.output_field for e in edges} | {e.input_field for e in edges} | set(start_fields))
    return {"graph": _field_graph(fields, edges)}


def _start_fields(conn: Connection, node: Any, node_text: str, source: EdgeSource) -> list[int]:
    if node.kind == "run":
        raise BadParameter(f"nodeId {node_text!r}: /column-lineage takes a dataset, datasetField or job node")
    known = [] if source.instant is None else [s.dataset_fields.c.created_at <= source.instant]
    if node.kind == "job":
        job = existing_job_id(conn, node.namespace, node.name)
        if source.is_current:
            outputs: Any = select(s.job_io.c.dataset_id).where(s.job_io.c.job_id == job, s.job_io.c.direction == "output")
        else:
            outputs = sorted({dataset for _, dataset, direction in graph.job_io_of(conn, [job], source) if direction == "output"})
        query = select(s.dataset_fields.c.id).where(s.dataset_fields.c.dataset_id.in_(outputs), *known)
        return list(conn.execute(query).scalars())
    dataset = dataset_row(conn, node.namespace, node.name)
    fields = select(s.dataset_fields.c.id).where(s.dataset_fields.c.dataset_id == dataset.id, *known)
    if node.kind == "datasetField":
        found = conn.execute(fields.where(s.dataset_fields.c.name == node.field)).scalar()
        when = "" if source.instant is None else f" at {iso(source.instant)}"
        return [present(found, f"field '{node.field}' not found in dataset '{node.name}' of namespace '{node.namespace}'{when}")]
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
            input_fields.append(
                {
                    "namespace": source.namespace,
                    "dataset": source.dataset,
                    "datasetVersion": None,
                    "field": source.field,
                    "transformationDescription": first.description,
                    "transformationType": first.type,
                    "transformations": [
                        {"type": t.type, "subtype": t.subtype, "description": t.description or "", "masking": bool(t.masking)}
                        for t in steps
                    ],
                }
            )
        data = {
            "type": "DATASET_FIELD",
            "namespace": f.namespace,
            "dataset": f.dataset,
            "datasetVersion": None,
            "field": f.field,
            "fieldType": f.type,
            "transformationDescription": None,
            "transformationType": None,
            "inputFields": input_fields,
        }
        in_edges: list[dict[str, str]] = [
            {"origin": node_id, "destination": field_id(fields[i].namespace, fields[i].dataset, fields[i].field)}
            for i in inputs[row_id]
        ]
        out_edges: list[dict[str, str]] = [
            {"origin": node_id, "destination": field_id(fields[o].namespace, fields[o].dataset, fields[o].field)}
            for o in downstream[row_id]
        ]
        in_edges.sort(key=_edge_key)
        out_edges.sort(key=_edge_key)
        nodes.append(
            {
                "id": node_id,
                "type": "DATASET_FIELD",
                "data": data,
                "inEdges": in_edges,
                "outEdges": out_edges,
            }
        )
    return sorted(nodes, key=lambda n: n["id"])


def _field_sort(f: Any) -> tuple[str, str, str]:
    return f.namespace, f.dataset, f.field
