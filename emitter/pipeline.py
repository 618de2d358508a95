"""From captures to emitted OpenLineage events: the emitter's one composition point.

The listeners (py4j threads) hand batch actions to `Pipeline.accept(capture)`, which decides at
once which actions are ready to become runs (the dedupe of wrapper commands), and the events
are then built by `emit_actions(ready)` (`handle` does both); streaming callbacks go to
`handle_stream(capture)`. The attachment runs the building off Spark's listener bus, in
arrival order (`emitter.listener.worker`). Everything here is plain Python over
plain data: the dedupe of wrapper commands, column lineage, facets and events. The only way out
is `client.emit` (the transport). Column lineage comes from the pure engine (`emitter.plan` +
`emitter.lineage`); if it fails the event is still sent, without the columnLineage facet, and
a warning is logged.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, deque
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import unquote, urlsplit

from attrs import evolve
from openlineage.client.event_v2 import InputDataset, OutputDataset, RunEvent

from emitter import events, facets, lineage, plan, streams
from emitter.capture import (
    Capture,
    RelationInfo,
    SessionInfo,
    StreamCapture,
    StreamEnded,
    StreamProgress,
    StreamStarted,
)
from emitter.config import EmitterConfig
from emitter.naming import job_name, normalize, table_namespace
from emitter.snapshots import Snapshot, distinct_partitions

log = logging.getLogger(__name__)

# Commands that only wrap a nested data-writing command: Spark reports both (the nested one
# first, with a higher QueryExecution id); the nested one is the run, the wrapper is dropped.
WRAPPER_COMMANDS = frozenset(
    {
        "SaveAsV1TableCommand",
        "CreateDataSourceTableAsSelectCommand",
        "CreateHiveTableAsSelectCommand",
        "OptimizedCreateHiveTableAsSelectCommand",
        "InsertIntoDataSourceDirCommand",
        "InsertIntoHiveDirCommand",
    }
)
RECENT_WRITES_KEPT = 64
PENDING_KEPT = 16
NESTED_WRITE_FUNC = "file source write"
# Streaming runs remembered after they end, so late foreachBatch captures still find their parent.
REMEMBERED_RUNS = 256


class Pipeline:
    """Turns captures into runs under one parent application run and emits them."""

    def __init__(self, config: EmitterConfig, session: SessionInfo, client: Any) -> None:
        self.config = config
        self.session = session
        self.client = client
        self.table_namespace = table_namespace(session.warehouse_dir, session.metastore_uri)
        self.app_run_id = events.new_run_id()
        self.app_job = (config.namespace, normalize(session.app_name) or "spark")
        self.session_facets = facets.connect_session_facets(session.connect)  # on every run of the session
        self._pending: list[Capture] = []  # nested writes waiting for their wrapper commands, oldest first
        self._merged: deque[tuple[str, int]] = deque(maxlen=RECENT_WRITES_KEPT)  # (table, wrapper qe id)
        self._streams: OrderedDict[str, streams.StreamingRun] = OrderedDict()  # query id -> its live run
        self._lock = threading.Lock()
        self._app_completed = False
        self._closed = False  # after the application COMPLETE nothing more is emitted
        self.emitted_events = 0  # handed to the transport (which may still be delivering them)

    # application run -------------------------------------------------------------------
    def start_application(self, when: datetime | None = None) -> None:
        self.emit(self._application_event("START", when))

    def complete_application(self, when: datetime | None = None) -> None:
        with self._lock:
            if self._app_completed:
                return
            self._app_completed = True
        self.flush()
        self.emit(self._application_event("COMPLETE", when))
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def _application_event(self, event_type: str, when: datetime | None) -> RunEvent:
        return events.build_run_event(
            event_type,
            when or datetime.now(timezone.utc),
            self.app_run_id,
            self.app_job,
            run_facets={"processing_engine": facets.processing_engine_facet(self.session.spark_version), **self.session_facets},
            job_facets={"jobType": facets.job_type_facet("BATCH", "APPLICATION")},
        )

    # actions ---------------------------------------------------------------------------
    def handle(self, capture: Capture) -> list[RunEvent]:
        """Build and emit the events of one Spark action; returns them (empty when held or skipped)."""
        return self.emit_actions(self.accept(capture))

    def accept(self, capture: Capture) -> list[Capture]:
        """The actions ready to become runs now that `capture` arrived (cheap: no lineage yet).
        Called in the order Spark reports actions, so that `merges` always knows what is held."""
        if self._closed:
            return []
        with self._lock:
            return self._dedupe(capture)

    def merges(self, command: str, wrapper_id: int, wrapper_target: RelationInfo) -> bool:
        """Whether a write command (class, QueryExecution id, target) is a wrapper that will be
        merged into a nested write already handed over: then the listener need not copy its
        plan, leaves or snapshots."""
        if command not in WRAPPER_COMMANDS:
            return False
        table = wrapper_target.table.name.lower() if wrapper_target.table is not None else ""
        with self._lock:
            pending = any(wraps(wrapper_id, wrapper_target, nested) for nested in self._pending)
            return pending or self._wraps_merged(wrapper_id, table)

    def _wraps_merged(self, wrapper_id: int, table: str) -> bool:
        """Whether a wrapper is an outer wrapper of a write already merged (saveAsTable reports
        two: both carry the table, the outer one with the lower QueryExecution id)."""
        return any(name == table and qe_id > wrapper_id for name, qe_id in self._merged)

    @property
    def wants_reads(self) -> bool:
        """Whether actions that write nothing become runs (`emitReads`)."""
        return self.config.emit_reads

    def flush(self) -> list[RunEvent]:
        """Emit the nested writes still waiting for their wrappers (at the end of the application)."""
        with self._lock:
            ready, self._pending = self._pending, []
        return self.emit_actions(ready)

    def emit_actions(self, actions: list[Capture]) -> list[RunEvent]:
        """Build and emit the runs of actions `accept` returned; returns their events."""
        built = [event for action in actions for event in build_action_events(action, self)]
        for event in built:
            self.emit(event)
        return built

    def _dedupe(self, capture: Capture) -> list[Capture]:
        """The actions ready to become runs once `capture` arrived.

        Spark reports one saveAsTable / CTAS as a nested data write (first, with a higher
        QueryExecution id; see `is_nested_write`) and then each wrapper command. The nested
        write is held until its wrapper arrives and merged into it (the wrapper knows the
        catalog table; the nested write the path, metrics and plan); outer wrappers of an
        already merged write are dropped. Writes of other threads may come in between, so
        several nested writes can wait at once, each for the wrapper that `wraps` it.
        """
        if is_nested_write(capture):
            self._pending.append(capture)
            overflow = len(self._pending) - PENDING_KEPT
            if overflow > 0:  # a wrapper that never came: emit the write as it is
                ready, self._pending = self._pending[:overflow], self._pending[overflow:]
                return ready
            return []
        if capture.write is not None and capture.write.command in WRAPPER_COMMANDS:
            table = _table_name(capture)
            for pending in self._pending:
                if wraps(capture.query_execution_id, capture.write.target, pending):
                    self._pending.remove(pending)
                    self._merged.append((table, capture.query_execution_id))
                    return [merge_nested(pending, capture)]
            if self._wraps_merged(capture.query_execution_id, table):
                return []
        if capture.write is not None or (self.config.emit_reads and capture.leaves):
            return [capture]
        return []

    # streaming queries ---------------------------------------------------------------
    def handle_stream(self, capture: StreamCapture) -> list[RunEvent]:
        """Build and emit the event of one streaming callback; returns it (empty for a query not seen start)."""
        if self._closed:
            return []
        with self._lock:
            if isinstance(capture, StreamStarted):
                run: streams.StreamingRun | None = self._started_run(capture)
            else:
                run = self._streams.get(capture.query_id)
        if run is None or (not isinstance(capture, StreamStarted) and not streams.is_of(run, capture)):
            return []
        event = self._stream_event(run, capture)
        self.emit(event)
        return [event]

    def _started_run(self, started: StreamStarted) -> streams.StreamingRun:
        if self.config.full_job_name:
            job = (self.config.namespace, self.config.full_job_name)
        else:
            app = self.config.job_name or self.session.app_name
            job = streams.job_for(app, self.config.namespace, started.name, started.query_id, started.sink)
        lineage_facet = None
        if started.sink is not None and started.sink.relation is not None and started.plan_json:
            relations = streams.lineage_relations(started)
            lineage_facet = column_lineage_facet(started.plan_json, {}, None, relations, self.table_namespace)
        run = streams.StreamingRun(started, job, lineage_facet)
        self._streams.pop(started.query_id, None)
        self._streams[started.query_id] = run
        while len(self._streams) > REMEMBERED_RUNS:
            self._streams.popitem(last=False)
        return run

    def _stream_event(self, run: streams.StreamingRun, capture: StreamCapture) -> RunEvent:
        progress = capture if isinstance(capture, StreamProgress) else None
        run_facets: dict[str, Any] = {
            "processing_engine": facets.processing_engine_facet(self.session.spark_version),
            "parent": self.parent_facet(),
            **self.session_facets,
        }
        event_type = "START"
        if progress is not None:
            event_type = "RUNNING"
            run_facets["microBatch"] = facets.micro_batch_facet(progress.batch)
        elif isinstance(capture, StreamEnded):
            event_type = "COMPLETE"
            if capture.error_message is not None:
                event_type = "FAIL"
                run_facets["errorMessage"] = facets.error_facet(capture.error_message, capture.error_class)
        return events.build_run_event(
            event_type,
            capture.when,
            run.run_id,
            run.job,
            run_facets=run_facets,
            job_facets={"jobType": facets.job_type_facet("STREAMING", "JOB")},
            inputs=self._stream_inputs(run, progress),
            outputs=self._stream_outputs(run, progress),
        )

    def _stream_inputs(self, run: streams.StreamingRun, progress: StreamProgress | None) -> list[InputDataset]:
        started = run.started
        built: dict[tuple[str, str], InputDataset] = {}
        described: list[tuple[RelationInfo, Snapshot | None]] = [
            (source.relation, streams.source_snapshot(source, progress)) for source in started.sources if source.relation
        ]
        for key, relation in started.static_inputs.items():
            snapshot = progress.static_snapshots.get(key) if progress is not None else None
            described.append((relation, evolve(snapshot, batch_id=progress.batch.batch_id) if snapshot and progress else None))
        for relation, snapshot in described:
            for one in streams.one_per_path(relation):  # a Kafka source: a dataset per topic
                dataset = events.input_dataset(one, self.table_namespace, facets.snapshot_facets(snapshot))
                if dataset is not None:
                    built.setdefault((dataset.namespace, dataset.name), dataset)
        return list(built.values())

    def _stream_outputs(self, run: streams.StreamingRun, progress: StreamProgress | None) -> list[OutputDataset]:
        sink = run.started.sink
        if sink is None or sink.relation is None:
            return []
        extra: dict[str, Any] = {}
        if run.column_lineage is not None:
            extra["columnLineage"] = run.column_lineage
        extra.update(facets.snapshot_facets(streams.sink_snapshot(run, progress)))
        dataset = events.output_dataset(sink.relation, self.table_namespace, extra)
        return [dataset] if dataset is not None else []

    def with_micro_batch_sources(self, capture: Capture) -> Capture:
        """A write inside foreachBatch reads a LogicalRDD over its streaming query's output:
        give the engine the query's plan for it (as for a cached DataFrame) and the query's
        sources as leaves, so the write's inputs and column lineage name the stream's sources."""
        tag = capture.micro_batch
        if tag is None or not capture.plan_json:
            return capture
        with self._lock:
            run = self._streams.get(tag.query_id)
        if run is None or run.run_id != tag.run_id or not run.started.plan_json:
            return capture
        try:
            batch_keys = streams.micro_batch_leaf_keys(capture.plan_json, run.started.plan_json)
        except plan.PlanError as error:
            log.warning("micro-batch lineage not traced: %s", error)
            return capture
        if not batch_keys:
            return capture
        sources = {key: relation for key, relation in streams.lineage_relations(run.started).items() if key not in capture.leaves}
        return evolve(
            capture,
            cached_plan_jsons={**capture.cached_plan_jsons, **{key: run.started.plan_json for key in batch_keys}},
            leaves={**sources, **capture.leaves},
        )

    def parent_of(self, capture: Capture) -> Any:
        """The parent run facet of an action: the streaming run whose micro-batch ran it
        (`foreachBatch`), else the application run."""
        tag = capture.micro_batch
        if tag is not None:
            with self._lock:
                run = self._streams.get(tag.query_id)
            if run is not None and run.run_id == tag.run_id:
                root = (self.app_run_id, *self.app_job)
                return facets.parent_facet(run.run_id, run.job[0], run.job[1], root=root)
        return self.parent_facet()

    def emit(self, event: RunEvent) -> None:
        if self._closed:
            return
        try:
            self.client.emit(event)
        except Exception as error:  # noqa: BLE001 - a transport failure must never reach the job
            log.warning("OpenLineage event not emitted: %s", error)
        else:
            self.emitted_events += 1

    def parent_facet(self) -> Any:
        return facets.parent_facet(self.app_run_id, *self.app_job)


def is_nested_write(capture: Capture) -> bool:
    """Whether a write is the data write of a wrapper command still to come: Spark 4 names its
    action NESTED_WRITE_FUNC; on Spark 3.5 the listener tells which command it ran inside."""
    if capture.write is None or capture.write.command in WRAPPER_COMMANDS:
        return False
    return capture.func_name == NESTED_WRITE_FUNC or capture.wrapped_by in WRAPPER_COMMANDS


def _table_name(capture: Capture) -> str:
    table = capture.write.target.table if capture.write else None
    return table.name.lower() if table is not None else ""


def wraps(wrapper_id: int, wrapper_target: RelationInfo, nested: Capture) -> bool:
    """Whether a wrapper command (CTAS / saveAsTable: QueryExecution id, write target) is the
    command that ran the data write `nested` reported just before it. Spark reports the nested
    write first, with a higher QueryExecution id; since actions of other threads can come in
    between, the targets must agree too: the same location when the wrapper knows it, else a
    directory named after the table (a managed table's); with neither known, the order alone."""
    if nested.query_execution_id <= wrapper_id or nested.write is None:
        return False
    written = nested.write.target.paths[0] if nested.write.target.paths else None
    if written is None:
        return True
    if wrapper_target.table_location:
        return _local_path(written) == _local_path(wrapper_target.table_location)
    if wrapper_target.table is not None:
        return _local_path(written).rsplit("/", 1)[-1].lower() == wrapper_target.table.name.lower()
    return True


def _local_path(uri: str) -> str:
    return unquote(urlsplit(uri).path).rstrip("/")


def merge_nested(nested: Capture, wrapper: Capture) -> Capture:
    """One action from a nested data write and the command that wrapped it."""
    assert nested.write is not None and wrapper.write is not None
    target = nested.write.target
    if wrapper.write.target.table is not None:
        location = target.paths[0] if target.paths else wrapper.write.target.table_location
        target = evolve(target, table=wrapper.write.target.table, table_location=location)
    write = evolve(
        nested.write,
        command=wrapper.write.command,
        target=target,
        mode=wrapper.write.mode or nested.write.mode,
    )
    return evolve(
        nested,
        func_name=wrapper.func_name,
        query_execution_id=wrapper.query_execution_id,
        end_time=max(nested.end_time, wrapper.end_time),
        duration_ns=max(nested.duration_ns, wrapper.duration_ns),
        succeeded=nested.succeeded and wrapper.succeeded,
        error_message=nested.error_message or wrapper.error_message,
        error_stack=nested.error_stack or wrapper.error_stack,
        write=write,
        extraction_ms=nested.extraction_ms + wrapper.extraction_ms,
        micro_batch=nested.micro_batch or wrapper.micro_batch,
    )


def build_action_events(capture: Capture, pipeline: Pipeline) -> list[RunEvent]:
    """START and COMPLETE (or FAIL) of the run for one action."""
    capture = pipeline.with_micro_batch_sources(capture)
    run_id = events.new_run_id(capture.end_time)
    job = (pipeline.config.namespace, action_job_name(capture, pipeline))
    inputs = input_datasets(capture, pipeline.table_namespace)
    outputs = output_datasets(capture, pipeline.table_namespace)
    run_facets: dict[str, Any] = {
        "parent": pipeline.parent_of(capture),
        "processing_engine": facets.processing_engine_facet(pipeline.session.spark_version),
        **pipeline.session_facets,
    }
    job_facets = {"jobType": facets.job_type_facet("BATCH", "SQL_JOB" if capture.func_name == "command" else "JOB")}
    start_time = capture.end_time - timedelta(microseconds=capture.duration_ns // 1000)
    start = events.build_run_event(
        "START", start_time, run_id, job, run_facets=run_facets, job_facets=job_facets, inputs=inputs, outputs=outputs
    )
    final_facets = dict(run_facets)
    if not capture.succeeded:
        final_facets["errorMessage"] = facets.error_facet(capture.error_message or "unknown error", capture.error_stack)
    final = events.build_run_event(
        "COMPLETE" if capture.succeeded else "FAIL",
        capture.end_time,
        run_id,
        job,
        run_facets=final_facets,
        job_facets=job_facets,
        inputs=inputs,
        outputs=outputs,
    )
    return [start, final]


def action_job_name(capture: Capture, pipeline: Pipeline) -> str:
    """`{appName}.{command}.{output}`; conf `jobName` replaces the app part, `fullJobName` all of it."""
    if pipeline.config.full_job_name:
        return pipeline.config.full_job_name
    app = pipeline.config.job_name or pipeline.session.app_name
    if capture.write is None:
        first = next(iter(capture.leaves.values()), None)
        return job_name(app, capture.func_name, _relation_label(first) if first else "")
    return job_name(app, capture.write.command, _relation_label(capture.write.target))


def _relation_label(relation: RelationInfo) -> str:
    if relation.table is not None:
        return relation.table.qualified
    return relation.paths[0].split(":", 1)[-1] if relation.paths else relation.node_class


def input_datasets(capture: Capture, namespace_of_tables: str) -> list[InputDataset]:
    """One input per dataset read; its snapshot carries the partitions read when its scans tell them."""
    read = partitions_read_per_dataset(capture, namespace_of_tables)
    seen: dict[tuple[str, str], InputDataset] = {}
    for key, relation in capture.leaves.items():
        location = events.dataset_location(relation, namespace_of_tables)
        if location is None or location in seen:
            continue
        snapshot = capture.input_snapshots.get(key)
        if snapshot is not None and location in read:
            snapshot = evolve(snapshot, partitions=read[location])
        dataset = events.input_dataset(relation, namespace_of_tables, facets.snapshot_facets(snapshot))
        if dataset is not None:
            seen[location] = dataset
    return list(seen.values())


def partitions_read_per_dataset(
    capture: Capture, namespace_of_tables: str
) -> dict[tuple[str, str], tuple[dict[str, str | None], ...]]:
    """The partitions read per input dataset: of all its leaves (a self-join reads one dataset twice)."""
    found: dict[tuple[str, str], list[Mapping[str, str | None]]] = {}
    for key, partitions in capture.input_partitions.items():
        relation = capture.leaves.get(key)
        location = events.dataset_location(relation, namespace_of_tables) if relation is not None else None
        if location is not None:
            found.setdefault(location, []).extend(partitions)
    return {location: distinct_partitions(partitions) for location, partitions in found.items()}


def output_datasets(capture: Capture, namespace_of_tables: str) -> list[OutputDataset]:
    if capture.write is None:
        return []
    write = capture.write
    extra = facets.snapshot_facets(capture.output_snapshot)
    lineage_facet = column_lineage(capture, namespace_of_tables)
    if lineage_facet is not None:
        extra["columnLineage"] = lineage_facet
    dataset = events.output_dataset(
        write.target,
        namespace_of_tables,
        extra,
        {"outputStatistics": facets.output_statistics_facet(write.metrics)},
    )
    return [dataset] if dataset is not None else []


def column_lineage(capture: Capture, namespace_of_tables: str) -> Any | None:
    """The columnLineage facet of the write, or None when the engine cannot tell."""
    output_columns = capture.write.output_columns if capture.write else ()
    return column_lineage_facet(
        capture.plan_json, capture.cached_plan_jsons, output_columns, capture.leaves, namespace_of_tables, capture.root_class
    )


def column_lineage_facet(
    plan_json: str,
    cached_plan_jsons: Mapping[int, str],
    output_columns: tuple[str, ...] | None,
    relations: Mapping[int, RelationInfo],
    namespace_of_tables: str,
    what: str = "",
) -> Any | None:
    """The columnLineage facet of a plan's output, its leaves named by `relations` (by leaf key);
    None when the engine cannot tell."""
    try:
        root = plan.parse_plan(plan_json)
        write = lineage.write_command(root)
        query = write.query if write is not None else root
        columns = output_columns or (tuple(write.output_columns) if write is not None else None)
        cached = {key: plan.parse_plan(text) for key, text in cached_plan_jsons.items()}
        result = lineage.column_lineage(query, cached, columns or None)
        for warning in result.warnings:
            log.info("column lineage: %s", warning)
    except Exception as error:  # noqa: BLE001
        log.warning("column lineage not computed for %s: %s", what or "the plan", error)
        return None

    def locate(relation: Any) -> list[tuple[str, str]] | None:
        key = plan.leaf_key(relation)
        info = relations.get(key) if key is not None else None
        return events.dataset_locations(info, namespace_of_tables) if info is not None else None

    return facets.column_lineage_facet(result.columns, result.dataset, locate)
