"""The offset ranges batch reads of Kafka topics consumed, from Spark's executed plan: read by one
Java helper (`java/SparkLineageKafkaReads.java`) in ONE py4j call per action, and only for actions
that read Kafka. Parsed by `emitter.described.kafka_reads_by_leaf` into a snapshot per leaf."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from emitter.capture import RelationInfo
from emitter.described import kafka_reads_by_leaf
from emitter.listener import janino
from emitter.naming import KAFKA_SCHEME
from emitter.snapshots import Snapshot

KAFKA_READS_CLASS = "SparkLineageKafkaReads"


class KafkaReads:
    """The helper instance, made once per listener."""

    def __init__(self, gateway: Any) -> None:
        self.helper: Any = janino.optional_instance(gateway, KAFKA_READS_CLASS, "Kafka batch reads carry no offsets")

    def read(self, query_execution: Any, leaves: Mapping[int, RelationInfo]) -> dict[int, Snapshot]:
        """Leaf key -> the offsets read, for the Kafka leaves among `leaves`; no JVM call when none is."""
        if self.helper is None or not any(relation.format == KAFKA_SCHEME for relation in leaves.values()):
            return {}
        text = janino.read_result(self.helper.of(query_execution))
        return kafka_reads_by_leaf(json.loads(text or "[]"), leaves)
