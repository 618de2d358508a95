"""Namespaces: every job and dataset namespace of a batch, with the earliest and latest time it
was named; their ids by name."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table, case

from consumer.store.rows import Folded
from consumer.store.schema import namespaces
from consumer.store.writer.batch import Batch


def _earliest_latest(batch: Batch, table: Table, first: str, last: str) -> dict[str, Any]:
    statement = batch.insert(table)
    excluded = statement.excluded
    return {
        first: case((excluded[first] < table.c[first], excluded[first]), else_=table.c[first]),
        last: case((excluded[last] > table.c[last], excluded[last]), else_=table.c[last]),
    }


def write_namespaces(batch: Batch, folded: Folded) -> dict[str, int]:
    spans = folded.namespaces
    statement = batch.insert(namespaces)
    statement = statement.on_conflict_do_update(
        index_elements=["name"], set_=_earliest_latest(batch, namespaces, "created_at", "updated_at")
    )
    batch.many(statement, [{"name": name, "created_at": spans[name][0], "updated_at": spans[name][1]} for name in sorted(spans)])
    return batch.select_ids(namespaces, [namespaces.c.name], sorted(spans))
