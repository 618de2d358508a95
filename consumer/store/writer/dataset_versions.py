"""Dataset versions (`dataset_versions`) and what they say (`dataset_version_contents`, one row per
distinct content): each version keeps what its earliest event said and points to its content."""

from __future__ import annotations

from typing import Any

from consumer import json_codec
from consumer.store.rows import DatasetKey, Folded
from consumer.store.schema import dataset_version_contents, dataset_versions
from consumer.store.writer.batch import Batch


def write_version_contents(batch: Batch, folded: Folded) -> dict[str, int]:
    """The ids of the batch's version contents by hash, inserting those not stored yet."""
    wanted = {content_hash: (fields, facets) for _, _, _, content_hash, fields, facets, _, _ in folded.versions}

    def row(content_hash: str) -> dict[str, Any]:
        fields, facets = wanted[content_hash]
        return {
            "content_hash": content_hash,
            "fields": None if fields is None else json_codec.Fragment(fields),
            "facets": json_codec.object_of(facets),
        }

    return batch.ids_inserting_missing(dataset_version_contents, ["content_hash"], wanted, row)


def write_dataset_versions(
    batch: Batch, folded: Folded, dataset_ids: dict[DatasetKey, int], run_ids: dict[str, int], content_ids: dict[str, int]
) -> None:
    """Each version keeps what its earliest event said (and the run of that event, for an output)."""
    values = [
        {
            "dataset_id": dataset_ids[dataset],
            "version": version,
            "run_id": None if run is None else run_ids.get(run),
            "content_id": content_ids[content_hash],
            "facets": json_codec.object_of(own_facets),
            "created_at": created_at,
        }
        for dataset, version, run, content_hash, _, _, own_facets, created_at in folded.versions
    ]
    if values:
        statement = batch.insert(dataset_versions)
        excluded = statement.excluded
        statement = statement.on_conflict_do_update(
            index_elements=["dataset_id", "version"],
            set_={name: excluded[name] for name in ("run_id", "content_id", "facets", "created_at")},
            where=excluded.created_at < dataset_versions.c.created_at,
        )
        batch.many(statement, sorted(values, key=lambda row: (row["dataset_id"], row["version"])))
