"""Routes for the lineage questions Marquez cannot answer, under /api/v1/lineage-store (see docs/api.md)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import PlainTextResponse, Response

from consumer.api.auth import require_token
from consumer.api.errors import TOKEN_ERRORS
from consumer.api.paths import segment
from consumer.query import lineage_store as ls
from consumer.query.render import to_dot, to_svg

router = APIRouter(prefix="/api/v1/lineage-store", tags=["Lineage store"])

Table = Query(..., description="dataset:NAMESPACE:NAME, NAMESPACE:NAME, or an unambiguous name / database.table")
Direction = Query("upstream", description="upstream (where it comes from) or downstream (where it goes)")
Depth = Query(20, ge=0, le=100)
AsOf = Query(
    None,
    description="An ISO-8601 instant (e.g. 2026-03-01T12:00:00Z; no offset: UTC): answer with each job's version current "
    "at that instant (its latest run created by then, a run finished by then first) instead of today's. Absent: today's lineage.",
)
SnapshotsAsOf = Query(
    None,
    description="An ISO-8601 instant (e.g. 2026-03-01T12:00:00Z; no offset: UTC): only the steps of runs created at or "
    "before it. Absent: every run's.",
)


@router.get("/tables")
def tables(
    request: Request,
    table: str = Table,
    direction: Literal["upstream", "downstream"] = Direction,
    depth: int = Depth,
    asOf: str | None = AsOf,
) -> dict:
    """Tables up- or downstream of a table, transitive to `depth`, with the job of every step."""
    return ls.table_lineage(request.app.state.store, table, direction, depth, asOf)


@router.get("/columns")
def columns(
    request: Request,
    table: str = Table,
    column: str = Query(..., description="the column's name"),
    direction: Literal["upstream", "downstream"] = Direction,
    depth: int = Depth,
    directOnly: bool = Query(False, description="follow only DIRECT transformations"),
    asOf: str | None = AsOf,
) -> dict:
    """Where a column's values come from (upstream) or go (downstream), each edge with its transformation."""
    return ls.column_lineage(request.app.state.store, table, column, direction, depth, directOnly, asOf)


@router.get("/snapshots")
def snapshots(
    request: Request,
    table: str = Table,
    snapshot: str = Query(..., description="the snapshot id (the snapshot facet's snapshotId)"),
    direction: Literal["upstream", "downstream"] = Direction,
    depth: int = Depth,
    asOf: str | None = SnapshotsAsOf,
) -> dict:
    """Snapshots a table snapshot was derived from (upstream) or that derive from it (downstream), with job and batch."""
    return ls.snapshot_lineage(request.app.state.store, table, snapshot, direction, depth, asOf)


@router.get("/correction-plan")
def correction_plan(
    request: Request, table: str = Table, snapshot: str = Query(...), depth: int = Query(30, ge=0, le=100)
) -> dict:
    """For a bad snapshot: downstream tables with the snapshots derived from it and where to roll back; jobs and the batch to restart from."""
    return ls.correction_plan(request.app.state.store, table, snapshot, depth)


Partition = Query(
    ...,
    description="the partition: column=value, several joined by '/' in the table's partition-column order "
    "(dt=2024-01-02, a=1/b=x); it also names the partitions below it (dt=2024-01-02 of a table partitioned by dt/hour)",
)


@router.get("/partitions")
def partitions(
    request: Request,
    table: str = Table,
    partition: str = Partition,
    direction: Literal["upstream", "downstream"] = Direction,
    depth: int = Depth,
) -> dict:
    """Partitions a table partition was derived from (upstream) or that derive from it (downstream), with job, run and batch of every step."""
    return ls.partition_lineage(request.app.state.store, table, partition, direction, depth)


@router.get("/partition-correction-plan")
def partition_correction_plan(
    request: Request, table: str = Table, partition: str = Partition, depth: int = Query(30, ge=0, le=100)
) -> dict:
    """For a bad partition: the downstream partitions derived from it (to roll back or recompute) and the jobs with the batches (runs) to rerun."""
    return ls.partition_correction_plan(request.app.state.store, table, partition, depth)


Tables = Query(..., description="repeat for every table the new job reads")


@router.get("/aligned-start")
def aligned_start(request: Request, table: list[str] = Tables) -> dict:
    """The newest mutually consistent snapshots of the given tables (where a new job reading them should start)."""
    return ls.aligned_start(request.app.state.store, table)


@router.get("/graph.svg", response_class=Response, responses={200: {"content": {"image/svg+xml": {}}}})
def graph_svg(
    request: Request, nodeId: str = Query(...), depth: int = Query(5, ge=0, le=100), asOf: str | None = AsOf
) -> Response:
    """The node's lineage (tables and jobs, or columns for a datasetField node) as an SVG picture."""
    return Response(to_svg(ls.picture(request.app.state.store, nodeId, depth, as_of=asOf)), media_type="image/svg+xml")


@router.get("/graph.dot", response_class=PlainTextResponse)
def graph_dot(
    request: Request, nodeId: str = Query(...), depth: int = Query(5, ge=0, le=100), asOf: str | None = AsOf
) -> PlainTextResponse:
    """The same graph as Graphviz DOT text."""
    picture = ls.picture(request.app.state.store, nodeId, depth, as_of=asOf)
    return PlainTextResponse(to_dot(picture), media_type="text/vnd.graphviz")


@router.delete("/jobs/{namespace}/{job}/table-lineage", dependencies=[Depends(require_token)], responses=TOKEN_ERRORS)
def delete_table_lineage(request: Request, namespace: str, job: str) -> dict:
    """Forget which datasets the job read and wrote and its column lineage (Paimon's delete-table-lineage). Needs the token."""
    namespace, job = segment(namespace), segment(job)
    return {
        "job": {"namespace": namespace, "name": job},
        "removedRows": request.app.state.store.delete_table_lineage(job, namespace),
    }


@router.delete("/jobs/{namespace}/{job}/data-lineage", dependencies=[Depends(require_token)], responses=TOKEN_ERRORS)
def delete_data_lineage(request: Request, namespace: str, job: str) -> dict:
    """Forget the snapshots and partitions the job's runs consumed and produced (Paimon's delete-data-lineage). Needs the token."""
    namespace, job = segment(namespace), segment(job)
    return {
        "job": {"namespace": namespace, "name": job},
        "removedRows": request.app.state.store.delete_data_lineage(job, namespace),
    }
