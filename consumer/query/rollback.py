"""The Spark SQL statement that rolls an Iceberg or Delta table back to one of its snapshots, for
the correction plan; None for any other table, or when its events did not say enough.

- Iceberg: `CALL catalog.system.rollback_to_snapshot('db.table', id)`. The catalog comes from the
  dataset's `catalog` facet and the table's name in it from its `symlinks` facet (TABLE).
- Delta: `RESTORE TABLE delta.`location` TO VERSION AS OF n`: Delta restores any table by its
  location, which is the dataset's name (a catalog table is named by its location too).

The format is the snapshot's kind (what the emitter's `snapshot` facet says), else the dataset's
`storage` facet (what other producers send).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, func, select

from consumer.query.db import as_json
from consumer.store import schema as s

TABLE_FORMATS = ("iceberg", "delta")


def rollback_statements(conn: Connection, targets: Mapping[int, tuple[str, str, str | None]]) -> dict[int, str | None]:
    """Per dataset row id, the statement rolling it back to its snapshot; `targets` maps each id to
    (namespace, name, the snapshot to roll back to or None)."""
    ids = sorted(targets)
    if not ids:
        return {}
    facets = {
        row.id: as_json(row.facets) or {}
        for row in conn.execute(select(s.datasets.c.id, s.datasets.c.facets).where(s.datasets.c.id.in_(ids)))
    }
    lineage = s.snapshot_lineage
    kinds = dict(
        conn.execute(
            select(lineage.c.dataset_id, func.max(lineage.c.kind))
            .where(lineage.c.dataset_id.in_(ids), lineage.c.direction == "output")
            .group_by(lineage.c.dataset_id)
        ).all()
    )
    return {
        row_id: rollback_statement(namespace, name, snapshot, kinds.get(row_id), facets.get(row_id, {}))
        for row_id, (namespace, name, snapshot) in targets.items()
    }


def table_format(snapshot_kind: str | None, facets: Mapping[str, Any]) -> str | None:
    """iceberg, delta, or None: the snapshot's kind, else the `storage` facet's layer."""
    for kind in (snapshot_kind, (facets.get("storage") or {}).get("storageLayer")):
        if isinstance(kind, str) and kind.lower() in TABLE_FORMATS:
            return kind.lower()
    return None


def rollback_statement(
    namespace: str, name: str, snapshot: str | None, snapshot_kind: str | None, facets: Mapping[str, Any]
) -> str | None:
    """The statement restoring the dataset (`namespace`, `name`) to `snapshot`."""
    if snapshot is None or not snapshot.isdigit():
        return None
    layer = table_format(snapshot_kind, facets)
    if layer == "iceberg":
        return _iceberg_rollback(facets, snapshot)
    if layer == "delta":
        return f"RESTORE TABLE delta.{_quoted_identifier(_location(namespace, name))} TO VERSION AS OF {snapshot}"
    return None


def _iceberg_rollback(facets: Mapping[str, Any], snapshot: str) -> str | None:
    catalog = (facets.get("catalog") or {}).get("name")
    table = next(
        (
            identifier.get("name")
            for identifier in (facets.get("symlinks") or {}).get("identifiers") or ()
            if identifier.get("type") == "TABLE" and identifier.get("name")
        ),
        None,
    )
    if not isinstance(catalog, str) or not catalog or not isinstance(table, str):
        return None
    quoted_table = table.replace("'", "''")
    return f"CALL {_quoted_identifier(catalog)}.system.rollback_to_snapshot('{quoted_table}', {snapshot})"


def _location(namespace: str, name: str) -> str:
    """The URI the naming spec split into namespace and name: `file` + `/a/b` is `/a/b`,
    `s3://bucket` + `a/b` is `s3://bucket/a/b`, `hdfs://nn:8020` + `/a` is `hdfs://nn:8020/a`."""
    if namespace == "file":
        return name
    return f"{namespace.rstrip('/')}/{name.lstrip('/')}"


def _quoted_identifier(text: str) -> str:
    """A Spark SQL identifier: bare when it is a plain word, else in backquotes (doubled inside)."""
    if text.replace("_", "a").isalnum() and not text[0].isdigit():
        return text
    return "`" + text.replace("`", "``") + "`"
