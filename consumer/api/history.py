"""Routes for lineage history (see docs/api.md): a job's lineage versions, what changed between two of
them, and a dataset's per-field history. Beside Marquez's routes under /api/v1/namespaces, with
names Marquez does not use; each route only parses input and hands it to consumer.query.history."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from consumer.api.paths import segment
from consumer.query import history
from consumer.query.db import MAX_OFFSET, MAX_PAGE

router = APIRouter(prefix="/api/v1/namespaces/{namespace}", tags=["Lineage history"])


class Answer(BaseModel):
    """The answers' JSON names are camelCase, as Marquez's."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class Named(Answer):
    namespace: str
    name: str


class FieldName(Answer):
    namespace: str
    dataset: str
    field: str | None = Field(description="null: the dataset as a whole (its dataset-level inputs)")


class InputFieldName(Answer):
    namespace: str
    dataset: str
    field: str


class Transformation(Answer):
    type: str = Field(description="DIRECT or INDIRECT")
    subtype: str = Field(description="IDENTITY, TRANSFORMATION, AGGREGATION, JOIN, FILTER, GROUP_BY, SORT, ...")
    description: str | None
    masking: bool


class JobVersion(Answer):
    version: str = Field(description="the version's hash (of what the job read, wrote and derived)")
    created_at: str = Field(description="its first run, else when the job declared it")
    first_run_at: str | None = Field(description="the earliest run that ran it (null: never run, only declared)")
    last_run_at: str | None = Field(description="the latest run that ran it")
    run_count: int = Field(description="how many runs ran it")
    current: bool = Field(description="whether the lineage walks answer on it now")
    declared: bool = Field(description="whether it is what the job's newest JobEvent declared")


class JobVersions(Answer):
    job: Named
    current_version: str | None
    total_count: int
    versions: list[JobVersion] = Field(description="oldest first (by first run)")


class DatasetsDiff(Answer):
    added: list[Named]
    removed: list[Named]


class TypedField(Answer):
    namespace: str
    dataset: str
    field: str
    type: str | None


class RetypedField(Answer):
    namespace: str
    dataset: str
    field: str
    from_: str | None = Field(alias="from")
    to: str | None


class FieldsDiff(Answer):
    added: list[TypedField]
    removed: list[TypedField]
    retyped: list[RetypedField]


class Edge(Answer):
    output: FieldName
    input: InputFieldName
    transformation: Transformation


class ChangedEdge(Answer):
    output: FieldName
    input: InputFieldName
    from_: Transformation = Field(alias="from")
    to: Transformation
    changes: list[str] = Field(description="which of type, subtype, description, masking changed")


class EdgesDiff(Answer):
    added: list[Edge]
    removed: list[Edge]
    changed: list[ChangedEdge]


class VersionDiff(Answer):
    inputs: DatasetsDiff = Field(description="datasets read")
    outputs: DatasetsDiff = Field(description="datasets written")
    fields: FieldsDiff = Field(description="fields of the datasets written, as the versions' schemas give them")
    edges: EdgesDiff = Field(description="column-lineage edges, keyed by output dataset + field and input dataset + field")


class DiffSide(Answer):
    requested: str
    version: str | None = Field(description="the version's hash; null: the job had done nothing yet at that instant")


class JobVersionDiff(Answer):
    job: Named
    from_: DiffSide = Field(alias="from")
    to: DiffSide
    diff: VersionDiff


class FieldChange(Answer):
    job: Named
    at: str | None = Field(description="the first run of the new version")
    from_version: str | None = Field(description="null: the job's first version")
    to_version: str
    added: list[Edge]
    removed: list[Edge]
    changed: list[ChangedEdge]


class FieldHistoryEntry(Answer):
    field: str | None = Field(description="null: the dataset as a whole (its dataset-level inputs)")
    changes: list[FieldChange] = Field(description="oldest first")


class FieldHistory(Answer):
    dataset: Named
    fields: list[FieldHistoryEntry]


VERSION_HELP = "a version hash (or a unique prefix of at least 7 characters), or an ISO-8601 instant (the version current then)"
FromVersion = Query(..., alias="from", min_length=1, max_length=200, description=f"the older side: {VERSION_HELP}")
ToVersion = Query(..., min_length=1, max_length=200, description=f"the newer side: {VERSION_HELP}")


@router.get("/jobs/{job}/lineage-versions", response_model=JobVersions)
def job_lineage_versions(
    request: Request,
    namespace: str,
    job: str,
    limit: int = Query(100, ge=0, le=MAX_PAGE),
    offset: int = Query(0, ge=0, le=MAX_OFFSET),
) -> Any:
    """The job's lineage versions, oldest first: each with its first and last run, its number of runs and whether it is current."""
    return history.job_versions(request.app.state.store, segment(namespace), segment(job), limit, offset)


@router.get("/jobs/{job}/lineage-versions/diff", response_model=JobVersionDiff)
def job_lineage_diff(
    request: Request,
    namespace: str,
    job: str,
    from_: str = FromVersion,
    to: str = ToVersion,
) -> Any:
    """What changed in the job's lineage between two versions: tables read and written, output fields, column-lineage edges."""
    return history.job_version_diff(request.app.state.store, segment(namespace), segment(job), from_, to)


@router.get("/datasets/{dataset}/field-history", response_model=FieldHistory)
def dataset_field_history(request: Request, namespace: str, dataset: str) -> Any:
    """Per field of the dataset: the version changes of the jobs writing it that added, removed or changed an edge into the field, and when."""
    return history.field_history(request.app.state.store, segment(namespace), segment(dataset))
