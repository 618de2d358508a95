"""OpenLineage facets built from openlineage-python's classes, from plain captured data.

Every builder is pure. `redact` is the one place secrets are masked: every string that ends up
in a facet from Spark options or conf passes through it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from openlineage.client.facet_v2 import (
    column_lineage_dataset,
    datasource_dataset,
    error_message_run,
    job_type_job,
    output_statistics_output_dataset,
    parent_run,
    processing_engine_run,
    schema_dataset,
    symlinks_dataset,
)

from emitter.capture import SchemaField, TableRef

PRODUCER = "https://github.com/spark-lineage/spark-lineage/tree/0.1.0/emitter"
ADAPTER_VERSION = "0.1.0"
REDACTED = "***"
SECRET_KEY = re.compile(r"password|passwd|secret|token|credential|key|auth", re.IGNORECASE)
# user:password@ inside URLs (jdbc:postgresql://u:p@host, s3a://AKIA:secret@bucket)
_URL_USERINFO = re.compile(r"(?<=://)([^/@:\s]+):([^/@\s]+)@")
_INLINE_SECRET = re.compile(r"((?:password|secret|token|credential|key)[a-z_]*=)([^;&\s]+)", re.IGNORECASE)


def redact(value: Any, key: str = "") -> Any:
    """`value` with every secret masked: values under secret-looking keys, and credentials in URLs."""
    if key and SECRET_KEY.search(key):
        return REDACTED
    if isinstance(value, Mapping):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact(item) for item in value)
    if isinstance(value, str):
        return _INLINE_SECRET.sub(lambda m: m.group(1) + REDACTED, _URL_USERINFO.sub(rf"\1:{REDACTED}@", value))
    return value


def schema_facet(fields: Sequence[SchemaField]) -> schema_dataset.SchemaDatasetFacet:
    return schema_dataset.SchemaDatasetFacet(fields=[_schema_field(f) for f in fields], producer=PRODUCER)


def _schema_field(field: SchemaField) -> schema_dataset.SchemaDatasetFacetFields:
    nested = [_schema_field(child) for child in field.fields] or None
    return schema_dataset.SchemaDatasetFacetFields(name=field.name, type=field.type, fields=nested)


def symlinks_facet(table: TableRef, namespace: str) -> symlinks_dataset.SymlinksDatasetFacet:
    identifier = symlinks_dataset.Identifier(namespace=namespace, name=table.qualified, type="TABLE")
    return symlinks_dataset.SymlinksDatasetFacet(identifiers=[identifier], producer=PRODUCER)


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
    return job_type_job.JobTypeJobFacet(
        processingType=processing_type, integration="SPARK", jobType=job_type, producer=PRODUCER
    )


def processing_engine_facet(spark_version: str) -> processing_engine_run.ProcessingEngineRunFacet:
    return processing_engine_run.ProcessingEngineRunFacet(
        version=spark_version, name="spark", openlineageAdapterVersion=ADAPTER_VERSION, producer=PRODUCER
    )


def parent_facet(
    run_id: str, namespace: str, name: str, root: tuple[str, str, str] | None = None
) -> parent_run.ParentRunFacet:
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


class _Transformation(Protocol):
    type: str
    subtype: str
    description: str
    masking: bool


class _Edge(Protocol):
    relation: Any
    column: str
    transformations: tuple[_Transformation, ...]


def column_lineage_facet(
    columns: Mapping[str, Iterable[_Edge]],
    dataset: Iterable[_Edge],
    locate: Callable[[Any], tuple[str, str] | None],
) -> column_lineage_dataset.ColumnLineageDatasetFacet:
    """The columnLineage facet from engine edges; `locate` names an edge's leaf relation
    (namespace, name) or returns None for relations that are not datasets (LocalRelation)."""
    fields = {}
    for column, edges in columns.items():
        inputs = _input_fields(edges, locate)
        if inputs:  # a source-less column (a literal, current_timestamp()) has no lineage to tell
            fields[column] = column_lineage_dataset.Fields(inputFields=inputs)
    return column_lineage_dataset.ColumnLineageDatasetFacet(
        fields=fields, dataset=_input_fields(dataset, locate), producer=PRODUCER
    )


def _input_fields(
    edges: Iterable[_Edge], locate: Callable[[Any], tuple[str, str] | None]
) -> list[column_lineage_dataset.InputField]:
    merged: dict[tuple[str, str, str], list[column_lineage_dataset.Transformation]] = {}
    for edge in edges:
        where = locate(edge.relation)
        if where is None:
            continue
        transformations = merged.setdefault((*where, edge.column), [])
        for transformation in edge.transformations:
            converted = _transformation(transformation)
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
