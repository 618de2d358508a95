"""OpenLineage run events and datasets from plain data (openlineage-python's event_v2 classes).

Reusable by the batch and the streaming listener: `build_run_event` makes any event of a run,
`input_dataset` / `output_dataset` a dataset with its standard facets (schema, dataSource,
symlinks) plus whatever extra facets the caller passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.uuid import generate_new_uuid

from emitter import facets
from emitter.capture import RelationInfo
from emitter.facets import PRODUCER
from emitter.naming import dataset_name

DatasetLocation = tuple[str, str]  # (namespace, name)


def new_run_id(when: datetime | None = None) -> str:
    return str(generate_new_uuid(when))


def iso_time(when: datetime) -> str:
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).isoformat()


def build_run_event(
    event_type: str,
    event_time: datetime,
    run_id: str,
    job: tuple[str, str],
    *,
    run_facets: Mapping[str, Any] | None = None,
    job_facets: Mapping[str, Any] | None = None,
    inputs: list[InputDataset] | None = None,
    outputs: list[OutputDataset] | None = None,
) -> RunEvent:
    """One event of a run; `job` is (namespace, name); `event_type` START|RUNNING|COMPLETE|FAIL|ABORT."""
    namespace, name = job
    return RunEvent(
        eventType=RunState[event_type],
        eventTime=iso_time(event_time),
        run=Run(runId=run_id, facets=dict(run_facets or {})),
        job=Job(namespace=namespace, name=name, facets=dict(job_facets or {})),
        inputs=inputs or [],
        outputs=outputs or [],
        producer=PRODUCER,
    )


def dataset_location(relation: RelationInfo, table_namespace: str) -> DatasetLocation | None:
    """Where a relation's data lives by the naming spec; a catalog table without a storage
    location is named by the catalog; None for relations that are no dataset (local data)."""
    if relation.table_location:
        return dataset_name(relation.table_location)
    if relation.paths:
        return dataset_name(relation.paths[0])
    if relation.table is not None:
        return table_namespace, relation.table.qualified
    return None


def dataset_locations(relation: RelationInfo, table_namespace: str) -> list[DatasetLocation]:
    """Every dataset a relation stands for: one per path of a multi-path relation (a Kafka
    source subscribed to several topics), else `dataset_location`'s one (or none)."""
    if len(relation.paths) > 1 and not relation.table_location:
        return list(dict.fromkeys(dataset_name(path) for path in relation.paths))
    location = dataset_location(relation, table_namespace)
    return [location] if location is not None else []


def dataset_facets(relation: RelationInfo, location: DatasetLocation, table_namespace: str) -> dict[str, Any]:
    namespace, _ = location
    built: dict[str, Any] = {"dataSource": facets.datasource_facet(namespace)}
    if relation.schema:
        built["schema"] = facets.schema_facet(relation.schema)
    if relation.table is not None and location != (table_namespace, relation.table.qualified):
        built["symlinks"] = facets.symlinks_facet(relation.table, table_namespace)
    return built


def input_dataset(
    relation: RelationInfo, table_namespace: str, extra_facets: Mapping[str, Any] | None = None
) -> InputDataset | None:
    location = dataset_location(relation, table_namespace)
    if location is None:
        return None
    dataset_facet_map = {**dataset_facets(relation, location, table_namespace), **(extra_facets or {})}
    return InputDataset(namespace=location[0], name=location[1], facets=dataset_facet_map)


def output_dataset(
    relation: RelationInfo,
    table_namespace: str,
    extra_facets: Mapping[str, Any] | None = None,
    output_facets: Mapping[str, Any] | None = None,
) -> OutputDataset | None:
    location = dataset_location(relation, table_namespace)
    if location is None:
        return None
    dataset_facet_map = {**dataset_facets(relation, location, table_namespace), **(extra_facets or {})}
    return OutputDataset(
        namespace=location[0],
        name=location[1],
        facets=dataset_facet_map,
        outputFacets={k: v for k, v in (output_facets or {}).items() if v is not None},
    )
