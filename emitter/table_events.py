"""What a table format itself reported of one action (`java/SparkLineageIceberg.java`, through
the action's description): the snapshot each Iceberg scan read and each Iceberg write committed,
which replace the versions read off the live tables (`emitter.described`). Pure."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from attrs import evolve, frozen

from emitter.capture import RelationInfo
from emitter.snapshots import ICEBERG_PROVIDER, Snapshot, distinct_partitions

Partitions = tuple[Mapping[str, str | None], ...]


@frozen
class TableEvent:
    """What a table format itself reported of one action (`java/SparkLineageIceberg.java`): a
    scan that planned its files (`kind="scan"`) or a write that committed (`"commit"`), with the
    table by the format's own name (Iceberg: catalog.namespace.table) and the snapshot id; a
    commit to the action's write target carries the partitions it changed and its parent snapshot
    (the state it was committed on; None for a table's first snapshot)."""

    kind: str
    table: str
    snapshot_id: str
    partitions: Partitions | None = None
    parent_id: str | None = None


def table_event(event: Mapping[str, Any]) -> TableEvent:
    partitions = event.get("partitions")
    return TableEvent(
        kind=str(event["event"]),
        table=str(event["table"]),
        snapshot_id=str(event["snapshot"]),
        partitions=distinct_partitions(partitions) if partitions is not None else None,
        parent_id=str(event["parent"]) if event.get("parent") is not None else None,
    )


def with_scanned_versions(leaves: Mapping[int, RelationInfo], events: Iterable[TableEvent]) -> dict[int, RelationInfo]:
    """`leaves`, each Iceberg table versioned by the snapshot the action's scans of it read: when
    they all read one snapshot (a time-travel read's pinned one, or the one current when the scan
    was planned, not the one current when the listener looks: the action may have written the
    table itself since). A table scanned at several snapshots (a self-join across time) keeps the
    version its relation tells (the pinned one); one not scanned (a cached read) too, unless that
    version is the one the action itself committed (a DELETE Iceberg runs on metadata alone plans no
    scan, and its relation tells the table's current snapshot when the listener looks): it read
    the state that commit was made on, the commit's parent."""
    scanned: dict[str, set[str]] = defaultdict(set)
    parents: dict[tuple[str, str], str] = {}  # (table, committed snapshot) -> its parent
    for event in events:
        if event.kind == "scan":
            scanned[event.table].add(event.snapshot_id)
        elif event.kind == "commit" and event.parent_id is not None:
            parents[(event.table, event.snapshot_id)] = event.parent_id
    versioned = dict(leaves)
    for key, relation in leaves.items():
        if not _is_iceberg_relation(relation):
            continue
        snapshots = scanned.get(relation.v2_name or "")
        if snapshots is not None and len(snapshots) == 1:
            versioned[key] = evolve(relation, table_version=(ICEBERG_PROVIDER, next(iter(snapshots))))
        elif snapshots is None and relation.table_version is not None:
            parent = parents.get((relation.v2_name or "", relation.table_version[1]))
            if parent is not None:
                versioned[key] = evolve(relation, table_version=(ICEBERG_PROVIDER, parent))
    return versioned


def committed_snapshot(target: RelationInfo, events: Iterable[TableEvent]) -> Snapshot | None:
    """The snapshot an action's write committed to its target, as Iceberg reported the commit (the
    last one, should it commit twice), with the partitions it changed; None when it reported none."""
    if not _is_iceberg_relation(target):
        return None
    commits = [event for event in events if event.kind == "commit" and event.table == target.v2_name]
    if not commits:
        return None
    return Snapshot(commits[-1].snapshot_id, ICEBERG_PROVIDER, partitions=commits[-1].partitions)


def _is_iceberg_relation(relation: RelationInfo) -> bool:
    return relation.v2_name is not None and (relation.format or "").lower() == ICEBERG_PROVIDER


# The selectors Iceberg's catalogs accept as a last identifier part, naming a state of the table
# before it (`db.t.snapshot_id_123`, as `spark.read.option("snapshot-id", 123).format("iceberg")` reads).
_ICEBERG_SELECTOR = re.compile(r"(snapshot_id_\d+|at_timestamp_\d+|branch_.+|tag_.+)")


def iceberg_table_identifier(name: str, namespace: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """(name, namespace) of the table an Iceberg identifier names, without a snapshot, timestamp,
    branch or tag selector: `db.t.snapshot_id_123` is table `db.t`."""
    if namespace and _ICEBERG_SELECTOR.fullmatch(name):
        return namespace[-1], namespace[:-1]
    return name, namespace
