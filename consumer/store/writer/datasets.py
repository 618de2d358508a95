"""Datasets and their fields (`datasets`, `dataset_fields`): the batch's merged into the stored
rows, each field's clock (the time of the newest schema that carried it) kept on its dataset's
row; and the ids of stored datasets and fields the current lineage names."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import bindparam, select, type_coerce, update

from consumer import json_codec
from consumer.store.rows import DATASET_VALUES, DatasetKey, Folded, stamp
from consumer.store.schema import UtcDateTime, chunks, dataset_fields, datasets, namespaces
from consumer.store.writer.batch import Batch, merged_with_stored

# A field's clock in its dataset's `merged_at` (see write_datasets).
FIELD = "fields."

# The columns of a field a batch merges into, in this order (created_at the earliest).
_FIELD_VALUES = ("type", "description", "tags", "from_schema", "created_at")


def write_datasets(
    batch: Batch, folded: Folded, namespace_ids: dict[str, int]
) -> tuple[dict[DatasetKey, int], dict[DatasetKey, dict[str, str]]]:
    """The batch's datasets' ids, and the field clocks each had before the batch: per field the
    time of the newest schema that carried it (`merged_at["fields.<name>"]`, a stamp), which
    decides whether the batch's schema replaces a field's type and description. The clocks
    live on the dataset row, which every event of a dataset rewrites anyway, so a repeated
    schema writes no field row."""
    existing = batch.stored_for_merge(
        datasets,
        [datasets.c.namespace_id, datasets.c.name],
        {(namespace_ids[namespace], name): fold.merged for (namespace, name), fold in folded.datasets.items()},
    )
    batch_clocks: dict[DatasetKey, dict[str, str]] = defaultdict(dict)
    for dataset, name, _, _, _, from_schema, _, updated_at in folded.fields:
        if from_schema:
            batch_clocks[dataset][f"{FIELD}{name}"] = stamp(updated_at)
    stored_clocks: dict[DatasetKey, dict[str, str]] = {}
    values = []
    for (namespace, name), fold in folded.datasets.items():
        key = (namespace_ids[namespace], name)
        current = existing.get(key)
        merged = merged_with_stored(current, DATASET_VALUES, fold.merged)
        stored_clocks[(namespace, name)] = {
            k[len(FIELD) :]: at for k, at in ((current or {}).get("merged_at") or {}).items() if k.startswith(FIELD)
        }
        times = dict(merged.times)
        for clock, at in batch_clocks.get((namespace, name), {}).items():
            times[clock] = max(at, times.get(clock, ""))
        updated = merged.newest()
        if updated is None:  # known only from column-lineage edges
            updated = max([fold.last_named, *([current["updated_at"]] if current else [])])
        row = {column: merged.values.get(column) for column in DATASET_VALUES}
        row["type"] = row["type"] or "DB_TABLE"
        row["database_name"] = row["database_name"] or namespace
        row["table_name"] = row["table_name"] or name
        values.append(
            {
                "namespace_id": key[0],
                "name": name,
                "is_deleted": False,
                **row,
                "facets": json_codec.object_of(merged.facets),
                "merged_at": times,
                "created_at": min([fold.first_named, *([current["created_at"]] if current else [])]),
                "updated_at": updated,
            }
        )
    ids = batch.upsert(datasets, ["namespace_id", "name"], values)
    return {(namespace, name): ids[(namespace_ids[namespace], name)] for namespace, name in folded.datasets}, stored_clocks


def write_fields(
    batch: Batch, folded: Folded, dataset_ids: dict[DatasetKey, int], clocks: dict[DatasetKey, dict[str, str]]
) -> dict[tuple[int, str], int]:
    """The batch's fields merged into the stored ones: a schema's type/description/tags when it is
    at least as new as the field's clock, or when the stored row came from edges alone; tags
    the schema leaves out keep those set through the API; created_at the earliest. Only rows
    that change are written. The ids of every field of the batch's datasets."""
    stored = _stored_fields(batch, sorted({dataset_ids[field[0]] for field in folded.fields}))
    as_stored = _as_stored_time(batch)
    inserts: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    for dataset, name, type_, description, tags, from_schema, created_at, updated_at in folded.fields:
        dataset_id = dataset_ids[dataset]
        current = stored.get((dataset_id, name))
        if current is None:
            row = {"dataset_id": dataset_id, "name": name, "type": type_, "description": description}
            inserts.append({**row, "tags": tags, "from_schema": from_schema, "created_at": created_at})
            continue
        field_id, *values = current
        merged = list(values)
        if as_stored(created_at) < merged[4]:
            merged[4] = created_at
        clock = clocks.get(dataset, {}).get(name)
        if from_schema and (not merged[3] or clock is None or stamp(updated_at) >= clock):
            merged[0:2], merged[3] = (type_, description), True
            if tags is not None:
                merged[2] = tags
        if merged != values:
            updates.append(dict(zip(("field_id", *_FIELD_VALUES), (field_id, *merged), strict=True)))
    if inserts:
        statement = batch.insert(dataset_fields).on_conflict_do_nothing(index_elements=["dataset_id", "name"])
        # By dataset, each one's in the fold's order (a new dataset's field ids follow its schema).
        batch.many(statement, sorted(inserts, key=lambda row: row["dataset_id"]))
    if updates:
        statement = (
            update(dataset_fields)
            .where(dataset_fields.c.id == bindparam("field_id"))
            .values({column: bindparam(column) for column in _FIELD_VALUES})
        )
        batch.many(statement, sorted(updates, key=lambda row: row["field_id"]))
    ids = {key: row[0] for key, row in stored.items()}
    if inserts:
        ids.update(stored_field_ids(batch, sorted({row["dataset_id"] for row in inserts})))
    return ids


def _stored_fields(batch: Batch, dataset_id_list: list[int]) -> dict[tuple[int, str], tuple[Any, ...]]:
    """(id, *_FIELD_VALUES) of every stored field of the datasets, by (dataset id, name). The
    creation time as the driver gives it (SQLite: naive, in UTC; _as_stored_time): a batch
    reads tens of thousands of fields, and converting each one's time was a third of the read."""
    c = dataset_fields.c
    as_read = {"created_at": type_coerce(c.created_at, UtcDateTime.impl)}
    columns = (c.dataset_id, c.name, c.id, *(as_read.get(name, c[name]) for name in _FIELD_VALUES))
    found: dict[tuple[int, str], tuple[Any, ...]] = {}
    for chunk in chunks(dataset_id_list):
        for row in batch.connection.execute(select(*columns).where(c.dataset_id.in_(chunk))):
            found[(row[0], row[1])] = tuple(row[2:])
    return found


def _as_stored_time(batch: Batch) -> Callable[[datetime], datetime]:
    """A batch's time in the form _stored_fields reads times in, to compare the two (a batch has
    few distinct times: each is converted once)."""
    if batch.dialect == "postgresql":
        return lambda at: at
    converted: dict[datetime, datetime] = {}

    def naive_utc(at: datetime) -> datetime:
        found = converted.get(at)
        if found is None:
            found = converted[at] = at.astimezone(timezone.utc).replace(tzinfo=None)
        return found

    return naive_utc


def stored_field_ids(batch: Batch, dataset_id_list: list[int]) -> dict[tuple[int, str], int]:
    """Ids of every stored field of the datasets, by (dataset id, name)."""
    columns = (dataset_fields.c.dataset_id, dataset_fields.c.name, dataset_fields.c.id)
    found: dict[tuple[int, str], int] = {}
    for chunk in chunks(dataset_id_list):
        for dataset_id, name, field_id in batch.connection.execute(
            select(*columns).where(dataset_fields.c.dataset_id.in_(chunk))
        ).all():
            found[(dataset_id, name)] = field_id
    return found


def stored_dataset_ids(batch: Batch, keys: Sequence[DatasetKey]) -> dict[DatasetKey, int]:
    """Ids of stored datasets by (namespace, name)."""
    found: dict[DatasetKey, int] = {}
    wanted = set(keys)
    for chunk in chunks(sorted({name for _, name in wanted})):
        for row in batch.connection.execute(
            select(datasets.c.id, namespaces.c.name.label("namespace"), datasets.c.name)
            .join(namespaces, namespaces.c.id == datasets.c.namespace_id)
            .where(datasets.c.name.in_(chunk))
        ):
            if (row.namespace, row.name) in wanted:
                found[(row.namespace, row.name)] = row.id
    return found
