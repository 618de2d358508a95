"""Realistic Spark-like OpenLineage events for tests and benchmarks: what the emitter sends for one
write action (START / COMPLETE with schema, symlinks, columnLineage and snapshot facets) or one
streaming micro-batch (RUNNING with the microBatch run facet)."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from importlib import metadata
from typing import Any

PRODUCER = "https://github.com/spark-lineage/spark-lineage/tree/main/emitter"
CORE_SCHEMA = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
FACETS = "https://openlineage.io/spec/facets"
CUSTOM = "https://raw.githubusercontent.com/spark-lineage/spark-lineage/main/schemas/1-0-0"
WAREHOUSE = "/tmp/warehouse"
BASE_TIME = datetime(2026, 1, 1, tzinfo=timezone.utc)


@functools.cache
def _adapter_version() -> str:
    return metadata.version("spark-lineage")


def _facet(url: str, **fields: Any) -> dict[str, Any]:
    return {"_producer": PRODUCER, "_schemaURL": url, **fields}


def table(
    database: str,
    name: str,
    columns: Sequence[str],
    *,
    snapshot: str | None = None,
    kind: str = "content",
    batch_id: int | None = None,
    partitions: list[dict[str, str]] | None = None,
    location: str | None = None,
) -> dict[str, Any]:
    """A catalog table stored as files: namespace `file`, name = its location (default: under WAREHOUSE),
    symlink to db.table."""
    facets: dict[str, Any] = {
        "schema": _facet(
            f"{FACETS}/1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet",
            fields=[{"name": column, "type": "string"} for column in columns],
        ),
        "symlinks": _facet(
            f"{FACETS}/1-0-1/SymlinksDatasetFacet.json#/$defs/SymlinksDatasetFacet",
            identifiers=[{"namespace": "spark_catalog", "name": f"{database}.{name}", "type": "TABLE"}],
        ),
        "dataSource": _facet(
            f"{FACETS}/1-0-1/DatasourceDatasetFacet.json#/$defs/DatasourceDatasetFacet", name="file", uri="file"
        ),
    }
    if snapshot is not None:
        snapshot_facet = _facet(f"{CUSTOM}/SnapshotDatasetFacet.json#/$defs/SnapshotDatasetFacet", snapshotId=snapshot, kind=kind)
        if batch_id is not None:
            snapshot_facet["batchId"] = batch_id
        if partitions is not None:
            snapshot_facet["partitions"] = partitions
        facets["snapshot"] = snapshot_facet
        facets["version"] = _facet(
            f"{FACETS}/1-0-1/DatasetVersionDatasetFacet.json#/$defs/DatasetVersionDatasetFacet", datasetVersion=snapshot
        )
    return {"namespace": "file", "name": location or f"{WAREHOUSE}/{database}.db/{name}", "facets": facets}


def transformation(
    kind: str = "DIRECT", subtype: str = "IDENTITY", description: str = "", masking: bool = False
) -> dict[str, Any]:
    return {"type": kind, "subtype": subtype, "description": description, "masking": masking}


Source = tuple[dict[str, Any], str] | tuple[dict[str, Any], str, dict[str, Any]]


def with_column_lineage(
    output: dict[str, Any], lineage: dict[str, list[Source]], indirect: Sequence[tuple[dict[str, Any], str, str]] = ()
) -> dict[str, Any]:
    """`lineage`: output column -> [(input dataset, input column[, transformation(...)])], DIRECT/IDENTITY
    when the transformation is left out; `indirect`: (input dataset, column, subtype) dataset-level inputs."""

    def field(dataset: dict[str, Any], column: str, how: dict[str, Any]) -> dict[str, Any]:
        return {"namespace": dataset["namespace"], "name": dataset["name"], "field": column, "transformations": [how]}

    facet = _facet(
        f"{FACETS}/1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet",
        fields={
            column: {
                "inputFields": [
                    field(source[0], source[1], source[2] if len(source) == 3 else transformation()) for source in sources
                ]
            }
            for column, sources in lineage.items()
        },
    )
    if indirect:
        facet["dataset"] = [field(dataset, column, transformation("INDIRECT", subtype)) for dataset, column, subtype in indirect]
    return {**output, "facets": {**output["facets"], "columnLineage": facet}}


def run_event(
    event_type: str,
    job: str,
    inputs: Sequence[dict[str, Any]],
    outputs: Sequence[dict[str, Any]],
    *,
    run_id: str,
    at: datetime,
    streaming: bool = False,
    micro_batch: dict[str, Any] | None = None,
    parent_run_id: str | None = None,
    app: str = "app",
) -> dict[str, Any]:
    run_facets: dict[str, Any] = {
        "processing_engine": _facet(
            f"{FACETS}/1-1-1/ProcessingEngineRunFacet.json#/$defs/ProcessingEngineRunFacet",
            version="4.0.0",
            name="spark",
            openlineageAdapterVersion=_adapter_version(),
        ),
    }
    if parent_run_id:
        run_facets["parent"] = _facet(
            f"{FACETS}/1-2-0/ParentRunFacet.json#/$defs/ParentRunFacet",
            run={"runId": parent_run_id},
            job={"namespace": "spark", "name": app},
        )
    if micro_batch is not None:
        run_facets["microBatch"] = _facet(f"{CUSTOM}/MicroBatchRunFacet.json#/$defs/MicroBatchRunFacet", **micro_batch)
    return {
        "eventType": event_type,
        "eventTime": at.isoformat().replace("+00:00", "Z"),
        "producer": PRODUCER,
        "schemaURL": CORE_SCHEMA,
        "run": {"runId": run_id, "facets": run_facets},
        "job": {
            "namespace": "spark",
            "name": job,
            "facets": {
                "jobType": _facet(
                    f"{FACETS}/2-0-4/JobTypeJobFacet.json#/$defs/JobTypeJobFacet",
                    processingType="STREAMING" if streaming else "BATCH",
                    integration="SPARK",
                    jobType="JOB",
                ),
            },
        },
        "inputs": list(inputs),
        "outputs": list(outputs),
    }


def batch_write(
    job: str,
    inputs: Sequence[dict[str, Any]],
    output: dict[str, Any],
    *,
    run_id: str | None = None,
    start: datetime = BASE_TIME,
    duration: timedelta = timedelta(seconds=5),
) -> list[dict[str, Any]]:
    """START then COMPLETE of one batch write action."""
    run_id = run_id or str(uuid.uuid4())
    return [
        run_event("START", job, inputs, [output], run_id=run_id, at=start),
        run_event("COMPLETE", job, inputs, [output], run_id=run_id, at=start + duration),
    ]


def wide_event(index: int, columns: int = 25) -> dict[str, Any]:
    """A COMPLETE event with `columns` column-lineage edges plus two indirect inputs (for the benchmark)."""
    names = [f"c{i}" for i in range(columns)]
    left = table("bench", f"src_{index % 50}", names)
    right = table("bench", f"dim_{index % 7}", ["k", "v"])
    output = table("bench", f"out_{index % 200}", names, snapshot=f"s{index}")
    output = with_column_lineage(
        output, {name: [(left, name)] for name in names}, indirect=[(left, "c0", "JOIN"), (right, "k", "JOIN")]
    )
    return run_event(
        "COMPLETE",
        f"app.insert_into.out_{index % 200}",
        [left, right],
        [output],
        run_id=str(uuid.UUID(int=index + 1)),
        at=BASE_TIME + timedelta(seconds=index),
    )
