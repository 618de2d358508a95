"""Marquez's `/lineage` (jobs and datasets) and `/column-lineage` (fields) graphs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, select

from consumer.query import graph
from consumer.query.db import check_depth, in_ids, reading
from consumer.query.errors import BadParameter
from consumer.query.marquez.loaders import dataset_row, dataset_select, job_select, load_datasets, load_jobs
from consumer.query.nodeid import dataset_id, field_id, job_id, parse_node_id
from consumer.store import schema as s
from consumer.store.lookup import existing_job_id, present


def lineage_graph(store: Any, node_text: str, depth: int) -> dict:
    """Marquez `GET /lineage`: the jobs connected to the node within `depth` job-hops, their datasets."""
    check_depth(depth)
    node = parse_node_id(node_text)
    if node.kind not in ("dataset", "job"):
        raise BadParameter(f"nodeId {node_text!r}: /lineage takes a dataset or job node")
    with reading(store) as conn:
        if node.kind == "dataset":
            start_dataset = dataset_row(conn, node.namespace, node.name).id
            start_jobs = graph.jobs_touching(conn, start_dataset)
        else:
            start_dataset, start_jobs = None, [existing_job_id(conn, node.namespace, node.name)]
        job_ids = graph.connected_jobs(conn, start_jobs, depth)
        io = graph.job_io_of(conn, job_ids)
        dataset_ids = sorted({d for _, d, _ in io} | ({start_dataset} if start_dataset else set()))
        job_rows = conn.execute(job_select().where(in_ids(conn, s.jobs.c.id, job_ids))).all() if job_ids else []
        dataset_rows = (
            conn.execute(dataset_select().where(in_ids(conn, s.datasets.c.id, dataset_ids))).all() if dataset_ids else []
        )
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
            s.job_io.c.job_id == existing_job_id(conn, node.namespace, node.name), s.job_io.c.direction == "output"
        )
        return list(conn.execute(select(s.dataset_fields.c.id).where(s.dataset_fields.c.dataset_id.in_(outputs))).scalars())
    dataset = dataset_row(conn, node.namespace, node.name)
    fields = select(s.dataset_fields.c.id).where(s.dataset_fields.c.dataset_id == dataset.id)
    if node.kind == "datasetField":
        found = conn.execute(fields.where(s.dataset_fields.c.name == node.field)).scalar()
        return [present(found, f"field '{node.field}' not found in dataset '{node.name}' of namespace '{node.namespace}'")]
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
