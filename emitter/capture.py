"""What the listener hands to the pipeline: plain data copied out of the JVM, nothing live.

A `Capture` holds everything one Spark callback tells us (plan JSON, timing, the details of
leaf relations and of the write target that the plan JSON drops). Leaf relations are keyed
by `plan.leaf_key`: the expr id of their first output attribute, which both sides of the
py4j boundary can compute.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from attrs import field, frozen


@frozen
class TableRef:
    name: str
    database: str | None = None
    catalog: str | None = None

    @property
    def qualified(self) -> str:
        """`database.table` as the OpenLineage symlink names catalog tables."""
        return f"{self.database}.{self.name}" if self.database else self.name


@frozen
class SchemaField:
    name: str
    type: str
    fields: tuple[SchemaField, ...] = ()  # nested struct fields


@frozen
class RelationInfo:
    """A leaf relation read by the query (or the target of the write)."""

    node_class: str
    paths: tuple[str, ...] = ()  # fully qualified URIs (file:/..., hdfs://..., s3a://...)
    format: str | None = None
    table: TableRef | None = None
    table_location: str | None = None
    schema: tuple[SchemaField, ...] = ()
    options: Mapping[str, str] = field(factory=dict)  # redacted by the pipeline, not here
    # a table format's own version read off the live table, (kind, id): ("iceberg", "8744...")
    table_version: tuple[str, str] | None = None


@frozen
class WriteInfo:
    command: str  # class name of the writing command
    target: RelationInfo
    mode: str | None = None
    partition_columns: tuple[str, ...] = ()
    static_partitions: Mapping[str, str] = field(factory=dict)
    output_columns: tuple[str, ...] = ()
    metrics: Mapping[str, int] = field(factory=dict)  # numOutputRows, numOutputBytes, numFiles


@frozen
class SessionInfo:
    """Facts about the Spark application, read once at attach time."""

    app_name: str
    app_id: str
    spark_version: str
    master: str = ""
    warehouse_dir: str = ""
    metastore_uri: str | None = None


@frozen
class Capture:
    func_name: str  # Spark's action name: "command", "save", "collectToPython", ...
    query_execution_id: int
    end_time: datetime
    duration_ns: int
    plan_json: str  # optimizedPlan().toJSON()
    succeeded: bool = True
    error_message: str | None = None
    error_stack: str | None = None
    root_class: str = ""
    leaves: Mapping[int, RelationInfo] = field(factory=dict)
    cached_plan_jsons: Mapping[int, str] = field(factory=dict)  # InMemoryRelation key -> cached plan JSON
    write: WriteInfo | None = None
    extraction_ms: float = 0.0  # time spent copying this out of the JVM
    query_execution_uuid: str | None = None  # QueryExecution.queryId(): ties foreachBatch writes to their stream
    input_snapshots: Mapping[int, Any] = field(factory=dict)  # leaf_key -> emitter.snapshots.Snapshot
