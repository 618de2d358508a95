"""OpenLineage facets built from openlineage-python's classes, from plain captured data.

Every builder is pure. Every string that ends up in a facet from Spark options, conf or an
error passes through `emitter.redaction.redact`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import attr
from openlineage.client.facet_v2 import (
    DatasetFacet,
    RunFacet,
    catalog_dataset,
    column_lineage_dataset,
    dataset_version_dataset,
    datasource_dataset,
    error_message_run,
    job_type_job,
    output_statistics_output_dataset,
    parent_run,
    processing_engine_run,
    schema_dataset,
    storage_dataset,
    symlinks_dataset,
)

from emitter.capture import ConnectSession, RelationInfo, SchemaField, TableRef
from emitter.catalogs import SESSION_CATALOG, CatalogInfo
from emitter.naming import table_namespace
from emitter.redaction import redact
from emitter.snapshots import MicroBatch, Snapshot
from emitter.version import installed_version

# The emitter's folder in the project's repository; the release itself is in processing_engine's
# openlineageAdapterVersion, read from the installed distribution (pyproject.toml is the one place).
PRODUCER = "https://github.com/spark-lineage/spark-lineage/tree/main/emitter"
ADAPTER_VERSION = installed_version()
# our custom facets' JSON Schemas (schemas/1-0-0/ in the repository, as raw files on its main branch;
# a changed schema gets a new version folder); `_schemaURL` = `$id#/$defs/<Facet>`
TABLE_FORMATS = ("iceberg", "delta")  # the formats whose tables get `storage` and `catalog` facets
SCHEMA_BASE_URL = "https://raw.githubusercontent.com/spark-lineage/spark-lineage/main/schemas/1-0-0"


def schema_facet(fields: Sequence[SchemaField]) -> schema_dataset.SchemaDatasetFacet:
    return schema_dataset.SchemaDatasetFacet(fields=[_schema_field(f) for f in fields], producer=PRODUCER)


def _schema_field(field: SchemaField) -> schema_dataset.SchemaDatasetFacetFields:
    nested = [_schema_field(child) for child in field.fields] or None
    return schema_dataset.SchemaDatasetFacetFields(name=field.name, type=field.type, fields=nested)


def symlinks_facet(table: TableRef, namespace: str) -> symlinks_dataset.SymlinksDatasetFacet:
    identifier = symlinks_dataset.Identifier(namespace=namespace, name=table.qualified, type="TABLE")
    return symlinks_dataset.SymlinksDatasetFacet(identifiers=[identifier], producer=PRODUCER)


def table_format_facets(relation: RelationInfo, snapshot: Snapshot | None, catalogs: Sequence[CatalogInfo]) -> dict[str, Any]:
    """`{"storage": ..., "catalog": ...}` of an Iceberg or Delta table (known by its format, or by the
    snapshot its format's log gave): the storage layer, and the catalog the table was named through,
    which a rollback statement must name. A table of a catalog other than the session's with a
    warehouse also gets its `symlinks` in that warehouse's namespace: `db.t` of two catalogs are two
    tables. Empty for any other relation."""
    layer = next(
        (kind for kind in ((relation.format or "").lower(), snapshot.kind if snapshot else "") if kind in TABLE_FORMATS), None
    )
    if layer is None:
        return {}
    built: dict[str, Any] = {
        "storage": storage_dataset.StorageDatasetFacet(
            storageLayer=layer, fileFormat="parquet" if layer == "delta" else None, producer=PRODUCER
        )
    }
    table = relation.table
    if table is not None and table.database:
        name = table.catalog or SESSION_CATALOG
        known = next((catalog for catalog in catalogs if catalog.name == name), None)
        built["catalog"] = catalog_dataset.CatalogDatasetFacet(
            framework=layer,
            type=known.type if known else "unknown",
            name=name,
            warehouseUri=known.warehouse if known else None,
            source="spark",
            producer=PRODUCER,
        )
        if known is not None and known.warehouse and name != SESSION_CATALOG:
            built["symlinks"] = symlinks_facet(table, table_namespace(known.warehouse, None))
    return built


def datasource_facet(namespace: str) -> datasource_dataset.DatasourceDatasetFacet:
    return datasource_dataset.DatasourceDatasetFacet(name=namespace, uri=redact(namespace), producer=PRODUCER)


def output_statistics_facet(
    metrics: Mapping[str, int],
) -> output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet | None:
    if not metrics:
        return None
    return output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
        rowCount=metrics.get("numOutputRows"),
        size=metrics.get("numOutputBytes"),
        fileCount=metrics.get("numFiles"),
        producer=PRODUCER,
    )


def job_type_facet(processing_type: str, job_type: str = "JOB") -> job_type_job.JobTypeJobFacet:
    return job_type_job.JobTypeJobFacet(processingType=processing_type, integration="SPARK", jobType=job_type, producer=PRODUCER)


def processing_engine_facet(spark_version: str) -> processing_engine_run.ProcessingEngineRunFacet:
    return processing_engine_run.ProcessingEngineRunFacet(
        version=spark_version, name="spark", openlineageAdapterVersion=ADAPTER_VERSION, producer=PRODUCER
    )


def parent_facet(run_id: str, namespace: str, name: str, root: tuple[str, str, str] | None = None) -> parent_run.ParentRunFacet:
    """Parent run facet; `root` is (run_id, namespace, name) of the topmost run, defaulting to the parent."""
    root_run_id, root_namespace, root_name = root or (run_id, namespace, name)
    return parent_run.ParentRunFacet(
        run=parent_run.Run(runId=run_id),
        job=parent_run.Job(namespace=namespace, name=name),
        root=parent_run.Root(
            run=parent_run.RootRun(runId=root_run_id),
            job=parent_run.RootJob(namespace=root_namespace, name=root_name),
        ),
        producer=PRODUCER,
    )


def error_facet(message: str, stack_trace: str | None) -> error_message_run.ErrorMessageRunFacet:
    return error_message_run.ErrorMessageRunFacet(
        message=redact(message), programmingLanguage="JAVA", stackTrace=redact(stack_trace), producer=PRODUCER
    )


Location = tuple[str, str]  # (namespace, name)


class _Transformation(Protocol):
    @property
    def type(self) -> str: ...
    @property
    def subtype(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def masking(self) -> bool: ...


class _Edge(Protocol):
    @property
    def relation(self) -> Any: ...
    @property
    def column(self) -> str: ...
    @property
    def transformations(self) -> tuple[_Transformation, ...]: ...


def column_lineage_facet(
    columns: Mapping[str, Iterable[_Edge]],
    dataset: Iterable[_Edge],
    locate: Callable[[Any], Location | list[Location] | None],
) -> column_lineage_dataset.ColumnLineageDatasetFacet:
    """The columnLineage facet from engine edges; `locate` names an edge's leaf relation
    (namespace, name), or every dataset it stands for (a Kafka source of several topics), or
    returns None for relations that are not datasets (LocalRelation). Each relation is located,
    and each distinct transformation converted, once per facet."""
    builder = _FieldsBuilder(locate)
    fields = {}
    for column, edges in columns.items():
        inputs = builder.input_fields(edges)
        if inputs:  # a source-less column (a literal, current_timestamp()) has no lineage to tell
            fields[column] = column_lineage_dataset.Fields(inputFields=inputs)
    return column_lineage_dataset.ColumnLineageDatasetFacet(
        fields=fields, dataset=builder.input_fields(dataset), producer=PRODUCER
    )


class _FieldsBuilder:
    """The input fields of one facet's edges, with what repeats across its columns memoized:
    where each relation is (by identity: engine relations are plan nodes) and each converted
    transformation (engine transformations are frozen values)."""

    def __init__(self, locate: Callable[[Any], Location | list[Location] | None]) -> None:
        self._locate = locate
        self._locations: dict[int, list[Location]] = {}
        self._converted: dict[Any, column_lineage_dataset.Transformation] = {}

    def _where(self, relation: Any) -> list[Location]:
        found = self._locations.get(id(relation))
        if found is None:
            located = self._locate(relation)
            found = located if isinstance(located, list) else [located] if located is not None else []
            self._locations[id(relation)] = found
        return found

    def input_fields(self, edges: Iterable[_Edge]) -> list[column_lineage_dataset.InputField]:
        merged: dict[tuple[str, str, str], list[column_lineage_dataset.Transformation]] = {}
        converted_of = self._converted
        for edge in edges:
            for where in self._where(edge.relation):
                transformations = merged.setdefault((*where, edge.column), [])
                for transformation in edge.transformations:
                    converted = converted_of.get(transformation)
                    if converted is None:
                        converted = converted_of[transformation] = _transformation(transformation)
                    if converted not in transformations:
                        transformations.append(converted)
        return [
            column_lineage_dataset.InputField(namespace=ns, name=name, field=column, transformations=transformations)
            for (ns, name, column), transformations in merged.items()
        ]


def _transformation(transformation: _Transformation) -> column_lineage_dataset.Transformation:
    return column_lineage_dataset.Transformation(
        type=transformation.type,
        subtype=transformation.subtype,
        description=redact(transformation.description) if transformation.description else None,
        masking=bool(transformation.masking),
    )


@attr.define
class SnapshotDatasetFacet(DatasetFacet):
    """Which committed state of a dataset a run consumed or produced (schemas/1-0-0/SnapshotDatasetFacet.json)."""

    snapshotId: str  # noqa: N815
    kind: str
    batchId: int | None = attr.field(default=None)  # noqa: N815
    partitions: list[dict[str, str | None]] | None = attr.field(default=None)
    startOffset: Any = attr.field(default=None)  # noqa: N815
    endOffset: Any = attr.field(default=None)  # noqa: N815

    @staticmethod
    def _get_schema() -> str:
        return f"{SCHEMA_BASE_URL}/SnapshotDatasetFacet.json#/$defs/SnapshotDatasetFacet"


@attr.define
class MicroBatchRunFacet(RunFacet):
    """One micro-batch of a streaming run (schemas/1-0-0/MicroBatchRunFacet.json)."""

    batchId: int  # noqa: N815
    queryId: str  # noqa: N815
    runId: str  # noqa: N815
    numInputRows: int  # noqa: N815
    checkpointLocation: str | None = attr.field(default=None)  # noqa: N815
    durationMs: int | None = attr.field(default=None)  # noqa: N815

    @staticmethod
    def _get_schema() -> str:
        return f"{SCHEMA_BASE_URL}/MicroBatchRunFacet.json#/$defs/MicroBatchRunFacet"


def snapshot_facet(snapshot: Snapshot) -> SnapshotDatasetFacet:
    """The `snapshot` dataset facet (null fields are dropped when serialized)."""
    return SnapshotDatasetFacet(
        snapshotId=snapshot.snapshot_id,
        kind=snapshot.kind,
        batchId=snapshot.batch_id,
        partitions=[dict(values) for values in snapshot.partitions] if snapshot.partitions is not None else None,
        startOffset=snapshot.start_offset if snapshot.has_offsets else None,
        endOffset=snapshot.end_offset if snapshot.has_offsets else None,
        producer=PRODUCER,
    )


def version_facet(snapshot: Snapshot) -> dataset_version_dataset.DatasetVersionDatasetFacet:
    """The standard `version` dataset facet carrying the same id."""
    return dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=snapshot.snapshot_id, producer=PRODUCER)


def snapshot_facets(snapshot: Snapshot | None) -> dict[str, Any]:
    """`{"snapshot": ..., "version": ...}` to merge into a dataset's facets; empty when unknown."""
    if snapshot is None:
        return {}
    return {"snapshot": snapshot_facet(snapshot), "version": version_facet(snapshot)}


def micro_batch_facet(batch: MicroBatch) -> MicroBatchRunFacet:
    return MicroBatchRunFacet(
        batchId=batch.batch_id,
        queryId=batch.query_id,
        runId=batch.run_id,
        numInputRows=max(batch.num_input_rows, 0),
        checkpointLocation=batch.checkpoint_location,
        durationMs=max(batch.duration_ms, 0) if batch.duration_ms is not None else None,
        producer=PRODUCER,
    )


@attr.define
class SparkConnectSessionRunFacet(RunFacet):
    """The Spark Connect session whose client ran the run (schemas/SparkConnectSessionRunFacet.json)."""

    sessionId: str  # noqa: N815
    userId: str | None = attr.field(default=None)  # noqa: N815 - None when the client sent none

    @staticmethod
    def _get_schema() -> str:
        return f"{SCHEMA_BASE_URL}/SparkConnectSessionRunFacet.json#/$defs/SparkConnectSessionRunFacet"


def connect_session_facets(session: ConnectSession | None) -> dict[str, Any]:
    """`{"sparkConnectSession": ...}` to merge into a run's facets; empty outside Spark Connect."""
    if session is None:
        return {}
    return {
        "sparkConnectSession": SparkConnectSessionRunFacet(
            sessionId=session.session_id, userId=session.user_id or None, producer=PRODUCER
        )
    }
