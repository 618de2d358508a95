"""The partitions each partitioned file input of an action read after partition pruning, from
Spark's executed plan: the selected partitions of every file scan, read by one Java helper
(`java/SparkLineageScannedPartitions.java`) in ONE py4j call per action, and only for actions
that read a partitioned file source.

Partition values come from the partition directories' names (`k=v` segments below the
dataset's root), as the partitions a write touched do (`emitter.snapshots`). Dynamic partition
pruning is left out (it is decided at run time, per join): such a read reports the partitions
its static filters selected.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from emitter.capture import RelationInfo
from emitter.listener import janino
from emitter.listener.files import location_of
from emitter.snapshots import partitions_read, path_of

SCANNED_PARTITIONS_CLASS = "SparkLineageScannedPartitions"

Partitions = tuple[Mapping[str, str | None], ...]


class ScannedPartitions:
    """The helper instance, made once per listener (an instance costs py4j calls of its own)."""

    def __init__(self, gateway: Any) -> None:
        self.helper: Any = janino.optional_instance(gateway, SCANNED_PARTITIONS_CLASS, "inputs carry no partitions")

    def read(self, query_execution: Any, leaves: Mapping[int, RelationInfo]) -> dict[int, Partitions]:
        """Leaf key -> the partitions read, for the partitioned file sources among `leaves`; no
        JVM call when none is partitioned."""
        if self.helper is None or not any(relation.partition_columns for relation in leaves.values()):
            return {}
        text = janino.read_result(self.helper.of(query_execution))
        return partitions_by_leaf(json.loads(text or "[]"), leaves)


def partitions_by_leaf(scans: Iterable[Mapping[str, Any]], leaves: Mapping[int, RelationInfo]) -> dict[int, Partitions]:
    """The helper's scans (`key`, root `paths`, partition `directories`) as partitions per leaf.
    A scan is the leaf its key names, else the one leaf over the same root paths; several scans
    of one leaf (a self-union) add up."""
    directories: dict[int, list[str]] = defaultdict(list)
    for scan in scans:
        key = scan.get("key")
        if key not in leaves:
            key = _leaf_over(scan.get("paths") or (), leaves)
        if key is not None and leaves[key].partition_columns:
            directories[key].extend(scan.get("directories") or ())
    return {
        key: partitions_read(location_of(leaves[key]), found, leaves[key].partition_columns) for key, found in directories.items()
    }


def _leaf_over(paths: Iterable[str], leaves: Mapping[int, RelationInfo]) -> int | None:
    roots = sorted(path_of(path) for path in paths)
    matching = [key for key, relation in leaves.items() if sorted(path_of(path) for path in relation.paths) == roots]
    return matching[0] if roots and len(matching) == 1 else None
