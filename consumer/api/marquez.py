"""Marquez-compatible routes under /api/v1 (and Marquez's /api/v2beta/search): shapes, ordering and paging
as Marquez serves them, so Marquez Web and marquez-python work unchanged. Tag writes need the bearer token.
Each route only parses input and hands it to consumer.query.marquez."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from consumer import json_codec
from consumer.api.auth import require_token
from consumer.api.errors import TOKEN_ERRORS
from consumer.api.paths import segment
from consumer.query import marquez as q
from consumer.query.db import MAX_OFFSET
from consumer.query.errors import BadParameter
from consumer.store import tags

router = APIRouter(prefix="/api/v1")
search_v2beta = APIRouter(prefix="/api/v2beta/search", tags=["Search"])
Guarded = [Depends(require_token)]

Limit = Query(100, ge=0, le=10_000, description="The number of results to return from offset.")
Offset = Query(0, ge=0, le=MAX_OFFSET, description="The initial position from which to return results.")
LastRunStates = Query(None, description="Only jobs whose latest run is in one of these states.")
Depth = Query(20, ge=0, le=100, description="Depth of the lineage graph to create.")
AsOf = Query(
    None,
    description="An ISO-8601 instant (e.g. 2026-03-01T12:00:00Z; no offset: UTC). The graph's edges are each job's "
    "version current at that instant (its latest run created by then, a run finished by then first) instead of today's; "
    "the nodes' data (facets, latest run, fields' types) stays today's. Absent: today's lineage.",
)
MAX_SEARCH_CHARACTERS = 200  # longer search patterns are refused (400)


def _store(request: Request) -> Any:
    return request.app.state.store


@router.get("/namespaces", tags=["Namespaces"])
def list_namespaces(request: Request, limit: int = Limit, offset: int = Offset) -> dict:
    return q.list_namespaces(_store(request), limit, offset)


@router.get("/namespaces/{namespace}", tags=["Namespaces"])
def get_namespace(request: Request, namespace: str) -> dict:
    return q.get_namespace(_store(request), segment(namespace))


@router.get("/tags", tags=["Tags"])
def list_tags(request: Request, limit: int = Limit, offset: int = Offset) -> dict:
    return q.list_tags(_store(request), limit, offset)


@router.get("/jobs", tags=["Jobs"])
def list_all_jobs(
    request: Request,
    limit: int = Limit,
    offset: int = Offset,
    lastRunStates: list[str] | None = LastRunStates,
) -> dict:
    return q.list_jobs(_store(request), None, limit, offset, _states(lastRunStates))


@router.get("/namespaces/{namespace}/jobs", tags=["Jobs"])
def list_jobs(
    request: Request,
    namespace: str,
    limit: int = Limit,
    offset: int = Offset,
    lastRunStates: list[str] | None = LastRunStates,
) -> dict:
    return q.list_jobs(_store(request), segment(namespace), limit, offset, _states(lastRunStates))


@router.get("/namespaces/{namespace}/jobs/{job}", tags=["Jobs"])
def get_job(request: Request, namespace: str, job: str) -> dict:
    return q.get_job(_store(request), segment(namespace), segment(job))


@router.get("/namespaces/{namespace}/jobs/{job}/runs", tags=["Jobs"])
def list_runs(request: Request, namespace: str, job: str, limit: int = Limit, offset: int = Offset) -> dict:
    return q.list_runs(_store(request), segment(namespace), segment(job), limit, offset)


@router.get("/jobs/runs/{run_id}", tags=["Jobs"])
def get_run(request: Request, run_id: str) -> dict:
    return q.get_run(_store(request), run_id)


@router.get("/jobs/runs/{run_id}/facets", tags=["Jobs"])
def get_run_facets(request: Request, run_id: str, type: Literal["run", "job"] = Query("run")) -> dict:
    return q.run_facets(_store(request), run_id, type)


@router.get("/namespaces/{namespace}/datasets", tags=["Datasets"])
def list_datasets(request: Request, namespace: str, limit: int = Limit, offset: int = Offset) -> dict:
    return q.list_datasets(_store(request), segment(namespace), limit, offset)


@router.get("/namespaces/{namespace}/datasets/{dataset}", tags=["Datasets"])
def get_dataset(request: Request, namespace: str, dataset: str) -> dict:
    return q.get_dataset(_store(request), segment(namespace), segment(dataset))


@router.get("/namespaces/{namespace}/datasets/{dataset}/versions", tags=["Datasets"])
def list_dataset_versions(request: Request, namespace: str, dataset: str, limit: int = Limit, offset: int = Offset) -> dict:
    return q.list_dataset_versions(_store(request), segment(namespace), segment(dataset), limit, offset)


class GraphResponse(JSONResponse):
    """The graphs are large plain-JSON dicts (a hub's answer is ~0.7 MB): written straight out by the
    fast encoder, without FastAPI's per-value jsonable_encoder pass, which took as long as the query."""

    def render(self, content: Any) -> bytes:
        return json_codec.dumps_bytes(content)


@router.get("/lineage", tags=["Lineage"], response_class=GraphResponse)
def get_lineage(
    request: Request,
    nodeId: str = Query(..., description="dataset:NS:NAME or job:NS:NAME"),
    depth: int = Depth,
    asOf: str | None = AsOf,
) -> GraphResponse:
    return GraphResponse(q.lineage_graph(_store(request), nodeId, depth, asOf))


@router.get("/column-lineage", tags=["Column lineage"], response_class=GraphResponse)
def get_column_lineage(
    request: Request,
    nodeId: str = Query(..., description="dataset:NS:NAME, datasetField:NS:DATASET:FIELD or job:NS:NAME"),
    depth: int = Depth,
    withDownstream: bool = Query(False),
    asOf: str | None = AsOf,
) -> GraphResponse:
    return GraphResponse(q.column_lineage_graph(_store(request), nodeId, depth, withDownstream, asOf))


@router.get("/events/lineage", tags=["Events"])
def list_lineage_events(
    request: Request,
    before: str | None = Query(None, description="ISO-8601 instant; events strictly before it"),
    after: str | None = Query(None, description="ISO-8601 instant; events strictly after it"),
    sortDirection: Literal["asc", "desc"] = Query("desc"),
    limit: int = Limit,
    offset: int = Offset,
) -> dict:
    return q.lineage_events(_store(request), before, after, sortDirection, limit, offset)


@router.get("/search", tags=["Search"])
def search(
    request: Request,
    q_: str = Query(
        ...,
        alias="q",
        min_length=1,
        max_length=MAX_SEARCH_CHARACTERS,
        description="Case-insensitive pattern; % and _ are wildcards.",
    ),
    filter: Literal["dataset", "job", "DATASET", "JOB"] | None = Query(None),
    sort: Literal["name", "updated_at", "NAME", "UPDATE_AT", "UPDATED_AT"] = Query("name"),
    limit: int = Query(10, ge=0, le=10_000),
    namespace: str | None = Query(None),
) -> dict:
    return q.search(_store(request), q_, filter.upper() if filter else None, sort.lower(), limit, namespace)


@router.get("/stats/lineage-events", tags=["Stats"])
def lineage_event_stats(request: Request, period: Literal["DAY", "WEEK"] = Query("DAY"), timezone: str = Query("UTC")) -> list:
    return q.lineage_event_stats(_store(request), period, timezone, request.app.state.clock())


@router.get("/stats/{entity}", tags=["Stats"])
def entity_stats(
    request: Request,
    entity: Literal["jobs", "datasets", "sources"],
    period: Literal["DAY", "WEEK"] = Query("DAY"),
    timezone: str = Query("UTC"),
) -> list:
    return q.entity_stats(_store(request), entity, period, timezone, request.app.state.clock())


@search_v2beta.get("/jobs")
def search_jobs(
    request: Request,
    q_: str = Query(..., alias="q", min_length=1, max_length=MAX_SEARCH_CHARACTERS),
    limit: int = Query(10, ge=0, le=10_000),
) -> dict:
    """Marquez's OpenSearch-backed job search as `{hits, highlights}`, answered by the /search name match."""
    return q.search_hits(_store(request), q_, "JOB", limit)


@search_v2beta.get("/datasets")
def search_datasets(
    request: Request,
    q_: str = Query(..., alias="q", min_length=1, max_length=MAX_SEARCH_CHARACTERS),
    limit: int = Query(10, ge=0, le=10_000),
) -> dict:
    """Marquez's OpenSearch-backed dataset search as `{hits, highlights}`, answered by the /search name match."""
    return q.search_hits(_store(request), q_, "DATASET", limit)


class TagDescription(BaseModel):
    description: str | None = None


@router.put("/tags/{tag}", tags=["Tags"], dependencies=Guarded, responses=TOKEN_ERRORS)
def put_tag(request: Request, tag: str, body: TagDescription | None = None) -> dict:
    return tags.put_tag(_store(request), segment(tag), body.description if body else None)


@router.delete("/tags/{tag}", tags=["Tags"], dependencies=Guarded, responses=TOKEN_ERRORS)
def delete_tag(request: Request, tag: str) -> dict:
    return tags.delete_tag(_store(request), segment(tag))


def _tagged_job(request: Request, namespace: str, job: str, tag: str, add: bool) -> dict:
    namespace, job = segment(namespace), segment(job)
    tags.tag_job(_store(request), namespace, job, segment(tag), add=add)
    return q.get_job(_store(request), namespace, job)


def _tagged_dataset(request: Request, namespace: str, dataset: str, tag: str, add: bool, field: str | None = None) -> dict:
    namespace, dataset = segment(namespace), segment(dataset)
    if field is None:
        tags.tag_dataset(_store(request), namespace, dataset, segment(tag), add=add)
    else:
        tags.tag_field(_store(request), namespace, dataset, segment(field), segment(tag), add=add)
    return q.get_dataset(_store(request), namespace, dataset)


@router.post("/namespaces/{namespace}/jobs/{job}/tags/{tag}", tags=["Jobs"], dependencies=Guarded, responses=TOKEN_ERRORS)
@router.put("/namespaces/{namespace}/jobs/{job}/tags/{tag}", tags=["Jobs"], dependencies=Guarded, responses=TOKEN_ERRORS)
def tag_job(request: Request, namespace: str, job: str, tag: str) -> dict:
    return _tagged_job(request, namespace, job, tag, add=True)


@router.delete("/namespaces/{namespace}/jobs/{job}/tags/{tag}", tags=["Jobs"], dependencies=Guarded, responses=TOKEN_ERRORS)
def untag_job(request: Request, namespace: str, job: str, tag: str) -> dict:
    return _tagged_job(request, namespace, job, tag, add=False)


@router.post(
    "/namespaces/{namespace}/datasets/{dataset}/tags/{tag}", tags=["Datasets"], dependencies=Guarded, responses=TOKEN_ERRORS
)
def tag_dataset(request: Request, namespace: str, dataset: str, tag: str) -> dict:
    return _tagged_dataset(request, namespace, dataset, tag, add=True)


@router.delete(
    "/namespaces/{namespace}/datasets/{dataset}/tags/{tag}", tags=["Datasets"], dependencies=Guarded, responses=TOKEN_ERRORS
)
def untag_dataset(request: Request, namespace: str, dataset: str, tag: str) -> dict:
    return _tagged_dataset(request, namespace, dataset, tag, add=False)


@router.post(
    "/namespaces/{namespace}/datasets/{dataset}/fields/{field}/tags/{tag}",
    tags=["Datasets"],
    dependencies=Guarded,
    responses=TOKEN_ERRORS,
)
def tag_field(request: Request, namespace: str, dataset: str, field: str, tag: str) -> dict:
    return _tagged_dataset(request, namespace, dataset, tag, add=True, field=field)


@router.delete(
    "/namespaces/{namespace}/datasets/{dataset}/fields/{field}/tags/{tag}",
    tags=["Datasets"],
    dependencies=Guarded,
    responses=TOKEN_ERRORS,
)
def untag_field(request: Request, namespace: str, dataset: str, field: str, tag: str) -> dict:
    return _tagged_dataset(request, namespace, dataset, tag, add=False, field=field)


_RUN_STATES = {"NEW", "RUNNING", "COMPLETED", "FAILED", "ABORTED"}


def _states(values: list[str] | None) -> tuple[str, ...]:
    states = tuple(state.strip().upper() for value in values or () for state in value.split(",") if state.strip())
    unknown = sorted(set(states) - _RUN_STATES)
    if unknown:
        raise BadParameter(f"unknown run state(s) {', '.join(unknown)}; expected some of {', '.join(sorted(_RUN_STATES))}")
    return states
