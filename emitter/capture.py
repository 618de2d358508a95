"""What the listeners hand to the pipeline: plain data copied out of the JVM, nothing live.

A batch `Capture` holds everything one `QueryExecutionListener` callback tells us: plan JSON,
timing, the leaf relations and the write target (details the plan JSON drops), the snapshots of
inputs and output, the partitions the scans read, executed metrics, and the micro-batch the
action ran in (a `foreachBatch` write). Leaf relations are keyed by `plan.leaf_key`: the expr id
of their first output attribute, which both sides of the py4j boundary can compute.

A streaming query gives three captures: `StreamStarted`, `StreamProgress` per micro-batch and
`StreamEnded`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from attrs import field, frozen

from emitter.catalogs import CatalogInfo
from emitter.snapshots import MicroBatch, Snapshot


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
class PushedFilter:
    """A filter a V2 scan evaluates itself (an Iceberg scan's): its text and the columns it reads."""

    description: str
    columns: tuple[str, ...]


@frozen
class RelationInfo:
    """A leaf relation read by the query (or the target of the write)."""

    node_class: str
    paths: tuple[str, ...] = ()  # fully qualified URIs (file:/..., hdfs://..., s3a://...)
    format: str | None = None
    table: TableRef | None = None
    table_location: str | None = None
    schema: tuple[SchemaField, ...] = ()
    # a table format's own version, (kind, id): ("iceberg", "8744..."): the one the action's scan
    # read when the format told, else read off the live table
    table_version: tuple[str, str] | None = None
    partition_columns: tuple[str, ...] = ()  # of a partitioned file source read; an Iceberg table's partition fields
    v2_name: str | None = None  # a V2 table's own name (`Table.name()`; Iceberg: catalog.namespace.table)
    # filters the scan evaluates itself, which Spark may have dropped from the plan
    pushed_filters: tuple[PushedFilter, ...] = ()


@frozen
class WriteInfo:
    command: str  # class name of the writing command
    target: RelationInfo
    mode: str | None = None
    output_columns: tuple[str, ...] = ()
    metrics: Mapping[str, int] = field(factory=dict)  # numOutputRows, numOutputBytes, numFiles
    # a V2 write into a staged table: the data write of an atomic CTAS / RTAS still running
    into_staged_table: bool = False


@frozen
class ConnectSession:
    """The Spark Connect session a server-side attachment serves: who runs its actions."""

    session_id: str
    user_id: str


@frozen
class SessionInfo:
    """Facts about the Spark application, read once at attach time."""

    app_name: str
    app_id: str
    spark_version: str
    master: str = ""
    warehouse_dir: str = ""
    metastore_uri: str | None = None
    connect: ConnectSession | None = None  # a Spark Connect client's session on the server
    catalogs: tuple[CatalogInfo, ...] = ()  # the session catalog and those the conf configures


@frozen
class MicroBatchTag:
    """The streaming micro-batch an action ran in (a write inside `foreachBatch`)."""

    query_id: str
    run_id: str
    batch_id: int


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
    input_snapshots: Mapping[int, Snapshot] = field(factory=dict)  # leaf key -> snapshot
    # leaf key -> the partitions its scans read after partition pruning (partitioned file sources)
    input_partitions: Mapping[int, tuple[Mapping[str, str | None], ...]] = field(factory=dict)
    output_snapshot: Snapshot | None = None  # the write target after the write
    micro_batch: MicroBatchTag | None = None
    wrapped_by: str | None = None  # the class of the command this action ran nested in


@frozen
class Endpoint:
    """A streaming source or sink: Spark's description of it and the dataset it is (if any)."""

    description: str
    relation: RelationInfo | None
    is_file: bool = False


@frozen
class StreamStarted:
    """A streaming query (re)started: its sources, sink and plan, read once."""

    query_id: str
    run_id: str
    name: str | None
    when: datetime
    checkpoint_location: str | None = None
    sources: tuple[Endpoint, ...] = ()
    stream_leaves: Mapping[int, Endpoint] = field(factory=dict)  # leaf key -> streaming source
    static_inputs: Mapping[int, RelationInfo] = field(factory=dict)  # leaf key -> batch relation joined in
    sink: Endpoint | None = None
    plan_json: str = ""  # the query's analyzed plan; empty when it could not be read


@frozen
class SourceProgress:
    description: str
    start_offset: Any
    end_offset: Any


@frozen
class StreamProgress:
    """One micro-batch of a streaming query, with the snapshots the listener took for it."""

    query_id: str
    run_id: str
    when: datetime
    batch: MicroBatch
    sources: tuple[SourceProgress, ...] = ()
    static_snapshots: Mapping[int, Snapshot] = field(factory=dict)  # static leaf key -> snapshot
    sink_snapshot: Snapshot | None = None


@frozen
class StreamEnded:
    query_id: str
    run_id: str
    when: datetime
    error_message: str | None = None
    error_class: str | None = None


StreamCapture = StreamStarted | StreamProgress | StreamEnded
