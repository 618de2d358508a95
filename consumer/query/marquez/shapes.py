"""Marquez's JSON shapes of namespaces, runs, jobs, datasets and dataset versions, built from store rows
(plus what Marquez drops: column-lineage subtypes and masking)."""

from __future__ import annotations

from typing import Any

from consumer.query.db import as_json, iso


def namespace_shape(row: Any) -> dict:
    return {
        "name": row.name,
        "createdAt": iso(row.created_at),
        "updatedAt": iso(row.updated_at),
        "ownerName": row.owner_name or "anonymous",
        "description": row.description,
        "isHidden": False,
    }


def run_shape(row: Any, inputs: list, outputs: list) -> dict:
    started, ended = row.started_at, row.ended_at
    duration = None
    if started is not None and ended is not None:
        duration = int((ended - started).total_seconds() * 1000)
    return {
        "id": row.uuid,
        "createdAt": iso(row.created_at),
        "updatedAt": iso(row.updated_at),
        "nominalStartTime": iso(row.nominal_start_time),
        "nominalEndTime": iso(row.nominal_end_time),
        "state": row.state,
        "startedAt": iso(started),
        "endedAt": iso(ended),
        "durationMs": duration,
        "args": {},
        "jobVersion": {"namespace": row.job_namespace, "name": row.job_name, "version": row.job_version},
        "inputDatasetVersions": inputs,
        "outputDatasetVersions": outputs,
        "context": {},
        "facets": as_json(row.facets) or {},
    }


def job_shape(row: Any, inputs: list, outputs: list, latest_run: dict | None, tags: list, parents: dict) -> dict:
    parent = parents.get(row.parent_job_id)
    simple = row.name[len(parent) + 1 :] if parent and row.name.startswith(parent + ".") else row.name
    return {
        "id": {"namespace": row.namespace, "name": row.name},
        "type": row.type,
        "name": row.name,
        "simpleName": simple,
        "parentJobName": parent,
        "parentJobUuid": None,
        "createdAt": iso(row.created_at),
        "updatedAt": iso(row.updated_at),
        "namespace": row.namespace,
        "inputs": inputs,
        "outputs": outputs,
        "location": row.location,
        "context": {},
        "description": row.description,
        "latestRun": latest_run,
        "latestRuns": [latest_run] if latest_run else [],
        "facets": as_json(row.facets) or {},
        "currentVersion": row.current_version,
        "tags": tags,
        "labels": [],
    }


def dataset_shape(row: Any, fields: list, tags: list, column_lineage: list, last_modified: Any) -> dict:
    return {
        "id": {"namespace": row.namespace, "name": row.name},
        "type": row.type,
        "name": row.name,
        "physicalName": row.name,
        "createdAt": iso(row.created_at),
        "updatedAt": iso(row.updated_at),
        "namespace": row.namespace,
        "sourceName": row.source_name or row.namespace,
        "fields": fields,
        "tags": tags,
        "lastModifiedAt": iso(last_modified),
        "lastLifecycleState": (as_json(row.facets) or {}).get("lifecycleStateChange", {}).get("lifecycleStateChange"),
        "description": row.description,
        "currentVersion": row.current_version,
        "columnLineage": column_lineage or None,
        "facets": as_json(row.facets) or {},
        "deleted": bool(row.is_deleted),
    }


def version_shape(dataset: Any, row: Any, run: dict | None, column_lineage: list | None) -> dict:
    fields = [
        {
            "name": f.get("name"),
            "type": f.get("type") or "UNKNOWN",
            "tags": f.get("tags") or [],
            "description": f.get("description"),
        }
        for f in as_json(row.fields) or []
    ]
    return {
        "id": {"namespace": dataset.namespace, "name": dataset.name, "version": row.version},
        "type": dataset.type,
        "name": dataset.name,
        "physicalName": dataset.name,
        "createdAt": iso(row.created_at),
        "version": row.version,
        "namespace": dataset.namespace,
        "sourceName": dataset.source_name or dataset.namespace,
        "fields": fields,
        "tags": [],
        "lifecycleState": None,
        "description": dataset.description,
        "createdByRun": run,
        "columnLineage": column_lineage,
        # what the version said: its content's facets and its own (consumer.store.schema.dataset_version_contents)
        "facets": {**(as_json(row.content_facets) or {}), **(as_json(row.facets) or {})},
    }


def transformation_shape(row: Any) -> dict:
    return {
        "type": row.transformation_type,
        "subtype": row.transformation_subtype,
        "description": row.transformation_description or "",
        "masking": bool(row.masking),
    }
