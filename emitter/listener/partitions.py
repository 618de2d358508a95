"""The partitions each partitioned file input of an action read after partition pruning, from
Spark's executed plan: the selected partitions of every file scan, read by one Java helper
(`java/SparkLineageScannedPartitions.java`) in ONE py4j call per action, and only for actions
that read a partitioned file source.

The helper's JSON is parsed by `emitter.described.partitions_by_leaf`. Partition values come
from the partition directories' names (`k=v` segments below the dataset's root), as the
partitions a write touched do (`emitter.snapshots`). Dynamic partition
pruning is left out (it is decided at run time, per join): such a read reports the partitions
its static filters selected.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from emitter.capture import RelationInfo
from emitter.described import Partitions, partitions_by_leaf
from emitter.listener import janino

SCANNED_PARTITIONS_CLASS = "SparkLineageScannedPartitions"


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
