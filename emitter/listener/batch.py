"""The batch listener: a Python `QueryExecutionListener` (called through py4j on Spark's listener
bus thread) that copies each action into one complete `Capture` (plan, leaves, write target,
metrics, input and output snapshots, the partitions its scans read, the micro-batch it ran in),
lets its wrapper-command dedupe (`emitter.dedupe`) decide which actions become runs, and hands
those to the attachment's pipeline thread (`worker.PipelineWorker.handle_actions`).

It must never disturb the job: every callback is wrapped, failures are logged and dropped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol

from attrs import evolve

from emitter import described as described_json
from emitter.capture import Capture, MicroBatchTag, RelationInfo, WriteInfo
from emitter.dedupe import WRAPPER_COMMANDS, WrapperDedupe
from emitter.described import ListenerCall
from emitter.listener import files, janino, jvm
from emitter.listener.kafka_reads import KafkaReads
from emitter.listener.partitions import Partitions, ScannedPartitions
from emitter.snapshots import Snapshot
from emitter.table_events import TableEvent, committed_snapshot, with_scanned_versions

log = logging.getLogger(__name__)

STACK_TRACE_LIMIT = 16_000
LISTENER_NAME = "OpenLineage batch listener"


class ActionSink(Protocol):
    """Where the listener hands the actions that become runs (`worker.PipelineWorker`)."""

    @property
    def closed(self) -> bool: ...

    def handle_actions(self, actions: list[Capture]) -> None: ...


class BatchListener:
    """Implements org.apache.spark.sql.util.QueryExecutionListener for py4j."""

    class Java:
        implements = ["org.apache.spark.sql.util.QueryExecutionListener"]

    def __init__(
        self, gateway: Any, dedupe: WrapperDedupe, sink: ActionSink, hadoop_conf: Any = None, tagger: Any = None
    ) -> None:
        self.dumper = jvm.PlanDumper(gateway)
        self.actions = jvm.ActionDescriber(gateway, jvm.WriteDescriber(gateway), tagger, WRAPPER_COMMANDS, dedupe.emit_reads)
        self.scanned_partitions = ScannedPartitions(gateway)
        self.kafka_reads = KafkaReads(gateway)
        self.gateway = gateway
        self.dedupe = dedupe  # called on Spark's listener bus thread only
        self.sink = sink
        self.hadoop_conf = hadoop_conf  # for listing non-local write targets
        self.tagger = tagger  # the JVM micro-batch tagger (java/SparkLineageMicroBatchTags.java)
        self.extraction_ms: list[float] = []  # per captured action, for benchmarks and reports

    def toString(self) -> str:  # noqa: N802 - what the JVM prints for this listener
        return LISTENER_NAME

    def onSuccess(self, func_name: str, query_execution: Any, duration_ns: int) -> None:  # noqa: N802
        self._on_action(func_name, query_execution, duration_ns, None)

    def onFailure(self, func_name: str, query_execution: Any, exception: Any) -> None:  # noqa: N802
        self._on_action(func_name, query_execution, None, exception)

    def _on_action(self, func_name: str, query_execution: Any, duration_ns: int | None, exception: Any) -> None:
        try:
            call = described_json.parse_listener_call(str(func_name))
            if self.sink.closed:
                janino.read_result(call.description)  # removes the temp file a long description is in
                return
            capture = self.capture(call, query_execution, duration_ns, exception)
            if capture is not None:
                self.sink.handle_actions(self.dedupe.accept(capture))
        except Exception as error:  # never let lineage break the job
            name = str(func_name).split(described_json.LISTENER_CALL_SEPARATOR, 1)[0]  # not the description: it holds the plan
            log.warning("OpenLineage: action %r not captured: %s", name, error, exc_info=log.isEnabledFor(10))

    def capture(self, call: ListenerCall, query_execution: Any, duration_ns: int | None, exception: Any) -> Capture | None:
        """The capture of one action; None for a read when reads are not emitted. What the JVM
        tells of it comes with the callback (`call`, described by the listener's registration,
        `jvm.QueryListenerRegistration`), else in one helper round trip (`jvm.ActionDescriber`);
        its extraction time counts the JVM's describing either way. A wrapper command
        (CTAS, saveAsTable) the dedupe will merge into the nested write it already has keeps
        only its target, mode and outcome: its plan (the whole query again), leaves and
        snapshots are not copied out; one it will not merge has them read in a second trip."""
        if not (self.actions.available and self.dumper.available):
            return None  # without the Java helpers nothing is read (logged once when they failed to compile)
        started = time.perf_counter()
        end_time = datetime.now(timezone.utc)
        action = self.actions.describe(query_execution, self.dumper, call.description)
        write = self.actions.write_of(action)
        if write is None and not self.dedupe.emit_reads:
            return None
        merged = write is not None and self.dedupe.merges(write.command, action.query_execution_id, write.target)
        leaves: Mapping[int, RelationInfo] = {}
        cached_plans: Mapping[int, str] = {}
        input_snapshots: Mapping[int, Snapshot] = {}
        input_partitions: Mapping[int, Partitions] = {}
        plan_json = ""
        if not merged:
            described = action.plan if action.plan is not None else self.dumper.describe(query_execution.optimizedPlan())
            leaves, cached_plans, input_snapshots, plan_json = self._read_plan(described, action.table_events)
            if write is None and not leaves:
                return None
            input_partitions = jvm.guarded({}, self.scanned_partitions.read, query_execution, leaves)
            input_snapshots = {**input_snapshots, **jvm.guarded({}, self.kafka_reads.read, query_execution, leaves)}
        duration = int(duration_ns or 0)
        written_since = end_time - timedelta(microseconds=duration // 1000)
        error_message, error_stack = _error_text(exception, self.gateway) if exception is not None else (None, None)
        wrapped_by, micro_batch = self._tags(action.tags)
        capture = Capture(
            func_name=call.func_name,
            query_execution_id=action.query_execution_id,
            end_time=end_time,
            duration_ns=duration,
            plan_json=plan_json,
            succeeded=exception is None,
            error_message=error_message,
            error_stack=error_stack,
            root_class=action.root_class,
            leaves=leaves,
            cached_plan_jsons=cached_plans,
            write=write,
            input_snapshots=input_snapshots,
            input_partitions=input_partitions,
            output_snapshot=None
            if merged and not _is_delta(write)
            else self._output_snapshot(write, written_since, action.table_events),
            micro_batch=micro_batch,
            wrapped_by=wrapped_by,
        )
        extraction_ms = (time.perf_counter() - started) * 1000 + call.describe_ms
        self.extraction_ms.append(extraction_ms)
        return evolve(capture, extraction_ms=extraction_ms)

    def _read_plan(
        self, described: described_json.DescribedPlan, table_events: tuple[TableEvent, ...] = ()
    ) -> tuple[dict[int, RelationInfo], dict[int, str], dict[int, Snapshot], str]:
        """Every leaf relation keyed by leaf_key, the plans cached DataFrames hold, the snapshot
        of every input, and the plan's JSON, from the helper's description of the plan (plus
        listings where Spark's file index did not already list the files); an Iceberg table's
        snapshot is the one the action's scans read (`table_events`)."""
        leaves, cached_plans = described_json.described_leaves(described)
        leaves = with_scanned_versions(leaves, table_events)
        input_snapshots: dict[int, Snapshot] = {}
        by_listing: dict[tuple[Any, ...], Snapshot | None] = {}  # a table read several times is listed once
        for description in described.leaves:
            key = description.get("key")
            if (
                key in leaves
                and key not in input_snapshots
                and leaves[key].table_version is None  # a Delta read: the version its file index read
                and description.get("relation") == "HadoopFsRelation"
            ):
                listing = (
                    description.get("location") if description.get("table") else None,
                    tuple(description.get("paths", ())),
                    description.get("files"),
                )
                if listing not in by_listing:
                    by_listing[listing] = jvm.guarded(
                        None, files.described_input_snapshot, self.gateway, self.hadoop_conf, description
                    )
                snapshot = by_listing[listing]
                if snapshot is not None:
                    input_snapshots[key] = snapshot
        for key, relation in leaves.items():  # Hive and V2 tables, Delta, listing failures
            if key not in input_snapshots:
                snapshot = jvm.guarded(None, files.relation_snapshot, self.gateway, self.hadoop_conf, relation, None, False)
                if snapshot is not None:
                    input_snapshots[key] = snapshot
        return leaves, cached_plans, input_snapshots, described.plan_json

    def _output_snapshot(
        self, write: WriteInfo | None, written_since: datetime, table_events: tuple[TableEvent, ...] = ()
    ) -> Snapshot | None:
        """The write target after the write, with the partitions written since the action began;
        for an Iceberg table the snapshot its commit reported, with the partitions it changed."""
        if write is None:
            return None
        committed = committed_snapshot(write.target, table_events)
        if committed is not None:
            return committed
        since_ms = int(written_since.timestamp() * 1000)
        return jvm.guarded(None, files.relation_snapshot, self.gateway, self.hadoop_conf, write.target, since_ms, True)

    def _tags(self, tags: str | None) -> tuple[str | None, MicroBatchTag | None]:
        """The class of the command this action ran nested in (a CTAS's data write), and the
        micro-batch it ran in (foreachBatch), from the JVM tagger's tags (`tagsOf`)."""
        if self.tagger is None:
            return None, None
        node_name, _, description = str(tags or "").partition("\0")
        wrapper = node_name.rsplit(" ", 1)[-1] if node_name else None
        return wrapper, described_json.parse_batch_description(description) if description else None


def _is_delta(write: WriteInfo | None) -> bool:
    """Whether a write's target is a Delta table: a merged wrapper's own snapshot is then read (its
    log, cheap), as the data write of a Delta CTAS into a staged table knows no location."""
    return write is not None and (write.target.format or "").lower() == "delta"


def _error_text(exception: Any, gateway: Any) -> tuple[str, str | None]:
    message = str(exception.toString())
    try:
        stack = str(gateway.jvm.org.apache.spark.util.Utils.exceptionString(exception))[:STACK_TRACE_LIMIT]
    except Exception:  # noqa: BLE001
        stack = None
    return message, stack
