"""Pure translation of a validated OpenLineage event into the rows the store upserts.
Nothing here touches a database: the store resolves natural keys to ids.

Facets are kept as encoded members (facet name -> that facet's JSON, `json_codec.encode_members`):
the store only merges them key by key and writes them out, and rows of this shape cross a
process boundary cheaply (consumer.ingest.prepare). The rows are NamedTuples for the same reason, and
because a batch builds thousands of them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from consumer import json_codec
from consumer.ingest.validate import DATASET_EVENT, JOB_EVENT, ValidEvent, parse_time
from consumer.partitions import partition_names
from consumer.store.rows import DatasetKey, Facets, RawEvent

if TYPE_CHECKING:
    from consumer.ingest.facet_memo import FacetMemo

_STATE_BY_EVENT_TYPE = {
    "START": "RUNNING",
    "RUNNING": "RUNNING",
    "COMPLETE": "COMPLETED",
    "FAIL": "FAILED",
    "ABORT": "ABORTED",
    "OTHER": "NEW",
}


class FieldRow(NamedTuple):
    name: str
    type: str | None
    description: str | None
    tags: Any


class DatasetRow(NamedTuple):
    namespace: str
    name: str
    # 'input' / 'output', or None for a DatasetEvent's dataset.
    direction: str | None
    type: str
    source_name: str | None
    source_uri: str | None
    description: str | None
    database_name: str
    table_name: str
    facets: Facets
    fields: tuple[FieldRow, ...] | None
    version: str | None


class JobRow(NamedTuple):
    namespace: str
    name: str
    type: str
    integration: str | None
    job_type: str | None
    description: str | None
    location: str | None
    facets: Facets
    version: str


class RunRow(NamedTuple):
    uuid: str
    event_type: str
    state: str
    facets: Facets
    nominal_start_time: datetime | None
    nominal_end_time: datetime | None
    parent_run_uuid: str | None
    parent_job_namespace: str | None
    parent_job_name: str | None
    batch_id: int | None


class ColumnEdge(NamedTuple):
    output: DatasetKey
    # None for a dataset-level (indirect) input.
    output_field: str | None
    input: DatasetKey
    input_field: str
    type: str
    subtype: str
    description: str | None
    masking: bool


class SnapshotRow(NamedTuple):
    dataset: DatasetKey
    direction: str
    snapshot_id: str
    kind: str | None
    batch_id: int | None
    partitions: Any
    start_offset: Any
    end_offset: Any
    # the canonical texts of `partitions` (consumer.partitions), for partition_lineage
    partition_names: tuple[str, ...] = ()


class EventRows(NamedTuple):
    raw: RawEvent
    event_time: datetime
    job: JobRow | None
    run: RunRow | None
    datasets: tuple[DatasetRow, ...]
    column_edges: tuple[ColumnEdge, ...]
    snapshots: tuple[SnapshotRow, ...]


def canonical_json(event: Mapping[str, Any]) -> str:
    return json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def materialize(valid: ValidEvent, raw_text: str | None = None, memo: FacetMemo | None = None) -> EventRows:
    """`raw_text`: the event exactly as received, stored and hashed as is (Kafka redelivers the
    same bytes); without it the canonical JSON (sorted keys) is. `memo`: field rows and column
    edges of schema and column-lineage facets derived before are reused."""
    event = valid.event
    payload = raw_text if raw_text is not None else canonical_json(event)
    job_ref = event.get("job") or {}
    run_ref = event.get("run") or {}
    raw = RawEvent(
        content_hash=hashlib.sha256(payload.encode()).hexdigest(),
        kind=valid.kind,
        event_type=event.get("eventType"),
        event_time=valid.event_time,
        run_uuid=run_ref.get("runId"),
        job_namespace=job_ref.get("namespace"),
        job_name=job_ref.get("name"),
        payload=payload,
    )
    if valid.kind == DATASET_EVENT:
        dataset = _dataset_row(event["dataset"], None, memo)
        return EventRows(raw, valid.event_time, None, None, (dataset,), (), ())
    inputs = tuple(_dataset_row(d, "input", memo) for d in event.get("inputs") or ())
    outputs = tuple(_dataset_row(d, "output", memo) for d in event.get("outputs") or ())
    run = None if valid.kind == JOB_EVENT else _run_row(event)
    job = _job_row(job_ref, inputs, outputs)
    batch_id = run.batch_id if run else None
    return EventRows(
        raw=raw,
        event_time=valid.event_time,
        job=job,
        run=run,
        datasets=inputs + outputs,
        column_edges=_column_edges(event.get("outputs") or (), memo),
        snapshots=tuple(_snapshots(event, batch_id)),
    )


def _job_row(job: Mapping[str, Any], inputs: tuple[DatasetRow, ...], outputs: tuple[DatasetRow, ...]) -> JobRow:
    facets = job.get("facets") or {}
    job_type = facets.get("jobType") or {}
    processing = job_type.get("processingType")
    source_code = facets.get("sourceCodeLocation") or {}
    signature = json.dumps([job["namespace"], job["name"], sorted(_key(d) for d in inputs), sorted(_key(d) for d in outputs)])
    return JobRow(
        namespace=job["namespace"],
        name=job["name"],
        type="STREAMING" if processing == "STREAMING" else "BATCH",
        integration=job_type.get("integration"),
        job_type=job_type.get("jobType"),
        description=(facets.get("documentation") or {}).get("description"),
        location=source_code.get("url"),
        facets=json_codec.encode_members(facets),
        version=hashlib.sha256(signature.encode()).hexdigest()[:32],
    )


def _run_row(event: Mapping[str, Any]) -> RunRow:
    facets = event["run"].get("facets") or {}
    event_type = event.get("eventType") or "OTHER"
    nominal = facets.get("nominalTime") or {}
    parent = facets.get("parent") or {}
    parent_job = parent.get("job") or {}
    micro_batch = facets.get("microBatch") or {}
    return RunRow(
        uuid=event["run"]["runId"].lower(),
        event_type=event_type,
        state=_STATE_BY_EVENT_TYPE[event_type],
        facets=json_codec.encode_members(facets),
        nominal_start_time=_optional_time(nominal.get("nominalStartTime")),
        nominal_end_time=_optional_time(nominal.get("nominalEndTime")),
        parent_run_uuid=((parent.get("run") or {}).get("runId") or None),
        parent_job_namespace=parent_job.get("namespace"),
        parent_job_name=parent_job.get("name"),
        batch_id=micro_batch.get("batchId"),
    )


def _optional_time(value: Any) -> datetime | None:
    return None if value is None else parse_time(value, "nominalTime")


def _dataset_row(dataset: Mapping[str, Any], direction: str | None, memo: FacetMemo | None) -> DatasetRow:
    facets = dict(dataset.get("facets") or {})
    for extra in ("inputFacets", "outputFacets"):
        facets.update(dataset.get(extra) or {})
    schema = facets.get("schema")
    source = facets.get("dataSource") or {}
    database, table = paimon_coordinates(dataset["namespace"], dataset["name"], facets.get("symlinks"))
    fields = None if schema is None else _schema_fields(schema, memo)
    return DatasetRow(
        namespace=dataset["namespace"],
        name=dataset["name"],
        direction=direction,
        type="STREAM" if "snapshot" in facets and facets["snapshot"].get("kind") == "stream-offsets" else "DB_TABLE",
        source_name=source.get("name"),
        source_uri=source.get("uri"),
        description=(facets.get("documentation") or {}).get("description"),
        database_name=database,
        table_name=table,
        facets=json_codec.encode_members(facets),
        fields=fields,
        version=_dataset_version(dataset, facets, fields),
    )


def _schema_fields(schema: Mapping[str, Any], memo: FacetMemo | None) -> tuple[FieldRow, ...]:
    if memo is None:
        return _fields(schema.get("fields") or ())
    return memo.derived("fields", schema, lambda: _fields(schema.get("fields") or ()))


def _fields(fields: Any) -> tuple[FieldRow, ...]:
    rows: dict[str, FieldRow] = {}
    for field in fields:
        name = field["name"]
        rows[name] = FieldRow(
            name, field.get("type"), field.get("description"), field.get("tags")
        )  # positional: thousands per batch
    return tuple(rows.values())


def paimon_coordinates(namespace: str, name: str, symlinks: Any) -> tuple[str, str]:
    """(database, table): the symlinks facet's TABLE identifier split on its last '.', else
    (namespace, name)."""
    for identifier in (symlinks or {}).get("identifiers") or ():
        if identifier.get("type") == "TABLE" and "." in identifier["name"]:
            database, _, table = identifier["name"].rpartition(".")
            return database, table
    return namespace, name


def _dataset_version(dataset: Mapping[str, Any], facets: Mapping[str, Any], fields: Any) -> str | None:
    version = (facets.get("version") or {}).get("datasetVersion")
    if version:
        return str(version)
    if fields is None:
        return None
    signature = repr((dataset["namespace"], dataset["name"], [(f.name, f.type, f.description, f.tags) for f in fields]))
    return hashlib.sha256(signature.encode()).hexdigest()[:32]


def _column_edges(outputs: Any, memo: FacetMemo | None) -> tuple[ColumnEdge, ...]:
    edges: list[ColumnEdge] = []
    for output in outputs:
        facet = (output.get("facets") or {}).get("columnLineage")
        if not facet:
            continue
        output_key = _key(output)
        if memo is None:
            edges.extend(_output_edges(output_key, facet))
        else:
            edges.extend(memo.derived(("edges", output_key), facet, lambda: _output_edges(output_key, facet)))  # noqa: B023 - called at once
    return tuple(edges)


def _output_edges(output_key: DatasetKey, facet: Mapping[str, Any]) -> tuple[ColumnEdge, ...]:
    edges: list[ColumnEdge] = []
    for output_field, entry in (facet.get("fields") or {}).items():
        for input_field in entry["inputFields"]:
            edges.extend(_edges_of(output_key, output_field, input_field, entry))
    for input_field in facet.get("dataset") or ():
        edges.extend(_edges_of(output_key, None, input_field, {}))
    return tuple(edges)


def _edges_of(
    output: DatasetKey, output_field: str | None, input_field: Mapping[str, Any], entry: Mapping[str, Any]
) -> list[ColumnEdge]:
    transformations = input_field.get("transformations") or [_legacy_transformation(entry, output_field)]
    input_key = _key(input_field)
    field = input_field["field"]
    return [  # positional: thousands per batch
        ColumnEdge(
            output,
            output_field,
            input_key,
            field,
            transformation.get("type") or "DIRECT",
            transformation.get("subtype") or "",
            transformation.get("description"),
            bool(transformation.get("masking", False)),
        )
        for transformation in transformations
    ]


def _legacy_transformation(entry: Mapping[str, Any], output_field: str | None) -> dict[str, Any]:
    """Pre-1.2 facets carry one transformationType/Description per output field."""
    legacy_type = entry.get("transformationType")
    if output_field is None:
        return {"type": "INDIRECT", "subtype": ""}
    return {
        "type": "DIRECT",
        "subtype": legacy_type or "",
        "description": entry.get("transformationDescription"),
    }


def _snapshots(event: Mapping[str, Any], run_batch_id: int | None) -> list[SnapshotRow]:
    rows: list[SnapshotRow] = []
    for direction, key in (("input", "inputs"), ("output", "outputs")):
        for dataset in event.get(key) or ():
            facets = dataset.get("facets") or {}
            snapshot = facets.get("snapshot")
            version = (facets.get("version") or {}).get("datasetVersion")
            if snapshot:
                batch_id = snapshot.get("batchId", run_batch_id)
                rows.append(
                    SnapshotRow(
                        dataset=_key(dataset),
                        direction=direction,
                        snapshot_id=snapshot["snapshotId"],
                        kind=snapshot.get("kind"),
                        batch_id=batch_id,
                        partitions=snapshot.get("partitions"),
                        partition_names=partition_names(snapshot.get("partitions")),
                        start_offset=snapshot.get("startOffset"),
                        end_offset=snapshot.get("endOffset"),
                    )
                )
            elif version:
                rows.append(
                    SnapshotRow(
                        dataset=_key(dataset),
                        direction=direction,
                        snapshot_id=str(version),
                        kind=None,
                        batch_id=run_batch_id,
                        partitions=None,
                        start_offset=None,
                        end_offset=None,
                    )
                )
    return rows


def _key(dataset: Any) -> DatasetKey:
    if isinstance(dataset, DatasetRow):
        return (dataset.namespace, dataset.name)
    return (dataset["namespace"], dataset["name"])
